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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from deploy.client.manifest import COMPONENTS
from deploy.errors import ConfigError
from deploy.hosting import rules
from deploy.hosting.mode import HostingMode, LocalServing
from deploy.hosting.per_model import PerModelLayout

if TYPE_CHECKING:
    from deploy.config import DeploySettings
    from deploy.repository import Repository
    from deploy.validation.diagnostics import Diagnostic


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


def deployed_by_up(settings: DeploySettings) -> None:
    """`deploy up` does not plan per component yet: refuse before anything is packaged,
    uploaded or changed (the archives' keys would not match what the stack names)."""
    raise ConfigError(
        f"hosting {COMPONENTS!r}: `deploy up` cannot deploy inference components in this "
        "version (`deploy validate` checks them, and the CDK app synthesizes their stack)",
        where=rules.HOSTING,
        fix='use hosting "multi-model" to deploy now',
    )


MODE = HostingMode(
    name=COMPONENTS,
    summary="inference components: one per model, its own GPUs, memory and copies",
    layout=PerModelLayout(),
    check_settings=rules.all_of(rules.known_instance, gpu_or_cpu_instance, deployed_by_up),
    endpoint_stack="components-endpoint",
    check_repository=repository_rules,
    # ManagedInstanceScaling may reach 0 instances when every model has 0 copies.
    scales_to_zero=True,
    # A copy per component in tritonserver, by InferenceComponentName (deploy.local.components).
    local=LocalServing("components"),
)
