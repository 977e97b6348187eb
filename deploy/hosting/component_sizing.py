"""How much one copy of a model's inference component needs (`hosting = "components"`).

Apart from the mode (components.py) so that the repository's rules can size
components without the mode's settings checks (which reach SageMaker's
instance list). The rules are the mode's docstring's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deploy.errors import ConfigError

if TYPE_CHECKING:
    from deploy.catalogue.instances import Instance
    from deploy.component_settings import ComponentSettings
    from deploy.config import DeploySettings
    from deploy.repository import Model, Repository

SERVER_MEMORY_MB = 1024  # tritonserver itself, before any model
MIN_MEMORY_MB = 128  # SageMaker's MinMemoryRequiredInMb floor
MB = 1024 * 1024


@dataclass(frozen=True)
class Requirements:
    """One copy's `ComputeResourceRequirements`."""

    accelerators: int
    cpus: float
    memory_mb: int


@dataclass(frozen=True)
class ComponentSpec:
    """One model's inference component, as the endpoint stack builds it."""

    model: str
    requirements: Requirements
    min_copies: int
    max_copies: int

    @property
    def scales_to_zero(self) -> bool:
        return self.min_copies == 0


@dataclass(frozen=True)
class Component:
    """One model's inference component as `deploy up` makes it: its name, the archive
    it serves (a store key under the model-store prefix) and its spec."""

    name: str  # the InferenceComponentName (`component_name`)
    archive_key: str
    spec: ComponentSpec
    # UpdateInferenceComponent's DeploymentConfig (the rolling update policy).
    deployment: Mapping[str, Any] = field(default_factory=dict)

    @property
    def model(self) -> str:
        return self.spec.model

    @property
    def environment(self) -> dict[str, str]:
        # The SageMaker Triton image serves the archive's one model, with its metrics.
        from deploy.catalogue.images import TRITON_METRICS_ENV

        return {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": self.spec.model, **TRITON_METRICS_ENV}


def _files_bytes(model: Model) -> int:
    total = 0
    for version in model.versions:
        for relative in version.files:
            try:
                total += (version.path / relative).stat().st_size
            except OSError:
                continue  # the repository rules report unreadable files
    return total


def _kind(group: object) -> str:
    from deploy.repository.schema import model_config_pb2

    return str(model_config_pb2.ModelInstanceGroup.Kind.Name(group.kind))  # type: ignore[attr-defined]


def derived_requirements(model: Model, instance: Instance) -> Requirements:
    """What one copy of `model` needs on `instance` (the module's rules)."""
    accelerators = 0
    cpus = 0.0
    for group in model.config.instance_group:
        kind = _kind(group)
        count = int(group.count) or 1
        if kind == "KIND_GPU" or (kind == "KIND_AUTO" and instance.has_gpu):
            accelerators = max(accelerators, len(set(group.gpus)) or 1)
        elif kind == "KIND_CPU" or kind == "KIND_AUTO":
            cpus += count
    if not model.config.instance_group:
        accelerators = 1 if instance.has_gpu else 0  # Triton's default: one per GPU
    cpus = max(cpus, 1.0)
    if instance.vcpus:
        cpus = min(cpus, float(instance.vcpus))
    memory_mb = SERVER_MEMORY_MB + math.ceil(2 * _files_bytes(model) / MB)
    if instance.memory_gib:
        memory_mb = min(memory_mb, int(instance.memory_gib * 1024))
    return Requirements(accelerators, cpus, max(memory_mb, MIN_MEMORY_MB))


def requirements(model: Model, instance: Instance, override: ComponentSettings) -> Requirements:
    derived = derived_requirements(model, instance)
    accelerators = override.accelerators
    return Requirements(
        accelerators=derived.accelerators if accelerators is None else accelerators,
        cpus=derived.cpus if override.cpus is None else override.cpus,
        memory_mb=derived.memory_mb if override.memory_mb is None else override.memory_mb,
    )


def component_specs(settings: DeploySettings, repository: Repository) -> list[ComponentSpec]:
    """One component per model of the repository, sorted by name; `[stages.X.models]`
    naming a model the repository lacks is an error."""
    from deploy.catalogue.instances import describe
    from deploy.component_settings import ComponentSettings

    unknown = sorted(set(settings.models) - set(repository.models))
    if unknown:
        raise ConfigError(
            f"models.{unknown[0]}: the repository has no model {unknown[0]!r}",
            where=f"models.{unknown[0]}",
            fix=f"remove [stages.{settings.stage}.models.{unknown[0]}] or use one of: "
            f"{', '.join(sorted(repository.models)) or 'none'}",
        )
    instance = describe(settings.instance_type)
    specs = []
    for name in sorted(repository.models):
        override = settings.models.get(name, ComponentSettings())
        specs.append(
            ComponentSpec(
                model=name,
                requirements=requirements(repository.models[name], instance, override),
                min_copies=override.min_copies,
                max_copies=override.max_copies,
            )
        )
    return specs


def component_name(endpoint_name: str, model: str) -> str:
    """The model's InferenceComponentName: `<endpoint>-<model>`, in SageMaker's
    alphabet (letters, digits, dashes; 63 at most), with a short hash of the model's
    name where it had to change, so two models never share a component."""
    import hashlib
    import re

    clean = re.sub(r"[^A-Za-z0-9-]+", "-", model).strip("-")
    name = f"{endpoint_name}-{clean}"
    if clean != model or len(name) > 63:
        digest = hashlib.sha256(model.encode()).hexdigest()[:6]
        name = f"{name[: 63 - 7].rstrip('-')}-{digest}"
    return name
