"""The endpoint stack of `hosting = "components"`: the endpoint its components run on.

The instances scale with SageMaker's `ManagedInstanceScaling`
(`infra.min_instance_count`, 0 allowed, to `infra.max_instance_count`). The
inference components, one per model with its requirements and copy
autoscaling, are `deploy up`'s (`deploy.hosting.components` says why): this
template does not depend on the repository or the package, so a model's new
version changes nothing here. Its outputs tell `deploy up` the image, the
variant and the alarm topic the components use.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from deploy.config import DeploySettings
from deploy.hosting import mode_for
from deploy_infra.constructs.inference_components import ComponentsEndpoint
from deploy_infra.constructs.model_store import ModelStore
from deploy_infra.constructs.monitoring import alarm_topic
from deploy_infra.constructs.network import PrivateNetwork
from deploy_infra.constructs.sagemaker_endpoint import VARIANT_NAME
from deploy_infra.instances import (
    has_instance_storage,
    inference_ami,
    instance_spec,
    triton_image_uri,
)


class ComponentsEndpointStack(Stack):
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
        self.endpoint = ComponentsEndpoint(
            self,
            "Endpoint",
            endpoint_name=settings.endpoint_name,
            image_uri=image_uri,
            instance_type=settings.instance_type,
            min_instance_count=infra.min_instance_count,
            initial_instance_count=max(infra.initial_instance_count, infra.min_instance_count),
            max_instance_count=infra.max_instance_count,
            bucket=store.bucket,
            prefix=store.prefix,
            key=store.key,
            encrypt_volume=not has_instance_storage(spec),
            subnets=network.subnets.subnets,
            security_group=network.endpoint_security_group,
            inference_ami_version=inference_ami(infra.triton_version, spec),
            detailed_observability=infra.detailed_observability,
        )
        topic = alarm_topic(
            self,
            "AlarmTopic",
            endpoint_name=settings.endpoint_name,
            key=store.key,
            existing_topic_arn=infra.notification_topic_arn,
            email=infra.notification_email,
        )
        CfnOutput(self, "EndpointName", value=settings.endpoint_name)
        CfnOutput(self, "VariantName", value=VARIANT_NAME)
        CfnOutput(self, "Hosting", value=mode_for(settings).name)
        CfnOutput(self, "ImageUri", value=image_uri)
        CfnOutput(self, "ExecutionRoleArn", value=self.endpoint.role.role_arn)
        CfnOutput(self, "AlarmTopicArn", value=topic.topic_arn)
