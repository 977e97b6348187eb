"""A SageMaker serverless endpoint running the CPU Triton image behind the router.

Serverless endpoints host one model per endpoint (no multi-model mode), so the
stage serves the single-model layout: one archive holding every model plus
the generated router (`deploy.neuron.router`), loaded in SageMaker's
single-model mode with the router as the default model. The production variant
carries `ServerlessConfig` instead of an instance type and count.

What SageMaker refuses on a serverless endpoint shapes the Model: no
`VpcConfig` (so no subnets, security group or network-interface grants), no
network isolation, no data capture, CPU images only. There is no ML storage
volume for an endpoint-config KMS key to encrypt; the archive stays encrypted
at rest in the model store under the stage's key, which the role may use to
decrypt it. Updates use SageMaker's default blue/green switch (all at once):
serverless capacity is not counted in instances, so the linear, capacity-based
traffic shifting of the instance-backed endpoints does not apply.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from deploy_infra.constructs.sagemaker_endpoint import (
    VARIANT_NAME,
    endpoint_arn,
    image_repository_arn,
    runtime_statements,
    suppress_endpoint_logs,
)
from deploy_infra.nag import suppress

ROUTER_MODEL = "router"


@dataclass(frozen=True)
class ServerlessCapacity:
    """`ProductionVariant.ServerlessConfig` (bounds checked by `deploy.config`)."""

    memory_mb: int
    max_concurrency: int
    provisioned_concurrency: int | None = None


class ServerlessEndpoint(Construct):
    """Execution role, Model (SingleModel, router), serverless EndpointConfig, Endpoint.

    Attributes: `role`, `model`, `endpoint_config`, `endpoint`, `endpoint_name`,
    `variant_name`, `endpoint_arn`, `model_data_url`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        image_uri: str,
        capacity: ServerlessCapacity,
        bucket: s3.IBucket,
        model_data_key: str,
        key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint_name = endpoint_name
        self.variant_name = VARIANT_NAME
        self.model_data_url = f"s3://{bucket.bucket_name}/{model_data_key}"

        self.role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"SageMaker execution role for serverless endpoint {endpoint_name}",
            inline_policies={
                "endpoint": iam.PolicyDocument(
                    statements=[
                        iam.PolicyStatement(
                            sid="ReadModelArchive",
                            actions=["s3:GetObject"],
                            resources=[bucket.arn_for_objects(model_data_key)],
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
                            resources=[image_repository_arn(image_uri)],
                        ),
                        *runtime_statements(endpoint_name=endpoint_name, vpc=False),
                    ]
                )
            },
        )
        suppress(self.role, "IAM5", "execution-role-star", applies_to=["Resource::*"])
        suppress_endpoint_logs(self.role, endpoint_name=endpoint_name)

        # No vpc_config and no enable_network_isolation: SageMaker refuses both
        # for serverless variants.
        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=self.role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=image_uri,
                mode="SingleModel",
                model_data_url=self.model_data_url,
                environment={"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": ROUTER_MODEL},
            ),
        )
        # The role must be able to pull the image before SageMaker validates the model.
        self.model.node.add_dependency(self.role)

        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self,
            "Config",
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT_NAME,
                    model_name=self.model.attr_model_name,
                    serverless_config=sagemaker.CfnEndpointConfig.ServerlessConfigProperty(
                        memory_size_in_mb=capacity.memory_mb,
                        max_concurrency=capacity.max_concurrency,
                        provisioned_concurrency=capacity.provisioned_concurrency,
                    ),
                )
            ],
        )
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
        )

    @property
    def endpoint_arn(self) -> str:
        return endpoint_arn(self, endpoint_name=self.endpoint_name)
