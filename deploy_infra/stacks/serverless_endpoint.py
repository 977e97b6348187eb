"""The endpoint stack of a serverless stage: the router layout on SageMaker serverless.

Same outputs as the other endpoint stacks (`EndpointName`, `VariantName`,
`ImageUri`, `ExecutionRoleArn`, `AlarmTopicArn`), plus what the serverless
variant runs with. No network stack is involved (serverless endpoints take no
VPC) and there is no autoscaling: SageMaker scales copies by itself, up to
`infra.serverless_max_concurrency`. The archive is
`<model prefix><infra.model_archive>` in the model store (`deploy up` names a
content-derived key; unset: `serverless/model.tar.gz`).
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from deploy.config import DeploySettings
from deploy_infra.constructs.model_metrics import dashboard_models
from deploy_infra.constructs.model_store import ModelStore
from deploy_infra.constructs.monitoring import AlarmThresholds, alarm_topic
from deploy_infra.constructs.sagemaker_endpoint import VARIANT_NAME
from deploy_infra.constructs.serverless_endpoint import (
    ROUTER_MODEL,
    ServerlessCapacity,
    ServerlessEndpoint,
)
from deploy_infra.constructs.serverless_monitoring import ServerlessAlarms, ServerlessDashboard
from deploy_infra.errors import InfraConfigError
from deploy_infra.instances import InstanceSpec, instance_spec, triton_image_uri
from deploy_infra.stacks.single_model_endpoint import model_archive_key


def cpu_instance_spec(instance_type: str) -> InstanceSpec:
    """The stage's instance type, which only picks the image here: a GPU one is refused."""
    spec = instance_spec(instance_type)
    if spec.has_gpu:
        raise InfraConfigError(
            f"{instance_type} has a GPU, but SageMaker serverless endpoints run on CPU only",
            where="instance_type",
            fix="set instance_type to a CPU type (e.g. ml.m5.xlarge; a serverless stage "
            "uses it only to pick the CPU image), or use hosting multi-model or async for GPUs",
        )
    return spec


class ServerlessEndpointStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: DeploySettings,
        store: ModelStore,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        infra = settings.infra
        spec = cpu_instance_spec(settings.instance_type)
        image_uri = triton_image_uri(
            region=settings.region, version=infra.triton_version, instance_type=spec.instance_type
        )
        archive_key = model_archive_key(settings, store.prefix)
        capacity = ServerlessCapacity(
            memory_mb=infra.serverless_memory_mb,
            max_concurrency=infra.serverless_max_concurrency,
            provisioned_concurrency=infra.serverless_provisioned_concurrency,
        )

        topic = alarm_topic(
            self,
            "AlarmTopic",
            endpoint_name=settings.endpoint_name,
            key=store.key,
            existing_topic_arn=infra.notification_topic_arn,
            email=infra.notification_email,
        )
        ServerlessAlarms(
            self,
            "Alarms",
            endpoint_name=settings.endpoint_name,
            variant_name=VARIANT_NAME,
            thresholds=AlarmThresholds.from_settings(infra),
            topic=topic,
        )
        self.endpoint = ServerlessEndpoint(
            self,
            "Endpoint",
            endpoint_name=settings.endpoint_name,
            image_uri=image_uri,
            capacity=capacity,
            bucket=store.bucket,
            model_data_key=archive_key,
            key=store.key,
        )
        ServerlessDashboard(
            self,
            "Dashboard",
            endpoint_name=settings.endpoint_name,
            variant_name=VARIANT_NAME,
            provisioned=capacity.provisioned_concurrency is not None,
            models=dashboard_models(self, settings),
        )
        CfnOutput(self, "EndpointName", value=settings.endpoint_name)
        CfnOutput(self, "VariantName", value=VARIANT_NAME)
        CfnOutput(self, "Hosting", value="serverless")
        CfnOutput(self, "RouterModel", value=ROUTER_MODEL)
        CfnOutput(self, "ImageUri", value=image_uri)
        CfnOutput(self, "ModelDataUrl", value=self.endpoint.model_data_url)
        CfnOutput(self, "MemorySizeInMB", value=str(capacity.memory_mb))
        CfnOutput(self, "MaxConcurrency", value=str(capacity.max_concurrency))
        CfnOutput(self, "ExecutionRoleArn", value=self.endpoint.role.role_arn)
        CfnOutput(self, "AlarmTopicArn", value=topic.topic_arn)
