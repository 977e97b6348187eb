"""Instance families a Triton multi-model endpoint can run on, and their image."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from typing import Literal

from deploy.catalogue.images import (
    TritonImage,
    image,
    incompatibility,
    inference_ami_version,
    newest_compatible,
)
from deploy.catalogue.instances import Instance, describe
from deploy.errors import ConfigError
from deploy.instance_types import require_instance_type
from deploy_infra.errors import InfraConfigError


@dataclass(frozen=True)
class InstanceSpec:
    instance_type: str
    family: str
    processor: Literal["gpu", "cpu"]
    instance: Instance  # the catalogue's entry

    @property
    def has_gpu(self) -> bool:
        return self.processor == "gpu"


@cache
def _warn_once(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr)


def instance_spec(instance_type: str) -> InstanceSpec:
    """Classify `instance_type` (`ml.<family>.<size>`) for a multi-model endpoint."""
    parts = instance_type.split(".")
    if len(parts) != 3 or parts[0] != "ml" or not parts[1] or not parts[2]:
        raise InfraConfigError(
            f"instance type {instance_type!r} is not of the form ml.<family>.<size>",
            where="instance_type",
            fix="set instance_type to a SageMaker instance such as ml.g5.xlarge or ml.m5.xlarge",
        )
    family = parts[1]
    try:
        require_instance_type(instance_type, where="instance_type")
    except ConfigError as exc:
        raise InfraConfigError(exc.message, where=exc.where, fix=exc.fix) from None
    instance = describe(instance_type)
    if instance.assumption:
        _warn_once(instance.assumption)
    if instance.is_neuron:
        raise InfraConfigError(
            f"{instance_type} cannot host a multi-model endpoint: SageMaker does not run "
            "multi-model endpoints on Inferentia/Trainium instances",
            where="instance_type",
            fix="use a GPU (ml.g5.xlarge) or CPU (ml.m5.xlarge) instance for a multi-model "
            "stage; for Inferentia use an ml.inf1.* stage (a single-model endpoint, see "
            "`deploy neuron`)",
        )
    if instance.accelerator_kind == "gaudi":
        raise InfraConfigError(
            f"{instance_type} has Gaudi accelerators, which the SageMaker Triton image cannot use",
            where="instance_type",
            fix="use a GPU (ml.g5.xlarge) or CPU (ml.m5.xlarge) instance",
        )
    if instance.architecture != "x86_64":
        raise InfraConfigError(
            f"{instance_type} is an {instance.architecture} (Graviton/Grace) host; the SageMaker "
            "Triton image is built for x86_64 only",
            where="instance_type",
            fix="use an x86_64 type: ml.c7i/ml.m7i/ml.r7i for CPU, ml.g5/ml.g6/ml.p5 for GPU",
        )
    return InstanceSpec(instance_type, family, "gpu" if instance.has_gpu else "cpu", instance)


def check_image_runs(version: str, spec: InstanceSpec) -> TritonImage:
    """The catalogue's image `version`, after checking it can run on the stage's instance."""
    try:
        triton = image(version)
    except ConfigError as exc:
        raise InfraConfigError(exc.message, where=exc.where, fix=exc.fix) from None
    reason = incompatibility(triton, spec.instance)
    if reason is not None:
        newest = newest_compatible(spec.instance)
        raise InfraConfigError(
            reason,
            where="infra.triton_version / instance_type",
            fix=f'set infra.triton_version = "{newest}" for {spec.instance_type}, or pick an '
            "instance the image runs on"
            if newest
            else "pick an x86_64 CPU or NVIDIA GPU instance",
        )
    return triton


def inference_ami(version: str, spec: InstanceSpec) -> str | None:
    """The endpoint's InferenceAmiVersion: the AMI whose driver the image needs (GPU only)."""
    return inference_ami_version(check_image_runs(version, spec), spec.instance)


def triton_image_uri(*, region: str, version: str, instance_type: str) -> str:
    """The SageMaker Triton image for this region, version and processor (GPU or `-cpu` tag)."""
    check_image_runs(version, instance_spec(instance_type))
    from sagemaker.core import image_uris

    try:
        uri: str = image_uris.retrieve(
            framework="sagemaker-tritonserver",
            region=region,
            version=version,
            instance_type=instance_type,
        )
    except ValueError as exc:
        raise InfraConfigError(
            f"no SageMaker Triton image for version {version!r}, region {region!r}, "
            f"instance {instance_type!r}: {exc}",
            where="infra.triton_version",
            fix="pick a version and region the SageMaker Triton images are published for "
            "(e.g. 24.09 in us-east-1)",
        ) from exc
    return uri


def has_instance_storage(spec: InstanceSpec) -> bool:
    """Local NVMe volumes: SageMaker refuses an endpoint config KmsKeyId for them (that
    storage is encrypted by the hardware)."""
    return spec.instance.local_nvme
