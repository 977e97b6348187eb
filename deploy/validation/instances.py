"""GPUs per SageMaker instance type, for instance_group checks with `--instance`."""

from __future__ import annotations

# GPU counts of the families SageMaker hosts; sizes not listed have one GPU.
_GPUS: dict[str, dict[str, int]] = {
    "g4dn": {"12xlarge": 4, "metal": 8},
    "g5": {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8},
    "g6": {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8},
    "g6e": {"12xlarge": 4, "24xlarge": 4, "48xlarge": 8},
    "p3": {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8},
    "p4d": {"24xlarge": 8},
    "p5": {"48xlarge": 8},
}
_CPU_FAMILIES = ("c", "m", "r", "t", "inf", "trn")
# The most GPUs any SageMaker hosting instance has: a GPU id at or past it
# exists nowhere.
MAX_GPUS = max(count for sizes in _GPUS.values() for count in sizes.values())


def gpu_count(instance_type: str) -> int | None:
    """GPUs on `ml.<family>.<size>`; 0 for CPU (and Inferentia) families; None if unknown."""
    parts = instance_type.split(".")
    if len(parts) != 3 or parts[0] != "ml":
        return None
    family, size = parts[1], parts[2]
    if family in _GPUS:
        return _GPUS[family].get(size, 1)
    if family.startswith(("g", "p")):
        return 1
    if family.startswith(_CPU_FAMILIES):
        return 0
    return None
