"""Rules of `hosting = "components"`: do the models' components fit the instance?

SageMaker places each copy of a component on an instance with room for its
`ComputeResourceRequirements`; a copy that fits no instance never starts, and
the minimum copies of every model must fit the instances the endpoint keeps.
Findings name `[stages.X.models.NAME]` and say what to change.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from deploy.validation.diagnostics import Diagnostic, error, warning

if TYPE_CHECKING:
    from deploy.catalogue.instances import Instance
    from deploy.config import DeploySettings
    from deploy.hosting.component_sizing import ComponentSpec
    from deploy.repository import Repository

_STAGE = ""  # `Diagnostic.model` of findings about the stage rather than one model


def fit_diagnostics(
    settings: DeploySettings, repository: Repository, *, settings_file: str
) -> list[Diagnostic]:
    return list(_fit(settings, repository, settings_file))


def _fit(settings: DeploySettings, repository: Repository, file: str) -> Iterator[Diagnostic]:
    from deploy.catalogue.instances import describe
    from deploy.errors import ConfigError
    from deploy.hosting.component_sizing import component_specs

    try:
        specs = component_specs(settings, repository)
    except ConfigError as exc:
        yield error(_STAGE, file, exc.where or "models", exc.message, exc.fix or "")
        return
    instance = describe(settings.instance_type)
    section = f"[stages.{settings.stage}.models"
    for spec in specs:
        needs = spec.requirements
        field = f"{section}.{spec.model}]"
        if needs.accelerators > instance.gpus:
            yield error(
                spec.model,
                file,
                f"{field} accelerators",
                f"one copy asks for {needs.accelerators} accelerator(s); "
                f"{settings.instance_type} has {instance.gpus}",
                f"set accelerators to at most {instance.gpus}, or pick an instance type with "
                f"{needs.accelerators} GPUs or more",
            )
        if instance.memory_gib and needs.memory_mb > instance.memory_gib * 1024:
            yield error(
                spec.model,
                file,
                f"{field} memory_mb",
                f"one copy asks for {needs.memory_mb} MB; {settings.instance_type} has "
                f"{int(instance.memory_gib * 1024)} MB",
                "lower memory_mb or pick an instance type with more memory",
            )
        if instance.vcpus and needs.cpus > instance.vcpus:
            yield error(
                spec.model,
                file,
                f"{field} cpus",
                f"one copy asks for {needs.cpus:g} vCPUs; {settings.instance_type} has "
                f"{instance.vcpus}",
                "lower cpus or pick an instance type with more vCPUs",
            )
    yield from _minimum_fits(settings, specs, instance, file)


def _minimum_fits(
    settings: DeploySettings, specs: Sequence[ComponentSpec], instance: Instance, file: str
) -> Iterator[Diagnostic]:
    count = settings.infra.max_instance_count
    totals = {
        "accelerators": sum(s.min_copies * s.requirements.accelerators for s in specs),
        "memory_mb": sum(s.min_copies * s.requirements.memory_mb for s in specs),
        "cpus": sum(s.min_copies * s.requirements.cpus for s in specs),
    }
    room: dict[str, float] = {
        "accelerators": instance.gpus * count,
        "memory_mb": int((instance.memory_gib or 0) * 1024) * count,
        "cpus": (instance.vcpus or 0) * count,
    }
    for name, total in totals.items():
        # An unknown size (0) is not checked, except GPUs: a CPU instance has none.
        if total > room[name] and (room[name] or name == "accelerators"):
            yield error(
                _STAGE,
                file,
                f"[stages.{settings.stage}.models] min_copies",
                f"the models' minimum copies need {total:g} {name} in all; "
                f"{count} × {settings.instance_type} (infra.max_instance_count) hold "
                f"{room[name]:g}",
                "lower min_copies or the models' requirements, raise "
                "infra.max_instance_count, or pick a larger instance type",
            )
    if specs and all(s.min_copies == 0 for s in specs) and settings.infra.min_instance_count:
        yield warning(
            _STAGE,
            file,
            "infra.min_instance_count",
            f"every model may scale to zero copies, but min_instance_count "
            f"{settings.infra.min_instance_count} keeps instances running (and billed)",
            "set infra.min_instance_count = 0 so the instances scale to zero with the copies",
        )
