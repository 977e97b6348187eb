"""Settings checks the hosting modes compose (`HostingMode.check_settings`).

Each raises `ConfigError` naming the setting and what to use instead. None
calls AWS: SageMaker's instance list comes from botocore's service model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from deploy.errors import ConfigError
from deploy.instance_types import require_instance_type

if TYPE_CHECKING:
    from deploy.config import DeploySettings

INSTANCE = "instance_type (--instance)"
HOSTING = "hosting (--hosting)"
# Families SageMaker multi-model endpoints do not run on (aws-neuron/aws-neuron-sdk#154).
NO_MME_FAMILIES = ("inf1", "inf2", "trn1", "trn2")
# Neuron families the Triton images here do not serve (inf1 has its own Neuron image).
NO_TRITON_IMAGE_FAMILIES = ("inf2", "trn1", "trn2")


def family(instance_type: str) -> str:
    return instance_type.split(".")[1] if instance_type.count(".") >= 2 else ""


def known_instance(settings: DeploySettings) -> None:
    """SageMaker's own list (with "did you mean"): every entry is ml.<family>.<size>."""
    require_instance_type(settings.instance_type, where=INSTANCE)


def multi_model_instance(settings: DeploySettings) -> None:
    if family(settings.instance_type) in NO_MME_FAMILIES:
        raise ConfigError(
            f"{settings.instance_type} cannot host a multi-model endpoint",
            where=INSTANCE,
            fix="use a GPU (ml.g5.xlarge) or CPU (ml.m5.xlarge) instance, or ml.inf1 "
            '(a single-model endpoint: `hosting = "single-model"`, implied by ml.inf1)',
        )


def single_model_instance(settings: DeploySettings) -> None:
    from deploy.neuron.instances import is_inferentia, neuron_cores

    if is_inferentia(settings.instance_type):
        neuron_cores(settings.instance_type)  # an unknown inf1 size fails here
    elif family(settings.instance_type) in NO_TRITON_IMAGE_FAMILIES:
        raise ConfigError(
            f"{settings.instance_type}: no Triton image here serves this Neuron family",
            where=INSTANCE,
            fix="use a GPU (ml.g5.xlarge), CPU (ml.m5.xlarge) or ml.inf1 instance",
        )


def keeps_an_instance(settings: DeploySettings) -> None:
    """Only asynchronous endpoints scale to zero (they queue requests meanwhile)."""
    if settings.infra.min_instance_count < 1:
        raise ConfigError(
            "min_instance_count 0 scales the endpoint to zero, which only an asynchronous "
            "endpoint can do (its requests wait in a queue meanwhile)",
            where="infra.min_instance_count",
            fix='set min_instance_count to 1 or more, or use hosting = "async"',
        )


def async_instance(settings: DeploySettings) -> None:
    """Asynchronous endpoints run the SageMaker Triton image: GPU or CPU instances."""
    if family(settings.instance_type) in NO_MME_FAMILIES:
        raise ConfigError(
            f"{settings.instance_type} cannot host an asynchronous endpoint here: it runs the "
            "SageMaker Triton image, which serves GPU and CPU instances",
            where=INSTANCE,
            fix="use a GPU (ml.g5.xlarge) or CPU (ml.m5.xlarge) instance",
        )


def not_available(mode: str) -> Callable[[DeploySettings], None]:
    """The check of a mode this version defines but cannot deploy yet."""

    def check(settings: DeploySettings) -> None:
        raise ConfigError(
            f"hosting {mode!r} is not available in this version of deploy",
            where=HOSTING,
            fix="use hosting multi-model or single-model",
        )

    return check


def all_of(*checks: Callable[[DeploySettings], None]) -> Callable[[DeploySettings], None]:
    """The checks in order (the first failure is raised)."""

    def check(settings: DeploySettings) -> None:
        for each in checks:
            each(settings)

    return check
