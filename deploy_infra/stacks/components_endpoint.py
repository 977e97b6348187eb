"""The endpoint stack of `hosting = "components"`: one inference component per model.

The instances scale with SageMaker's `ManagedInstanceScaling`
(`infra.min_instance_count`, 0 allowed, to `infra.max_instance_count`); each
model's copies scale on their own (`[stages.X.models.NAME] min_copies`,
`max_copies`, target `infra.target_invocations_per_instance` invocations per
copy). The components and their requirements come from the stage's repository
(`deploy.hosting.components.component_specs`); each serves its model's archive,
named by the packaged manifest's TargetModel where `deploy package` has written
one, else `<model>.tar.gz`, under the model-store prefix.
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_cloudwatch_actions as cw_actions
from constructs import Construct

from deploy.config import DeploySettings
from deploy.hosting import mode_for
from deploy.hosting.component_sizing import ComponentSpec, component_name, component_specs
from deploy.hosting.per_model import manifest_entries
from deploy.repository.loader import load_repository
from deploy_infra.constructs.inference_components import ComponentAutoscaling, ComponentsEndpoint
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


def archive_keys(
    settings: DeploySettings, prefix: str, specs: list[ComponentSpec]
) -> dict[str, str]:
    """Each model's archive key: the packaged manifest's TargetModel, else `<model>.tar.gz`."""
    manifest = mode_for(settings).package_dir(settings.package_dir) / "manifest.json"
    packaged: dict[str, str] = {}
    if manifest.is_file():
        document = json.loads(manifest.read_text(encoding="utf-8"))
        entries = manifest_entries(document, where=str(manifest))
        packaged = {name: entry.target_model for name, entry in entries.items()}
    return {
        spec.model: f"{prefix}{packaged.get(spec.model, f'{spec.model}.tar.gz')}" for spec in specs
    }


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
        specs = component_specs(settings, load_repository(settings.repository))
        keys = archive_keys(settings, store.prefix, specs)
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
            archive_keys=keys,
            key=store.key,
            encrypt_volume=not has_instance_storage(spec),
            subnets=network.subnets.subnets,
            security_group=network.endpoint_security_group,
            specs=specs,
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
        for index, each in enumerate(specs):
            scaling = ComponentAutoscaling(
                self,
                f"Autoscaling{index}",
                component=self.endpoint.components[each.model],
                spec=each,
                invocations_per_copy=infra.target_invocations_per_instance,
                scale_in_cooldown=Duration.seconds(infra.scale_in_cooldown_s),
                scale_out_cooldown=Duration.seconds(infra.scale_out_cooldown_s),
            )
            if scaling.scale_from_zero is not None:
                # The operator hears of a cold start too (it takes minutes).
                scaling.scale_from_zero.add_alarm_action(cw_actions.SnsAction(topic))
        CfnOutput(self, "EndpointName", value=settings.endpoint_name)
        CfnOutput(self, "VariantName", value=VARIANT_NAME)
        CfnOutput(self, "Hosting", value=mode_for(settings).name)
        CfnOutput(self, "ImageUri", value=image_uri)
        CfnOutput(
            self,
            "InferenceComponents",
            value=",".join(component_name(settings.endpoint_name, s.model) for s in specs),
        )
        CfnOutput(self, "ExecutionRoleArn", value=self.endpoint.role.role_arn)
        CfnOutput(self, "AlarmTopicArn", value=topic.topic_arn)
