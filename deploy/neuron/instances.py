"""NeuronCores per Inferentia (inf1) instance size."""

from __future__ import annotations

from deploy.errors import NeuronError

# Each Inferentia chip has 4 NeuronCores (AWS inf1 instance table).
NEURON_CORES: dict[str, int] = {
    "ml.inf1.xlarge": 4,
    "ml.inf1.2xlarge": 4,
    "ml.inf1.6xlarge": 16,
    "ml.inf1.24xlarge": 64,
}


def is_inferentia(instance_type: str) -> bool:
    """True for any ml.inf1.* type, known size or not."""
    return instance_type.startswith("ml.inf1.")


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
