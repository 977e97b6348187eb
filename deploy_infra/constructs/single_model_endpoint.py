"""A SageMaker single-model endpoint serving the router layout from one archive.

The archive (`model.tar.gz`: every model plus the generated router) is loaded
in single-model mode with the router as Triton's default model. The image is
the SageMaker Triton image on GPU and CPU instances, or, on ml.inf1 (where
SageMaker runs no multi-model endpoints), the Neuron-enabled image built from
`deploy_infra/neuron/` (FROM the SageMaker Triton image) and published by CDK as a
container asset (`neuron_image`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
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

NEURON_IMAGE_DIR = Path(__file__).resolve().parents[1] / "neuron"
ROUTER_MODEL = "router"


@dataclass(frozen=True)
class EndpointImage:
    """The container image a single-model endpoint runs, and the grant to pull it."""

    uri: str
    repository_arn: str
    pull_sid: str  # the execution role's statement id for pulling it
    # Whether its `serve` honours SAGEMAKER_TRITON_ALLOW_METRICS (the Neuron image's does not).
    triton_metrics: bool = True


def registry_image(image_uri: str) -> EndpointImage:
    """An image in a registry (the SageMaker Triton image)."""
    return EndpointImage(image_uri, registry_repository_arn(image_uri), "PullTritonImage")


def neuron_image(scope: Construct, construct_id: str, *, base_image_uri: str) -> EndpointImage:
    """The Neuron-enabled Triton image, built from deploy_infra/neuron/ as a container asset."""
    asset = ecr_assets.DockerImageAsset(
        scope,
        construct_id,
        directory=str(NEURON_IMAGE_DIR),
        build_args={"BASE_IMAGE": base_image_uri},
        platform=ecr_assets.Platform.LINUX_AMD64,
    )
    return EndpointImage(
        asset.image_uri, asset.repository.repository_arn, "PullNeuronImage", triton_metrics=False
    )


class SingleModelEndpoint(Construct):
    """Execution role, Model (SingleModel, the router as default model), EndpointConfig,
    Endpoint.

    Attributes mirror `MultiModelEndpoint` (`role`, `model`, `endpoint_config`,
    `endpoint`, `endpoint_name`, `variant_name`, `endpoint_arn`) so autoscaling,
    alarms and the dashboard attach the same way; `image` is what it runs.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        image: EndpointImage,
        instance_type: str,
        initial_instance_count: int,
        bucket: s3.IBucket,
        model_data_key: str,
        key: kms.IKey,
        encrypt_volume: bool,
        subnets: Sequence[ec2.ISubnet],
        security_group: ec2.ISecurityGroup,
        rollback_alarm_names: Sequence[str],
        rollout: TrafficPolicy,
        inference_ami_version: str | None = None,
        detailed_observability: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        self.endpoint_name = endpoint_name
        self.variant_name = VARIANT_NAME
        self.image = image

        self.role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"SageMaker execution role for single-model endpoint {endpoint_name}",
            inline_policies={
                "endpoint": _execution_policy(
                    endpoint_name=endpoint_name,
                    image=self.image,
                    bucket=bucket,
                    model_data_key=model_data_key,
                    key=key,
                )
            },
        )
        suppress(self.role, "IAM5", "execution-role-star", applies_to=["Resource::*"])
        suppress_endpoint_logs(self.role, endpoint_name=endpoint_name)

        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=self.role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=image.uri,
                mode="SingleModel",
                model_data_url=f"s3://{bucket.bucket_name}/{model_data_key}",
                environment={
                    "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": ROUTER_MODEL,
                    **(TRITON_METRICS_ENV if image.triton_metrics else {}),
                },
            ),
            vpc_config=vpc_config(subnets=subnets, security_group=security_group),
            enable_network_isolation=True,
        )
        # The role must be able to pull the image before SageMaker validates the model.
        self.model.node.add_dependency(self.role)

        self.endpoint_config = endpoint_config(
            self,
            "Config",
            model=self.model,
            instance_type=instance_type,
            initial_instance_count=initial_instance_count,
            # EBS volumes (no instance storage) are encrypted with the model store's key.
            kms_key_id=key.key_arn if encrypt_volume else None,
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
    image: EndpointImage,
    bucket: s3.IBucket,
    model_data_key: str,
    key: kms.IKey,
) -> iam.PolicyDocument:
    return iam.PolicyDocument(
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
                sid=image.pull_sid,
                actions=[
                    "ecr:BatchCheckLayerAvailability",
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                ],
                resources=[image.repository_arn],
            ),
            *runtime_statements(endpoint_name=endpoint_name),
        ]
    )
