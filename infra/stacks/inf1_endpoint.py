"""The endpoint stack for ml.inf1: a single-model endpoint behind the router.

Same shape as `EndpointStack` (alarms, topic, autoscaling, dashboard, outputs)
with `Inf1SingleModelEndpoint` in place of the multi-model endpoint. The
archive SageMaker loads is `<model prefix><infra.model_archive>` in the model store
(`inf1/model.tar.gz` unless `deploy up` names a content-derived key).
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Duration, Stack
from constructs import Construct

from deploy.config import DeploySettings
from deploy.neuron.instances import neuron_cores
from infra.constructs.autoscaling import VariantAutoscaling
from infra.constructs.inf1_endpoint import ROUTER_MODEL, Inf1SingleModelEndpoint
from infra.constructs.model_store import ModelStore
from infra.constructs.monitoring import (
    AlarmThresholds,
    EndpointAlarms,
    EndpointDashboard,
    alarm_topic,
)
from infra.constructs.network import PrivateNetwork
from infra.constructs.sagemaker_endpoint import VARIANT_NAME
from infra.instances import triton_image_uri

# The -cpu tag of the SageMaker Triton image is the base: Inferentia needs no CUDA.
BASE_IMAGE_PROCESSOR_TYPE = "ml.m5.xlarge"


class Inf1EndpointStack(Stack):
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
        archive_key = f"{store.prefix}{infra.model_archive}"
        cores = neuron_cores(settings.instance_type)  # an unknown inf1 size fails here
        base_image = triton_image_uri(
            region=settings.region,
            version=infra.triton_version,
            instance_type=BASE_IMAGE_PROCESSOR_TYPE,
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
            has_gpu=False,
        )
        self.endpoint = Inf1SingleModelEndpoint(
            self,
            "Endpoint",
            endpoint_name=settings.endpoint_name,
            base_image_uri=base_image,
            instance_type=settings.instance_type,
            initial_instance_count=infra.initial_instance_count,
            bucket=store.bucket,
            model_data_key=archive_key,
            key=store.key,
            subnets=network.subnets.subnets,
            security_group=network.endpoint_security_group,
            rollback_alarm_names=alarms.rollback_alarm_names,
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
        )
        EndpointDashboard(
            self,
            "Dashboard",
            endpoint_name=settings.endpoint_name,
            variant_name=VARIANT_NAME,
            has_gpu=False,
        )
        CfnOutput(self, "EndpointName", value=settings.endpoint_name)
        CfnOutput(self, "VariantName", value=VARIANT_NAME)
        CfnOutput(self, "Hosting", value="single-model")
        CfnOutput(self, "RouterModel", value=ROUTER_MODEL)
        CfnOutput(self, "NeuronCores", value=str(cores))
        CfnOutput(self, "ImageUri", value=self.endpoint.image.image_uri)
        CfnOutput(self, "BaseImageUri", value=base_image)
        CfnOutput(
            self,
            "ModelDataUrl",
            value=f"s3://{store.bucket.bucket_name}/{archive_key}",
        )
        CfnOutput(self, "ExecutionRoleArn", value=self.endpoint.role.role_arn)
        CfnOutput(self, "AlarmTopicArn", value=topic.topic_arn)
