"""A SageMaker endpoint for inference components: the instances, no model.

The endpoint config holds the instances (`ManagedInstanceScaling`, minimum 0
allowed) and no model: the execution role, VPC and network isolation sit on the
config. The components themselves (one per model, each running the SageMaker
Triton image on its model's archive, with its `ComputeResourceRequirements`,
copy autoscaling and, for a minimum of 0 copies, the scale-from-zero alarm and
step policy) are made by `deploy up` through SageMaker's API, one plan action
each (why: `deploy.hosting.components`). The role reads every archive under the
model-store prefix, since the archives change with each model's version.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from cdk_nag import RegexAppliesTo
from constructs import Construct

from deploy_infra.constructs.model_metrics import metrics_config
from deploy_infra.constructs.sagemaker_endpoint import (
    VARIANT_NAME,
    endpoint_arn,
    registry_repository_arn,
    runtime_statements,
    suppress_endpoint_logs,
)
from deploy_infra.nag import suppress


class ComponentsEndpoint(Construct):
    """Execution role, EndpointConfig (no model) and Endpoint."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        image_uri: str,
        instance_type: str,
        min_instance_count: int,
        initial_instance_count: int,
        max_instance_count: int,
        bucket: s3.IBucket,
        prefix: str,
        key: kms.IKey,
        encrypt_volume: bool,
        subnets: Sequence[ec2.ISubnet],
        security_group: ec2.ISecurityGroup,
        inference_ami_version: str | None = None,
        detailed_observability: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint_name = endpoint_name
        self.variant_name = VARIANT_NAME
        self.role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"SageMaker execution role for inference components of {endpoint_name}",
            inline_policies={
                "endpoint": iam.PolicyDocument(
                    statements=[
                        iam.PolicyStatement(
                            sid="ReadModelArchives",
                            actions=["s3:GetObject"],
                            resources=[bucket.arn_for_objects(f"{prefix}*")],
                        ),
                        iam.PolicyStatement(
                            sid="DecryptModels", actions=["kms:Decrypt"], resources=[key.key_arn]
                        ),
                        iam.PolicyStatement(
                            sid="PullTritonImage",
                            actions=[
                                "ecr:BatchCheckLayerAvailability",
                                "ecr:BatchGetImage",
                                "ecr:GetDownloadUrlForLayer",
                            ],
                            resources=[registry_repository_arn(image_uri)],
                        ),
                        *runtime_statements(endpoint_name=endpoint_name),
                    ]
                )
            },
        )
        suppress(self.role, "IAM5", "execution-role-star", applies_to=["Resource::*"])
        # The archives `deploy up` names change with each model version: the prefix.
        suppress(
            self.role,
            "IAM5",
            "execution-role-prefix",
            applies_to=[RegexAppliesTo(regex=rf"/^Resource::<.+\.Arn>\/{re.escape(prefix)}\*$/")],
        )
        suppress_endpoint_logs(self.role, endpoint_name=endpoint_name)

        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self,
            "Config",
            execution_role_arn=self.role.role_arn,
            enable_network_isolation=True,
            vpc_config=sagemaker.CfnEndpointConfig.VpcConfigProperty(
                security_group_ids=[security_group.security_group_id],
                subnets=[subnet.subnet_id for subnet in subnets],
            ),
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT_NAME,
                    instance_type=instance_type,
                    initial_instance_count=initial_instance_count,
                    inference_ami_version=inference_ami_version,
                    managed_instance_scaling=sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                        status="ENABLED",
                        min_instance_count=min_instance_count,
                        max_instance_count=max_instance_count,
                    ),
                    routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                        routing_strategy="LEAST_OUTSTANDING_REQUESTS"
                    ),
                )
            ],
            kms_key_id=key.key_arn if encrypt_volume else None,
            metrics_config=metrics_config(detailed_observability),
        )
        # SageMaker checks the role when it creates the config.
        self.endpoint_config.node.add_dependency(self.role)
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
        )

    @property
    def endpoint_arn(self) -> str:
        return endpoint_arn(self, endpoint_name=self.endpoint_name)
