"""`hosting = "components"`: one SageMaker inference component per logical model.

The endpoint holds instances (`ManagedInstanceScaling`, a minimum of 0 allowed);
each model is an inference component with its own `ComputeResourceRequirements`
and copy count, autoscaled on its own. A component runs the SageMaker Triton
image in single-model mode on that model's own archive (the per-model layout
of multi-model endpoints): a router archive would put every model in every
copy, so a copy could no longer be sized or scaled for one model.

Requirements per copy (`component_sizing.py`, which the repository rules use
too), unless `[stages.X.models.NAME]` sets them
(`deploy.component_settings`):

- accelerators: a model with a KIND_GPU instance group takes the GPUs its groups
  list (`gpus: [0, 1]` is 2), at least 1; KIND_AUTO takes 1 on a GPU instance;
  CPU models take 0. Triton places a group's `count` instances on each of those
  GPUs, so the count does not add GPUs;
- cpus: CPU models take their KIND_CPU instance count (Triton's default count is
  1); GPU models 1; never more than the instance's vCPUs;
- memory_mb: twice the model's files (Triton's copy plus the backend's), plus
  1024 MB for the server, never more than the instance's memory.

`deploy up` makes the components itself, through the SageMaker API, not
through the endpoint stack. The stack holds what does not change with the
models (the endpoint config with `ManagedInstanceScaling`, the endpoint, the
execution role, the alarm topic); `deploy up` plans one action per component
(`deploy.lifecycle.components`): create for a new model, update
(UpdateInferenceComponent with a rolling update policy from `[stages.X.rollout]`)
for a model whose archive or requirements changed, delete for a removed model,
applied only after the manifest that no longer names it is published. Why not
CloudFormation: the stack's template would depend on every model's archive
(synthesis and its cache would follow the package), a removal would need a
second template after publishing, and CloudFormation updates the stack, not one
component. Each component's copy autoscaling and, for a minimum of 0 copies,
the scale-from-zero alarm and step policy go with it (`deploy.aws.inference_components`).

The published manifest names each model's component (`inference_component`,
`X-Amzn-SageMaker-Inference-Component`): `<endpoint>-<model>` (`component_name`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deploy.client import manifest as contract
from deploy.client.manifest import COMPONENTS
from deploy.errors import ConfigError
from deploy.hosting import rules
from deploy.hosting.component_sizing import (
    Component,
    ComponentSpec,
    component_name,
    component_specs,
)
from deploy.hosting.layout import StagePackage
from deploy.hosting.mode import HostingMode, LocalServing
from deploy.hosting.per_model import PerModelLayout

if TYPE_CHECKING:
    from deploy.config import DeploySettings
    from deploy.repository import Repository
    from deploy.validation.diagnostics import Diagnostic

# UpdateInferenceComponent's rolling batches: a share of the copies SageMaker takes
# between 5% and 50%, or a number of copies.
BATCH_PERCENT = (5, 50)


def repository_rules(
    settings: DeploySettings, repository: Repository, settings_file: str
) -> Sequence[Diagnostic]:
    from deploy.validation.components import fit_diagnostics

    return fit_diagnostics(settings, repository, settings_file=settings_file)


def gpu_or_cpu_instance(settings: DeploySettings) -> None:
    """Components run the SageMaker Triton image: GPU or CPU instances."""
    from deploy.catalogue.instances import describe

    if describe(settings.instance_type).is_neuron:
        raise ConfigError(
            f"{settings.instance_type}: inference components here run the SageMaker Triton "
            "image, which needs a GPU or CPU instance",
            where=rules.INSTANCE,
            fix="use a GPU (ml.g5.xlarge) or CPU (ml.m5.xlarge) instance type",
        )


def desired_components(
    settings: DeploySettings, repository: Path, package: StagePackage
) -> tuple[Component, ...]:
    """One component per packaged model, serving its archive (its TargetModel's key),
    sized from the repository's model and `[stages.X.models.NAME]`."""
    from deploy.repository.loader import load_repository

    specs = {spec.model: spec for spec in component_specs(settings, load_repository(repository))}
    components = []
    for name, model in sorted(package.manifest.models.items()):
        spec = specs.get(name)
        if spec is None:
            raise ConfigError(
                f"the package holds model {name!r}, which the repository lacks",
                where=str(package.manifest_path),
                fix="package the repository again (drop --skip-package)",
            )
        components.append(
            Component(
                component_name(settings.endpoint_name, name),
                model.target_model,
                spec,
                deployment_config(settings, spec),
            )
        )
    return tuple(components)


def published_manifest(settings: DeploySettings, manifest: contract.Manifest) -> contract.Manifest:
    """The manifest `deploy up` publishes: hosting components, each model naming its
    InferenceComponentName (format 1.2). `invoke` is written once this version's
    reader takes the inference-component addressing; until then readers take it from
    the hosting."""
    models = {
        name: replace(model, inference_component=component_name(settings.endpoint_name, name))
        for name, model in manifest.models.items()
    }
    sendable = contract.INFERENCE_COMPONENT_HEADER in contract.ADDRESSINGS
    return replace(
        manifest,
        hosting=COMPONENTS,
        models=models,
        format_minor=contract.MANIFEST_MINOR,
        invoke=contract.Invoke.of(COMPONENTS) if sendable else None,
    )


def deployment_config(settings: DeploySettings, spec: ComponentSpec) -> dict[str, Any]:
    """UpdateInferenceComponent's DeploymentConfig from `[stages.X.rollout]`: copies are
    replaced in batches (linear: `linear_step`; canary: `canary_size` first; percentages
    within SageMaker's 5-50%; all-at-once: every copy), waiting `wait_interval_s` after
    each, rolled back when an alarm of `rollout.alarms` fires."""
    from deploy.guardrails import INSTANCES, policy_for

    rollout = settings.rollout
    size = policy_for(settings).size
    if size is None:
        batch = {"Type": "COPY_COUNT", "Value": spec.max_copies}
    elif size[0] == INSTANCES:
        batch = {"Type": "COPY_COUNT", "Value": size[1]}
    else:
        low, high = BATCH_PERCENT
        batch = {"Type": "CAPACITY_PERCENT", "Value": min(max(size[1], low), high)}
    config: dict[str, Any] = {
        "RollingUpdatePolicy": {
            "MaximumBatchSize": batch,
            "WaitIntervalInSeconds": rollout.wait_interval_s,
            "MaximumExecutionTimeoutInSeconds": rollout.maximum_execution_s,
            "RollbackMaximumBatchSize": batch,
        }
    }
    if rollout.alarms:
        config["AutoRollbackConfiguration"] = {
            "Alarms": [{"AlarmName": name} for name in rollout.alarms]
        }
    return config


MODE = HostingMode(
    name=COMPONENTS,
    summary="inference components: one per model, its own GPUs, memory and copies",
    layout=PerModelLayout(),
    check_settings=rules.all_of(rules.known_instance, gpu_or_cpu_instance),
    endpoint_stack="components-endpoint",
    check_repository=repository_rules,
    # ManagedInstanceScaling may reach 0 instances when every model has 0 copies.
    scales_to_zero=True,
    components=desired_components,
    bind_manifest=published_manifest,
    # A copy per component in tritonserver, by InferenceComponentName
    # (deploy.local.modes.components).
    local=LocalServing("components", idle_unload=True),
)
