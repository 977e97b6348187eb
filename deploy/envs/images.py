"""Which Python and glibc each SageMaker Triton image tag runs, in one place.

Source: triton-inference-server/server `build.py`, the `base_image` of each
release branch (`r23.05`..`r24.10`: `ubuntu:22.04`; `r24.11` and later:
`ubuntu:24.04`; read 2026-11). The SageMaker images (`sagemaker-tritonserver:
<tag>-py3`, and `-cpu`) are that build with the SageMaker endpoint added; the
python backend's stub runs the Ubuntu release's system `python3`: Ubuntu
22.04 ships Python 3.10 and glibc 2.35, Ubuntu 24.04 Python 3.12 and glibc
2.39. Only the image itself can confirm the exact patch release of each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from deploy.errors import ConfigError


@dataclass(frozen=True)
class ImagePython:
    ubuntu: str
    python: str  # major.minor of the stub's interpreter
    glibc: tuple[int, int]  # newest manylinux_<major>_<minor> its wheels may need


_UBUNTU_2204 = ImagePython("22.04", "3.10", (2, 35))
_UBUNTU_2404 = ImagePython("24.04", "3.12", (2, 39))
_FIRST_2204 = (23, 5)
_FIRST_2404 = (24, 11)
DEFAULT_TRITON_VERSION = "24.09"  # the stage setting's default (deploy.config)
_TAG = re.compile(r"^(\d{2})\.(\d{2})(?:-.*)?$")


def image_python(triton_version: str) -> ImagePython:
    """The Python of the SageMaker Triton image `triton_version` (e.g. "24.09")."""
    match = _TAG.match(triton_version.strip())
    if not match:
        raise ConfigError(
            f"{triton_version!r} is not a SageMaker Triton image version",
            where="infra.triton_version",
            fix="use the image's YY.MM tag, e.g. 24.09",
        )
    release = (int(match.group(1)), int(match.group(2)))
    if release < _FIRST_2204:
        raise ConfigError(
            f"image {triton_version} predates the releases deploy knows the Python of "
            "(23.05 and later)",
            where="infra.triton_version",
            fix="use 23.05 or a later image, or pass --python X.Y",
        )
    return _UBUNTU_2404 if release >= _FIRST_2404 else _UBUNTU_2204
