"""A SageMaker asynchronous endpoint serving the router layout on the stock Triton image.

SageMaker's asynchronous inference is single-model (InvokeEndpointAsync has no
TargetModel), so the stage serves one archive (every model plus the generated
router, `deploy.neuron.router`) in single-model mode on a GPU or CPU
instance. The endpoint config's `AsyncInferenceConfig` sends answers and
errors to prefixes of the model-store bucket, encrypted with the stage's KMS
key, and notifies two SNS topics (success, error), encrypted with the same key.

Triton's HTTP input limit: from 25.06 (Triton 2.59) tritonserver has
`--http-max-input-size` (64 MiB by default) and from 26.03 (2.67) it applies
to the SageMaker port too; the flag is passed through
`SAGEMAKER_TRITON_ADDITIONAL_ARGS` for images that know it (an older
tritonserver refuses to start with an unknown flag, and has no such limit).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from aws_cdk import Aws
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from cdk_nag import RegexAppliesTo
from constructs import Construct

from deploy.guardrails import TrafficPolicy
from deploy.hosting.limits import ASYNC_MAX_REQUEST
from deploy_infra.constructs.sagemaker_endpoint import (
    VARIANT_NAME,
    blue_green_endpoint,
    endpoint_arn,
    runtime_statements,
    suppress_endpoint_logs,
    vpc_config,
)
from deploy_infra.nag import suppress

ROUTER_MODEL = "router"
# The first SageMaker Triton image whose tritonserver has --http-max-input-size.
MAX_INPUT_SIZE_SINCE = (25, 6)
# The largest request plus room for the JSON header Triton reads with it.
HTTP_MAX_INPUT_SIZE = ASYNC_MAX_REQUEST + 64 * 1024 * 1024


def _version(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    try:
        return int(major), int(minor.split("-", 1)[0] or 0)
    except ValueError:
        return (0, 0)


def container_environment(triton_version: str, *, router: str = ROUTER_MODEL) -> dict[str, str]:
    """The Triton container's environment for the router layout, raising Triton's
    HTTP input limit where the image's tritonserver has one (see the module docstring)."""
    environment = {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": router}
    if _version(triton_version) >= MAX_INPUT_SIZE_SINCE:
        environment["SAGEMAKER_TRITON_ADDITIONAL_ARGS"] = (
            f"--http-max-input-size={HTTP_MAX_INPUT_SIZE}"
        )
    return environment


class AsyncInferenceEndpoint(Construct):
    """Execution role, Model (SingleModel, the router), EndpointConfig with
    AsyncInferenceConfig, Endpoint, and the success and error topics.

    Attributes mirror `MultiModelEndpoint` (`role`, `model`, `endpoint_config`,
    `endpoint`, `endpoint_name`, `variant_name`, `endpoint_arn`) so alarms and
    the dashboard attach the same way; `success_topic` and `error_topic` are
    the notification topics. `output_prefix`, `failure_prefix` and
    `input_prefix` are keys in `bucket` (each ending in `/`).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        image_uri: str,
        triton_version: str,
        instance_type: str,
        initial_instance_count: int,
        bucket: s3.IBucket,
        model_data_key: str,
        input_prefix: str,
        output_prefix: str,
        failure_prefix: str,
        key: kms.IKey,
        encrypt_volume: bool,
        max_concurrent_invocations_per_instance: int,
        subnets: Sequence[ec2.ISubnet],
        security_group: ec2.ISecurityGroup,
        rollback_alarm_names: Sequence[str],
        rollout: TrafficPolicy,
        inference_ami_version: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if not 1 <= max_concurrent_invocations_per_instance <= 1000:
            raise ValueError("max_concurrent_invocations_per_instance must be 1..1000")
        self.endpoint_name = endpoint_name
        self.variant_name = VARIANT_NAME
        self.input_prefix = input_prefix
        self.output_prefix = output_prefix
        self.failure_prefix = failure_prefix

        self.success_topic = sns.Topic(
            self,
            "SuccessTopic",
            display_name=f"{endpoint_name} asynchronous results",
            master_key=key,
            enforce_ssl=True,
        )
        self.error_topic = sns.Topic(
            self,
            "ErrorTopic",
            display_name=f"{endpoint_name} asynchronous errors",
            master_key=key,
            enforce_ssl=True,
        )

        self.role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"SageMaker execution role for asynchronous endpoint {endpoint_name}",
            inline_policies={
                "endpoint": iam.PolicyDocument(
                    statements=[
                        iam.PolicyStatement(
                            sid="ReadModelArchive",
                            actions=["s3:GetObject"],
                            resources=[bucket.arn_for_objects(model_data_key)],
                        ),
                        iam.PolicyStatement(
                            sid="ReadAsyncRequests",
                            actions=["s3:GetObject"],
                            resources=[bucket.arn_for_objects(f"{input_prefix}*")],
                        ),
                        iam.PolicyStatement(
                            sid="WriteAsyncResults",
                            actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                            resources=[
                                bucket.arn_for_objects(f"{output_prefix}*"),
                                bucket.arn_for_objects(f"{failure_prefix}*"),
                            ],
                        ),
                        iam.PolicyStatement(
                            sid="UseStoreKey",
                            actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"],
                            resources=[key.key_arn],
                        ),
                        iam.PolicyStatement(
                            sid="NotifyAsyncResults",
                            actions=["sns:Publish"],
                            resources=[self.success_topic.topic_arn, self.error_topic.topic_arn],
                        ),
                        iam.PolicyStatement(
                            sid="PullTritonImage",
                            actions=[
                                "ecr:BatchCheckLayerAvailability",
                                "ecr:BatchGetImage",
                                "ecr:GetDownloadUrlForLayer",
                            ],
                            resources=[_repository_arn(image_uri)],
                        ),
                        *runtime_statements(endpoint_name=endpoint_name),
                    ]
                )
            },
        )
        suppress(
            self.role,
            "IAM5",
            "async-prefixes",
            applies_to=[
                RegexAppliesTo(regex=rf"/^Resource::<.+\.Arn>\/{re.escape(prefix)}\*$/")
                for prefix in (input_prefix, output_prefix, failure_prefix)
            ],
        )
        suppress(self.role, "IAM5", "execution-role-star", applies_to=["Resource::*"])
        suppress_endpoint_logs(self.role, endpoint_name=endpoint_name)

        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=self.role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=image_uri,
                mode="SingleModel",
                model_data_url=f"s3://{bucket.bucket_name}/{model_data_key}",
                environment=container_environment(triton_version),
            ),
            vpc_config=vpc_config(subnets=subnets, security_group=security_group),
            enable_network_isolation=True,
        )
        self.model.node.add_dependency(self.role)

        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self,
            "Config",
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT_NAME,
                    model_name=self.model.attr_model_name,
                    instance_type=instance_type,
                    initial_instance_count=initial_instance_count,
                    initial_variant_weight=1.0,
                    inference_ami_version=inference_ami_version,
                )
            ],
            kms_key_id=key.key_arn if encrypt_volume else None,
            async_inference_config=sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty(
                client_config=sagemaker.CfnEndpointConfig.AsyncInferenceClientConfigProperty(
                    max_concurrent_invocations_per_instance=max_concurrent_invocations_per_instance
                ),
                output_config=sagemaker.CfnEndpointConfig.AsyncInferenceOutputConfigProperty(
                    s3_output_path=f"s3://{bucket.bucket_name}/{output_prefix}",
                    s3_failure_path=f"s3://{bucket.bucket_name}/{failure_prefix}",
                    kms_key_id=key.key_arn,
                    notification_config=sagemaker.CfnEndpointConfig.AsyncInferenceNotificationConfigProperty(
                        success_topic=self.success_topic.topic_arn,
                        error_topic=self.error_topic.topic_arn,
                    ),
                ),
            ),
        )
        # SageMaker checks that the role can publish when it creates the config.
        self.endpoint_config.node.add_dependency(self.role)
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


def _repository_arn(image_uri: str) -> str:
    registry_account, _, rest = image_uri.partition(".dkr.ecr.")
    image_region = rest.split(".", 1)[0]
    repository = image_uri.split("/", 1)[1].split(":", 1)[0]
    return f"arn:{Aws.PARTITION}:ecr:{image_region}:{registry_account}:repository/{repository}"
