"""Instance families a Triton multi-model endpoint can run on, and their image."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from deploy.errors import ConfigError
from deploy.instance_types import require_instance_type
from deploy_infra.errors import InfraConfigError

# Families AWS lists for multi-model endpoints with a GPU (one GPU per instance
# or several); everything else that is not an accelerator family is CPU.
GPU_FAMILIES = frozenset({"g4dn", "g5", "g6", "g6e", "p3", "p4d", "p5"})
# Accelerators SageMaker MMEs do not run on (aws-neuron/aws-neuron-sdk#154).
NEURON_FAMILIES = frozenset({"inf1", "inf2", "trn1", "trn2"})


@dataclass(frozen=True)
class InstanceSpec:
    instance_type: str
    family: str
    processor: Literal["gpu", "cpu"]

    @property
    def has_gpu(self) -> bool:
        return self.processor == "gpu"


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
    if family in NEURON_FAMILIES:
        raise InfraConfigError(
            f"{instance_type} cannot host a multi-model endpoint: SageMaker does not run "
            "multi-model endpoints on Inferentia/Trainium instances",
            where="instance_type",
            fix="use a GPU (ml.g5.xlarge) or CPU (ml.m5.xlarge) instance for a multi-model "
            "stage; for Inferentia use an ml.inf1.* stage (a single-model endpoint, see "
            "`deploy neuron`)",
        )
    return InstanceSpec(instance_type, family, "gpu" if family in GPU_FAMILIES else "cpu")


def triton_image_uri(*, region: str, version: str, instance_type: str) -> str:
    """The SageMaker Triton image for this region, version and processor (GPU or `-cpu` tag)."""
    instance_spec(instance_type)
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


# Families whose volumes are local NVMe instance storage: SageMaker refuses an
# endpoint config KmsKeyId for them (that storage is encrypted by the hardware).
_NVME_FAMILIES = frozenset({"g4dn", "g5", "g6", "g6e", "p3dn", "p4d", "p4de", "p5"})


def has_instance_storage(spec: InstanceSpec) -> bool:
    family = spec.family
    return family in _NVME_FAMILIES or (family[0] in "cmr" and family.endswith("d"))
