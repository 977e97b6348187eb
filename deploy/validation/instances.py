"""GPUs per SageMaker instance type, for instance_group checks with `--instance`.

The numbers come from the instance catalogue (`deploy.catalogue.instances`).
"""

from __future__ import annotations

from deploy.catalogue.instances import describe, max_gpus

# The most GPUs of any SageMaker hosting instance that a Triton image runs on
# (compute capability 6.0 or more; p2's K80s are older): a GPU id at or past it
# exists nowhere a model could use it.
MAX_GPUS = max_gpus(min_compute_capability=(6, 0))


def gpu_count(instance_type: str) -> int | None:
    """NVIDIA GPUs on `ml.<family>.<size>` (0 for CPU and Neuron types); None if malformed."""
    try:
        return describe(instance_type).gpus
    except ValueError:
        return None
