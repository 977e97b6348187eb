"""The endpoint stack: Triton MME endpoint, autoscaling, alarms, dashboard."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Duration, Stack
from constructs import Construct

from deploy.client.manifest import MANIFEST_NAME
from deploy.config import DeploySettings
from deploy.guardrails import policy_for
from deploy_infra.constructs.autoscaling import VariantAutoscaling
from deploy_infra.constructs.canary_rollback import CanaryRollback
from deploy_infra.constructs.mme_endpoint import MultiModelEndpoint
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


class EndpointStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: DeploySettings,
        network: PrivateNetwork,
        store: ModelStore,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        infra = settings.infra
        spec = instance_spec(settings.instance_type)
        image_uri = triton_image_uri(
            region=settings.region, version=infra.triton_version, instance_type=spec.instance_type
        )

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
        self.endpoint = MultiModelEndpoint(
            self,
            "Endpoint",
            endpoint_name=settings.endpoint_name,
            image_uri=image_uri,
            instance_type=spec.instance_type,
            initial_instance_count=infra.initial_instance_count,
            bucket=store.bucket,
            prefix=store.prefix,
            key=store.key,
            encrypt_volume=not has_instance_storage(spec),
            subnets=network.subnets.subnets,
            security_group=network.endpoint_security_group,
            rollback_alarm_names=alarms.rollback_alarm_names,
            rollout=policy_for(settings),
            data_capture_percent=infra.data_capture_percent if infra.data_capture else None,
            inference_ami_version=inference_ami(infra.triton_version, spec),
            detailed_observability=infra.detailed_observability,
        )
        VariantAutoscaling(
            self,
            "Autoscaling",
            endpoint=self.endpoint,
            min_capacity=infra.min_instance_count,
            max_capacity=infra.max_instance_count,
            invocations_per_instance=infra.target_invocations_per_instance,
            scale_in_cooldown=Duration.seconds(infra.scale_in_cooldown_s),
            scale_out_cooldown=Duration.seconds(infra.scale_out_cooldown_s),
            gpu_utilization_percent=infra.gpu_utilization_target if spec.has_gpu else None,
        )
        EndpointDashboard(
            self,
            "Dashboard",
            endpoint_name=settings.endpoint_name,
            variant_name=VARIANT_NAME,
            has_gpu=spec.has_gpu,
            models=dashboard_models(self, settings),
        )
        rollback = CanaryRollback(
            self,
            "CanaryRollback",
            endpoint_name=settings.endpoint_name,
            bucket=store.bucket,
            manifest_key=f"{store.prefix}{MANIFEST_NAME}",
            key=store.key,
        )
        CfnOutput(self, "EndpointName", value=settings.endpoint_name)
        CfnOutput(self, "CanaryRollbackFunction", value=rollback.function.function_name)
        CfnOutput(self, "VariantName", value=VARIANT_NAME)
        CfnOutput(self, "ImageUri", value=image_uri)
        CfnOutput(self, "ExecutionRoleArn", value=self.endpoint.role.role_arn)
        CfnOutput(self, "AlarmTopicArn", value=topic.topic_arn)
