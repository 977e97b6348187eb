"""NeuronCores per Inferentia (inf1) instance size, from the instance catalogue."""

from __future__ import annotations

from deploy.catalogue.instances import describe, family_types
from deploy.errors import NeuronError

# Each first-generation Inferentia chip has 4 NeuronCores (AWS inf1 instance table);
# the chips per size are the catalogue's.
CORES_PER_INFERENTIA = 4


def is_inferentia(instance_type: str) -> bool:
    """True for any ml.inf1.* type, known size or not."""
    return instance_type.startswith("ml.inf1.")


def _inf1_cores() -> dict[str, int]:
    cores: dict[str, int] = {}
    for instance_type in family_types("inf1"):
        accelerator = describe(instance_type).accelerator
        if accelerator is not None:
            cores[instance_type] = accelerator.count * CORES_PER_INFERENTIA
    return cores


NEURON_CORES: dict[str, int] = _inf1_cores()


def neuron_cores(instance_type: str) -> int:
    """NeuronCores on `instance_type`; an unknown inf1 size is a `NeuronError`."""
    try:
        return NEURON_CORES[instance_type]
    except KeyError:
        known = ", ".join(NEURON_CORES)
        raise NeuronError(
            f"unknown Inferentia instance type {instance_type!r}",
            where="--instance",
            fix=f"use one of: {known}",
        ) from None
