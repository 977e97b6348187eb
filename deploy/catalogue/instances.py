"""The instance catalogue: what each SageMaker hosting instance type is.

One table (`instances.json` beside this file, with its sources) answers, for
every type of botocore's `ProductionVariantInstanceType` enum: the host
architecture, the accelerator (kind, model, count, memory per device, CUDA
compute capability), vCPUs, memory, whether its volumes are local NVMe, and
the hosting modes AWS documents for it. Validation, the hosting rules, the
prices, the CDK app and `deploy bench` read it here; nothing else keeps a GPU
count or a family list.

A type the table does not know (AWS adds types before this table does) is
never taken for CPU silently: `describe` returns an entry marked `known=False`
and `assumption` says what was assumed, for the caller to warn with.
Hourly prices live in `prices.json` beside it, dated and marked as estimates.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

Architecture = Literal["x86_64", "arm64"]
AcceleratorKind = Literal["none", "nvidia-gpu", "inferentia", "trainium", "gaudi"]

# Hosting modes AWS documents per type (sagemaker multi-model-support,
# serverless-endpoints and inference-components pages, read 2026-11).
REAL_TIME = "real-time"
ASYNC = "async"
MULTI_MODEL = "multi-model"
INFERENCE_COMPONENTS = "inference-components"

_TYPE = re.compile(r"^ml\.(?P<family>[a-z0-9-]+)\.(?P<size>[a-z0-9]+)$")
_LADDER_VCPUS = {"medium": 1, "large": 2, "xlarge": 4}


@dataclass(frozen=True)
class Accelerator:
    kind: AcceleratorKind
    model: str
    count: int
    memory_gib: float  # per device
    compute_capability: tuple[int, int] | None  # NVIDIA GPUs only

    @property
    def total_memory_gib(self) -> float:
        return self.memory_gib * self.count


@dataclass(frozen=True)
class Instance:
    """One hosting instance type, as the catalogue records it."""

    instance_type: str
    family: str
    architecture: Architecture
    vcpus: int | None
    memory_gib: float | None
    accelerator: Accelerator | None
    local_nvme: bool
    modes: frozenset[str]
    known: bool = True
    assumption: str | None = None  # set when `known` is False

    @property
    def accelerator_kind(self) -> AcceleratorKind:
        return self.accelerator.kind if self.accelerator else "none"

    @property
    def gpus(self) -> int:
        """NVIDIA GPUs on the instance (0 for CPU, Inferentia, Trainium, Gaudi)."""
        accelerator = self.accelerator
        return accelerator.count if accelerator and accelerator.kind == "nvidia-gpu" else 0

    @property
    def has_gpu(self) -> bool:
        return self.gpus > 0

    @property
    def is_neuron(self) -> bool:
        return self.accelerator_kind in ("inferentia", "trainium")

    @property
    def gpu_memory_gib(self) -> float | None:
        return self.accelerator.memory_gib if self.has_gpu and self.accelerator else None


@cache
def _table() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("instances.json").read_text(encoding="utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def _ladder_vcpus(size: str) -> int | None:
    if size in _LADDER_VCPUS:
        return _LADDER_VCPUS[size]
    match = re.fullmatch(r"(\d+)xlarge", size)
    return 4 * int(match.group(1)) if match else None


def _row(family: dict[str, Any], size: str) -> tuple[int | None, float | None, int] | None:
    """[vCPUs, memory GiB, accelerators] of one size; ladder families compute it."""
    sizes = family["sizes"]
    if isinstance(sizes, dict):
        row = sizes.get(size)
        return (row[0], row[1], row[2]) if row else None
    vcpus = _ladder_vcpus(size)
    per_vcpu = _table()["size_ladders"][sizes]["GiB per vCPU"]
    return None if vcpus is None else (vcpus, vcpus * per_vcpu, 0)


def _capability(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    major, minor = text.split(".")
    return int(major), int(minor)


def _accelerator(family: dict[str, Any], count: int) -> Accelerator | None:
    name = family.get("accelerator")
    if name is None or count == 0:
        return None
    spec = _table()["accelerators"][name]
    capability = _capability(spec["compute_capability"])
    return Accelerator(
        kind=spec["kind"],
        model=name,
        count=count,
        memory_gib=float(spec["memory_gib"]),
        compute_capability=capability,
    )


def _modes(family: dict[str, Any], size: str, accelerator: Accelerator | None) -> frozenset[str]:
    modes = {REAL_TIME, ASYNC}
    kind = accelerator.kind if accelerator else "none"
    if kind == "none" or size in family.get("mme_sizes", ()):
        modes.add(MULTI_MODEL)
    if family.get("accelerator") != "Inferentia":
        modes.add(INFERENCE_COMPONENTS)
    return frozenset(modes)


def describe(instance_type: str) -> Instance:
    """The catalogue's entry for `instance_type`; an unknown one is marked and explained.

    Raises `ValueError` for a string that is not of the form `ml.<family>.<size>`.
    """
    match = _TYPE.match(instance_type)
    if not match:
        raise ValueError(f"{instance_type!r} is not of the form ml.<family>.<size>")
    family_name, size = match.group("family"), match.group("size")
    family = _table()["families"].get(family_name)
    row = _row(family, size) if family else None
    if family is None or row is None:
        return _unknown(instance_type, family_name, family)
    vcpus, memory, count = row
    accelerator = _accelerator(family, count)
    return Instance(
        instance_type=instance_type,
        family=family_name,
        architecture=family["architecture"],
        vcpus=vcpus,
        memory_gib=float(memory) if memory is not None else None,
        accelerator=accelerator,
        local_nvme=bool(family["nvme"]),
        modes=_modes(family, size, accelerator),
    )


def _unknown(instance_type: str, family_name: str, family: dict[str, Any] | None) -> Instance:
    """A type missing from the table: assume what its family (or name) suggests, and say so."""
    if family is not None and family.get("accelerator"):
        name = family["accelerator"]
        spec = _table()["accelerators"][name]
        accelerator: Accelerator | None = Accelerator(
            kind=spec["kind"], model=name, count=1, memory_gib=float(spec["memory_gib"]),
            compute_capability=_capability(spec["compute_capability"]),
        )  # fmt: skip
        assumed = f"one {name} like the rest of the {family_name} family"
    elif family is not None:
        accelerator, assumed = None, f"a CPU instance like the rest of the {family_name} family"
    elif family_name.startswith(("g", "p")):
        accelerator = Accelerator("nvidia-gpu", "unknown NVIDIA GPU", 1, 0.0, None)
        assumed = "one NVIDIA GPU of unknown memory (g/p families are GPU families)"
    else:
        accelerator, assumed = None, "a CPU instance"
    architecture: Architecture = (
        family["architecture"] if family else ("arm64" if family_name.endswith("g") else "x86_64")
    )
    return Instance(
        instance_type=instance_type,
        family=family_name,
        architecture=architecture,
        vcpus=None,
        memory_gib=None,
        accelerator=accelerator,
        local_nvme=bool(family and family["nvme"]),
        modes=frozenset({REAL_TIME, ASYNC}),
        known=False,
        assumption=f"{instance_type} is not in deploy's instance catalogue; assumed {assumed}",
    )


def family_types(family: str) -> list[str]:
    """The types of a family whose sizes the table lists one by one (accelerated families)."""
    sizes = _table()["families"][family]["sizes"]
    return [f"ml.{family}.{size}" for size in sizes] if isinstance(sizes, dict) else []


def max_gpus(*, min_compute_capability: tuple[int, int] = (0, 0)) -> int:
    """The most NVIDIA GPUs any catalogued instance has, counting only GPUs of at least
    `min_compute_capability`."""
    table = _table()
    return max(
        int(row[2])
        for family in table["families"].values()
        if (spec := table["accelerators"].get(family.get("accelerator"), {})).get("kind")
        == "nvidia-gpu"
        and (_capability(spec["compute_capability"]) or (0, 0)) >= min_compute_capability
        for row in family["sizes"].values()
    )


def sources() -> list[str]:
    return list(_table()["sources"])


# -- prices ---------------------------------------------------------------------------


@cache
def price_table() -> dict[str, Any]:
    """`prices.json`: on-demand hourly prices per region, dated, marked as an estimate."""
    text = resources.files(__package__).joinpath("prices.json").read_text(encoding="utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def hourly_price(instance_type: str, region: str) -> float | None:
    """The table's on-demand hourly price (USD) of `instance_type` in `region`, if listed."""
    price = price_table()["regions"].get(region, {}).get(instance_type)
    return float(price) if price is not None else None
