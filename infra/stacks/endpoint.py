"""The endpoint stack: Triton MME endpoint, autoscaling, alarms, dashboard."""

from __future__ import annotations

from typing import Any

from aws_cdk import ArnFormat, CfnOutput, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from deploy.config import DeploySettings
from infra.constructs.autoscaling import VariantAutoscaling
from infra.constructs.mme_endpoint import VARIANT_NAME, MultiModelEndpoint
from infra.constructs.model_store import ModelStore
from infra.constructs.monitoring import AlarmThresholds, EndpointAlarms, EndpointDashboard
from infra.constructs.network import PrivateNetwork
from infra.instances import has_instance_storage, instance_spec, triton_image_uri


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

        if infra.notification_topic_arn is not None:
            topic: sns.ITopic = sns.Topic.from_topic_arn(
                self, "AlarmTopic", infra.notification_topic_arn
            )
        else:
            topic = sns.Topic(
                self,
                "AlarmTopic",
                display_name=f"{settings.endpoint_name} alarms",
                master_key=store.key,
                enforce_ssl=True,
            )
            # The TLS-only topic policy replaces SNS's default one, so CloudWatch needs
            # its own grant: this endpoint's alarms only.
            topic.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="EndpointAlarmsPublish",
                    principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                    actions=["sns:Publish"],
                    resources=[topic.topic_arn],
                    conditions={
                        "ArnLike": {
                            "aws:SourceArn": self.format_arn(
                                service="cloudwatch",
                                resource="alarm",
                                resource_name=f"{settings.endpoint_name}-*",
                                arn_format=ArnFormat.COLON_RESOURCE_NAME,
                            )
                        }
                    },
                )
            )
        if infra.notification_email is not None:
            topic.add_subscription(subscriptions.EmailSubscription(infra.notification_email))

        alarms = EndpointAlarms(
            self,
            "Alarms",
            endpoint_name=settings.endpoint_name,
            variant_name=VARIANT_NAME,
            thresholds=AlarmThresholds(
                errors_5xx=infra.alarm_5xx_errors,
                latency_p99_ms=infra.alarm_model_latency_p99_ms,
                loading_wait_ms=infra.alarm_model_loading_wait_ms,
                memory_percent=infra.alarm_memory_percent,
                gpu_memory_percent=infra.alarm_gpu_memory_percent,
                disk_percent=infra.alarm_disk_percent,
            ),
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
            data_capture_percent=infra.data_capture_percent if infra.data_capture else None,
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
        )
        CfnOutput(self, "EndpointName", value=settings.endpoint_name)
        CfnOutput(self, "VariantName", value=VARIANT_NAME)
        CfnOutput(self, "ImageUri", value=image_uri)
        CfnOutput(self, "ExecutionRoleArn", value=self.endpoint.role.role_arn)
        CfnOutput(self, "AlarmTopicArn", value=topic.topic_arn)
