"""The endpoint stack of an asynchronous stage: the router layout behind InvokeEndpointAsync.

Same shape as `EndpointStack` (alarms, topic, dashboard, outputs) with
`AsyncInferenceEndpoint` and queue-based autoscaling (`AsyncAutoscaling`, to
zero when `min_instance_count` is 0). The archive SageMaker loads is
`<model prefix><infra.model_archive>` (`async/model.tar.gz` unless `deploy up`
names a content-derived key); requests, answers and errors live under
`async/<endpoint name>/` of the model-store bucket (`deploy.async_inference`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import CfnOutput, Duration, Stack
from constructs import Construct

from deploy.async_inference.layout import stage_root
from deploy.config import DeploySettings
from deploy.guardrails import policy_for
from deploy.hosting.asynchronous import FOLDER
from deploy_infra.constructs.async_autoscaling import AsyncAutoscaling
from deploy_infra.constructs.async_endpoint import ROUTER_MODEL, AsyncInferenceEndpoint
from deploy_infra.constructs.model_metrics import dashboard_models
from deploy_infra.constructs.model_store import ModelStore
from deploy_infra.constructs.monitoring import (
    AlarmThresholds,
    EndpointAlarms,
    EndpointDashboard,
    alarm_topic,
)
from deploy_infra.constructs.network import PrivateNetwork
from deploy_infra.constructs.sagemaker_endpoint import VARIANT_NAME
from deploy_infra.instances import (
    has_instance_storage,
    inference_ami,
    instance_spec,
    triton_image_uri,
)


@dataclass(frozen=True)
class AsyncStageOptions:
    """What the asynchronous endpoint takes from the stage's settings (`from_settings`)."""

    archive_key: str = "async/model.tar.gz"  # under the model prefix
    initial_instance_count: int = 1
    min_instance_count: int = 1  # 0: scale to zero while the queue is empty
    max_instance_count: int = 2
    max_concurrent_invocations_per_instance: int = 4
    backlog_per_instance: float = 5.0
    scale_in_cooldown_s: int = 300
    scale_out_cooldown_s: int = 60

    def __post_init__(self) -> None:
        if self.initial_instance_count < 1:
            raise ValueError("an asynchronous endpoint starts with at least one instance")

    @classmethod
    def from_settings(cls, settings: DeploySettings) -> AsyncStageOptions:
        infra = settings.infra
        return cls(
            archive_key=infra.model_archive or f"{FOLDER}model.tar.gz",
            initial_instance_count=infra.initial_instance_count,
            min_instance_count=infra.min_instance_count,
            max_instance_count=infra.max_instance_count,
            max_concurrent_invocations_per_instance=infra.async_max_concurrent_invocations,
            backlog_per_instance=infra.async_backlog_per_instance,
            scale_in_cooldown_s=infra.scale_in_cooldown_s,
            scale_out_cooldown_s=infra.scale_out_cooldown_s,
        )


class AsyncEndpointStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: DeploySettings,
        network: PrivateNetwork,
        store: ModelStore,
        options: AsyncStageOptions | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        options = options or AsyncStageOptions.from_settings(settings)
        infra = settings.infra
        spec = instance_spec(settings.instance_type)
        image_uri = triton_image_uri(
            region=settings.region, version=infra.triton_version, instance_type=spec.instance_type
        )
        root = stage_root(settings.endpoint_name)
        archive_key = f"{store.prefix}{options.archive_key}"

        topic = alarm_topic(
            self,
            "AlarmTopic",
            endpoint_name=settings.endpoint_name,
            key=store.key,
            existing_topic_arn=infra.notification_topic_arn,
            email=infra.notification_email,
        )
        alarms = EndpointAlarms(
            self,
            "Alarms",
            endpoint_name=settings.endpoint_name,
            variant_name=VARIANT_NAME,
            thresholds=AlarmThresholds.from_settings(infra),
            topic=topic,
            has_gpu=spec.has_gpu,
        )
        self.endpoint = AsyncInferenceEndpoint(
            self,
            "Endpoint",
            endpoint_name=settings.endpoint_name,
            image_uri=image_uri,
            triton_version=infra.triton_version,
            instance_type=spec.instance_type,
            initial_instance_count=options.initial_instance_count,
            bucket=store.bucket,
            model_data_key=archive_key,
            input_prefix=f"{root}input/",
            output_prefix=f"{root}output/",
            failure_prefix=f"{root}failure/",
            key=store.key,
            encrypt_volume=not has_instance_storage(spec),
            max_concurrent_invocations_per_instance=options.max_concurrent_invocations_per_instance,
            subnets=network.subnets.subnets,
            security_group=network.endpoint_security_group,
            rollback_alarm_names=alarms.rollback_alarm_names,
            rollout=policy_for(settings),
            inference_ami_version=inference_ami(infra.triton_version, spec),
        )
        AsyncAutoscaling(
            self,
            "Autoscaling",
            endpoint=self.endpoint,
            min_capacity=options.min_instance_count,
            max_capacity=options.max_instance_count,
            backlog_per_instance=options.backlog_per_instance,
            scale_in_cooldown=Duration.seconds(options.scale_in_cooldown_s),
            scale_out_cooldown=Duration.seconds(options.scale_out_cooldown_s),
        )
        EndpointDashboard(
            self,
            "Dashboard",
            endpoint_name=settings.endpoint_name,
            variant_name=VARIANT_NAME,
            has_gpu=spec.has_gpu,
            models=dashboard_models(self, settings),
        )
        bucket = store.bucket.bucket_name
        CfnOutput(self, "EndpointName", value=settings.endpoint_name)
        CfnOutput(self, "VariantName", value=VARIANT_NAME)
        CfnOutput(self, "Hosting", value="async")
        CfnOutput(self, "RouterModel", value=ROUTER_MODEL)
        CfnOutput(self, "ImageUri", value=image_uri)
        CfnOutput(self, "ModelDataUrl", value=f"s3://{bucket}/{archive_key}")
        CfnOutput(self, "AsyncInputPrefix", value=f"s3://{bucket}/{root}input/")
        CfnOutput(self, "AsyncOutputPrefix", value=f"s3://{bucket}/{root}output/")
        CfnOutput(self, "AsyncFailurePrefix", value=f"s3://{bucket}/{root}failure/")
        CfnOutput(self, "SuccessTopicArn", value=self.endpoint.success_topic.topic_arn)
        CfnOutput(self, "ErrorTopicArn", value=self.endpoint.error_topic.topic_arn)
        CfnOutput(self, "ExecutionRoleArn", value=self.endpoint.role.role_arn)
        CfnOutput(self, "AlarmTopicArn", value=topic.topic_arn)
