"""The endpoint stack of `hosting = "single-model"`: one archive behind the router.

Same shape as `EndpointStack` (alarms, topic, autoscaling, dashboard, outputs)
with `SingleModelEndpoint` in place of the multi-model endpoint. The archive
SageMaker loads is `<model prefix><infra.model_archive>` in the model store
(`<the mode's folder>model.tar.gz`, e.g. `inf1/model.tar.gz`, unless `deploy up`
names a content-derived key). On ml.inf1 the image is the Neuron-enabled one
(a container asset); on GPU and CPU instances, the SageMaker Triton image.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Duration, Stack
from constructs import Construct

from deploy.config import DeploySettings
from deploy.guardrails import policy_for
from deploy.hosting import mode_for
from deploy.neuron.instances import is_inferentia, neuron_cores
from deploy_infra.constructs.autoscaling import VariantAutoscaling
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
from deploy_infra.constructs.single_model_endpoint import (
    ROUTER_MODEL,
    EndpointImage,
    SingleModelEndpoint,
    neuron_image,
    registry_image,
)
from deploy_infra.instances import (
    has_instance_storage,
    inference_ami,
    instance_spec,
    triton_image_uri,
)

# The -cpu tag of the SageMaker Triton image is the base: Inferentia needs no CUDA.
BASE_IMAGE_PROCESSOR_TYPE = "ml.m5.xlarge"


def model_archive_key(settings: DeploySettings, prefix: str) -> str:
    """The archive's key: `infra.model_archive`, else the mode's folder's model.tar.gz."""
    archive = settings.infra.model_archive or f"{mode_for(settings).layout.folder}model.tar.gz"
    return f"{prefix}{archive}"


class SingleModelEndpointStack(Stack):
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
        archive_key = model_archive_key(settings, store.prefix)
        neuron = is_inferentia(settings.instance_type)
        base_image: str | None = None
        cores: int | None = None
        ami: str | None = None  # inf1 runs its own image on SageMaker's Neuron AMI
        if neuron:
            cores = neuron_cores(settings.instance_type)  # an unknown inf1 size fails here
            base_image = triton_image_uri(
                region=settings.region,
                version=infra.triton_version,
                instance_type=BASE_IMAGE_PROCESSOR_TYPE,
            )
            image: EndpointImage = neuron_image(
                self, "NeuronTritonImage", base_image_uri=base_image
            )
            has_gpu, encrypt_volume = False, True  # inf1 volumes are EBS
        else:
            spec = instance_spec(settings.instance_type)
            image = registry_image(
                triton_image_uri(
                    region=settings.region,
                    version=infra.triton_version,
                    instance_type=spec.instance_type,
                )
            )
            has_gpu, encrypt_volume = spec.has_gpu, not has_instance_storage(spec)
            ami = inference_ami(infra.triton_version, spec)

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
            has_gpu=has_gpu,
        )
        self.endpoint = SingleModelEndpoint(
            self,
            "Endpoint",
            endpoint_name=settings.endpoint_name,
            image=image,
            instance_type=settings.instance_type,
            initial_instance_count=infra.initial_instance_count,
            bucket=store.bucket,
            model_data_key=archive_key,
            key=store.key,
            encrypt_volume=encrypt_volume,
            subnets=network.subnets.subnets,
            security_group=network.endpoint_security_group,
            rollback_alarm_names=alarms.rollback_alarm_names,
            rollout=policy_for(settings),
            inference_ami_version=ami,
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
        )
        EndpointDashboard(
            self,
            "Dashboard",
            endpoint_name=settings.endpoint_name,
            variant_name=VARIANT_NAME,
            has_gpu=has_gpu,
            models=dashboard_models(self, settings),
        )
        CfnOutput(self, "EndpointName", value=settings.endpoint_name)
        CfnOutput(self, "VariantName", value=VARIANT_NAME)
        CfnOutput(self, "Hosting", value="single-model")
        CfnOutput(self, "RouterModel", value=ROUTER_MODEL)
        CfnOutput(self, "ImageUri", value=image.uri)
        if cores is not None and base_image is not None:
            CfnOutput(self, "NeuronCores", value=str(cores))
            CfnOutput(self, "BaseImageUri", value=base_image)
        CfnOutput(
            self,
            "ModelDataUrl",
            value=f"s3://{store.bucket.bucket_name}/{archive_key}",
        )
        CfnOutput(self, "ExecutionRoleArn", value=self.endpoint.role.role_arn)
        CfnOutput(self, "AlarmTopicArn", value=topic.topic_arn)
