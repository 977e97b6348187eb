"""The image catalogue: the SageMaker Triton image tags and what each needs of its host.

One table (`images.json` beside this file, with its sources) records for each
tag sagemaker-core knows: the Triton server version, its CUDA, the NVIDIA
driver that CUDA needs, the `InferenceAmiVersion` that brings that driver
(none where SageMaker's default AMI runs the image through CUDA forward
compatibility), the oldest GPU (compute capability) its Triton build supports,
and its Ubuntu, hence the Python and glibc that python-backend models and
execution environments must match. It also dates the config fields newer
Triton releases added, and the behaviour changes between the local server
(tritonserver 2.51 from nvidia-pytriton) and newer images.

`incompatibility(image, instance)` is the single answer to "can this image run
on this instance"; validation, `deploy up` and the CDK app all ask it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from deploy.catalogue.instances import Instance
from deploy.errors import ConfigError

# The stage setting's default: existing stages keep the image they were deployed
# with across upgrades of this tool (a new default would replace every endpoint).
# `deploy init` writes NEW_STAGE_TRITON_VERSION into new projects instead.
# The SageMaker Triton image's `serve` starts Triton with `--allow-metrics=false`
# unless this is set: endpoints set it so Triton's metrics exist to be scraped.
TRITON_METRICS_ENV = {"SAGEMAKER_TRITON_ALLOW_METRICS": "true"}
DEFAULT_TRITON_VERSION = "24.09"
NEW_STAGE_TRITON_VERSION = "26.05"

_TAG = re.compile(r"^(\d{2})\.(\d{2})(?:-.*)?$")
_WHERE = "infra.triton_version"


@dataclass(frozen=True)
class ImagePython:
    ubuntu: str
    python: str  # major.minor of the stub's interpreter
    glibc: tuple[int, int]  # newest manylinux_<major>_<minor> its wheels may need


@dataclass(frozen=True)
class TritonImage:
    tag: str
    triton: tuple[int, int, int]
    cuda: str
    min_driver: int
    inference_ami: str | None
    min_compute_capability: tuple[int, int]
    python: ImagePython

    @property
    def triton_text(self) -> str:
        return ".".join(map(str, self.triton))


@cache
def _table() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("images.json").read_text(encoding="utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _release(tag: str) -> tuple[int, int]:
    match = _TAG.match(tag.strip())
    if not match:
        raise ConfigError(
            f"{tag!r} is not a SageMaker Triton image version",
            where=_WHERE,
            fix=f"use the image's YY.MM tag, one of {', '.join(known_tags())}",
        )
    return int(match.group(1)), int(match.group(2))


def known_tags() -> list[str]:
    return sorted(_table()["tags"], key=lambda tag: _release(tag))


def _python(ubuntu: str) -> ImagePython:
    entry = _table()["ubuntu"][ubuntu]
    major, minor = _version(entry["glibc"])
    return ImagePython(ubuntu, entry["python"], (major, minor))


def image(tag: str) -> TritonImage:
    """The catalogue's entry for a SageMaker Triton image tag (e.g. "24.09")."""
    release = _release(tag)
    key = f"{release[0]:02d}.{release[1]:02d}"
    entry = _table()["tags"].get(key)
    if entry is None:
        raise ConfigError(
            f"SageMaker publishes no Triton image {tag!r} that deploy knows",
            where=_WHERE,
            fix=f"use one of {', '.join(known_tags())}",
        )
    triton = _version(entry["triton"])
    capability = _version(entry["min_compute_capability"])
    return TritonImage(
        tag=key,
        triton=(triton[0], triton[1], triton[2]),
        cuda=entry["cuda"],
        min_driver=int(entry["min_driver"]),
        inference_ami=entry["inference_ami"],
        min_compute_capability=(capability[0], capability[1]),
        python=image_python(key),
    )


# Ubuntu base of every Triton release (server build.py): 22.04 from r23.05, 24.04 from r24.11.
_FIRST_2204 = (23, 5)
_FIRST_2404 = (24, 11)


def image_python(tag: str) -> ImagePython:
    """The Python and glibc of Triton image `tag`, also for tags outside the catalogue
    (custom images built FROM a release): its Ubuntu follows from the release."""
    release = _release(tag)
    if release < _FIRST_2204:
        raise ConfigError(
            f"image {tag} predates the releases deploy knows the Python of (23.05 and later)",
            where=_WHERE,
            fix="use 23.05 or a later image, or pass --python X.Y",
        )
    return _python("24.04" if release >= _FIRST_2404 else "22.04")


def ami_driver(ami: str) -> int:
    """The NVIDIA driver major version of an InferenceAmiVersion."""
    return int(_table()["amis"][ami]["driver"])


def incompatibility(triton_image: TritonImage, instance: Instance) -> str | None:
    """Why `triton_image` cannot run on `instance`, or None when it can."""
    name = f"the SageMaker Triton image {triton_image.tag}"
    if instance.architecture != "x86_64":
        return (
            f"{instance.instance_type} is an {instance.architecture} host and {name} is built "
            "for x86_64 only"
        )
    if instance.accelerator_kind not in ("none", "nvidia-gpu"):
        return (
            f"{instance.instance_type} has {instance.accelerator_kind} accelerators, "
            f"which {name} cannot use"
        )
    accelerator = instance.accelerator
    capability = accelerator.compute_capability if accelerator else None
    if accelerator and capability and capability < triton_image.min_compute_capability:
        need = ".".join(map(str, triton_image.min_compute_capability))
        have = ".".join(map(str, capability))
        return (
            f"{name} needs a GPU of compute capability {need} or newer; the {accelerator.model} "
            f"of {instance.instance_type} has {have}"
        )
    return None


def newest_compatible(instance: Instance) -> str | None:
    """The newest catalogued tag that runs on `instance` (for a fix text)."""
    for tag in reversed(known_tags()):
        if incompatibility(image(tag), instance) is None:
            return tag
    return None


def inference_ami_version(triton_image: TritonImage, instance: Instance) -> str | None:
    """The ProductionVariant.InferenceAmiVersion a GPU instance needs for this image."""
    return triton_image.inference_ami if instance.has_gpu else None


def config_fields_since() -> dict[str, tuple[int, int, int]]:
    """Config field paths (`model_metrics`, `ensemble_scheduling.max_inflight_requests`)
    → the Triton version that introduced them."""
    fields = _table()["config_fields"]
    return {path: _triple(entry["triton"]) for path, entry in fields.items()}


def _triple(text: str) -> tuple[int, int, int]:
    parts = _version(text)
    return parts[0], parts[1], parts[2]


def local_triton() -> tuple[int, int, int]:
    """The Triton version of the tritonserver `deploy serve` runs (nvidia-pytriton's)."""
    return _triple(_table()["local_server"]["triton"])


def differences_from_local(tag: str) -> list[str]:
    """What the image `tag` does that the local server does not (empty when it is older)."""
    target = image(tag).triton
    local = local_triton()
    return [
        f"Triton {entry['triton']}: {entry['change']}"
        for entry in _table()["changes_after_local"]
        if local < _triple(entry["triton"]) <= target
    ]


def first_tag_with(triton: tuple[int, int, int]) -> str | None:
    """The oldest catalogued tag whose Triton is at least `triton`."""
    for tag in known_tags():
        if image(tag).triton >= triton:
            return tag
    return None
