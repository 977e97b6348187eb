"""A SageMaker multi-model endpoint serving the Triton image from a model-store prefix."""

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

from deploy.guardrails import TrafficPolicy
from deploy_infra.constructs.model_metrics import TRITON_METRICS_ENV, metrics_config
from deploy_infra.constructs.sagemaker_endpoint import (
    VARIANT_NAME,
    blue_green_endpoint,
    endpoint_arn,
    endpoint_config,
    registry_repository_arn,
    runtime_statements,
    suppress_endpoint_logs,
    vpc_config,
)
from deploy_infra.nag import suppress


class MultiModelEndpoint(Construct):
    """Execution role, Model (Mode MultiModel), EndpointConfig and Endpoint.

    Attributes: `role`, `model`, `endpoint_config`, `endpoint`, `endpoint_name`,
    `variant_name`, `endpoint_arn`. The single-model endpoint sits beside this
    construct; what both build the same way is in `sagemaker_endpoint`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        image_uri: str,
        instance_type: str,
        initial_instance_count: int,
        bucket: s3.IBucket,
        prefix: str,
        key: kms.IKey,
        encrypt_volume: bool,
        subnets: Sequence[ec2.ISubnet],
        security_group: ec2.ISecurityGroup,
        rollback_alarm_names: Sequence[str],
        data_capture_percent: int | None = None,
        rollout: TrafficPolicy,
        inference_ami_version: str | None = None,
        detailed_observability: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint_name = endpoint_name
        self.variant_name = VARIANT_NAME
        capture_prefix = f"data-capture/{endpoint_name}/"

        self.role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"SageMaker execution role for endpoint {endpoint_name}",
            inline_policies={
                "endpoint": _execution_policy(
                    endpoint_name=endpoint_name,
                    image_uri=image_uri,
                    bucket=bucket,
                    prefix=prefix,
                    key=key,
                    capture_prefix=capture_prefix if data_capture_percent else None,
                )
            },
        )

        suppress(
            self.role,
            "IAM5",
            "execution-role-prefix",
            applies_to=[RegexAppliesTo(regex=rf"/^Resource::<.+\.Arn>\/{re.escape(prefix)}\*$/")],
        )
        suppress(self.role, "IAM5", "execution-role-star", applies_to=["Resource::*"])
        if data_capture_percent:
            suppress(
                self.role,
                "IAM5",
                "data-capture-prefix",
                applies_to=[
                    RegexAppliesTo(regex=rf"/^Resource::<.+\.Arn>\/{re.escape(capture_prefix)}\*$/")
                ],
            )
        suppress_endpoint_logs(self.role, endpoint_name=endpoint_name)

        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=self.role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=image_uri,
                mode="MultiModel",
                model_data_url=f"s3://{bucket.bucket_name}/{prefix}",
                environment=TRITON_METRICS_ENV,
            ),
            vpc_config=vpc_config(subnets=subnets, security_group=security_group),
            enable_network_isolation=True,
        )

        capture = None
        if data_capture_percent:
            capture = sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
                enable_capture=True,
                initial_sampling_percentage=data_capture_percent,
                destination_s3_uri=f"s3://{bucket.bucket_name}/{capture_prefix}",
                kms_key_id=key.key_arn,
                capture_options=[
                    sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode="Input"),
                    sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode="Output"),
                ],
            )
        self.endpoint_config = endpoint_config(
            self,
            "Config",
            model=self.model,
            instance_type=instance_type,
            initial_instance_count=initial_instance_count,
            kms_key_id=key.key_arn if encrypt_volume else None,
            data_capture_config=capture,
            inference_ami_version=inference_ami_version,
            metrics_config=metrics_config(detailed_observability),
        )
        self.endpoint = blue_green_endpoint(
            self,
            "Endpoint",
            endpoint_name=endpoint_name,
            config=self.endpoint_config,
            rollback_alarm_names=rollback_alarm_names,
            rollout=rollout,
        )

    @property
    def endpoint_arn(self) -> str:
        return endpoint_arn(self, endpoint_name=self.endpoint_name)


def _execution_policy(
    *,
    endpoint_name: str,
    image_uri: str,
    bucket: s3.IBucket,
    prefix: str,
    key: kms.IKey,
    capture_prefix: str | None,
) -> iam.PolicyDocument:
    statements = [
        iam.PolicyStatement(
            sid="ReadModelStorePrefix",
            actions=["s3:GetObject"],
            resources=[bucket.arn_for_objects(f"{prefix}*")],
        ),
        iam.PolicyStatement(
            sid="ListModelStorePrefix",
            actions=["s3:ListBucket"],
            resources=[bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}},
        ),
        iam.PolicyStatement(sid="DecryptModels", actions=["kms:Decrypt"], resources=[key.key_arn]),
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
    if capture_prefix is not None:
        statements.append(
            iam.PolicyStatement(
                sid="WriteDataCapture",
                actions=["s3:PutObject"],
                resources=[bucket.arn_for_objects(f"{capture_prefix}*")],
            )
        )
        statements.append(
            iam.PolicyStatement(
                sid="EncryptDataCapture",
                actions=["kms:Encrypt", "kms:GenerateDataKey"],
                resources=[key.key_arn],
            )
        )
    return iam.PolicyDocument(statements=statements)
