"""What the SageMaker Triton image's Python can import without an execution environment.

Source: triton-inference-server/server `build.py` (branches r24.09 to r25.x),
the Dockerfile section "python3, python3-pip and some pip installs required
for the python backend": `pip`, `wheel`, `setuptools`, `numpy<2` and
`virtualenv` on the system Python, plus the python backend's own
`triton_python_backend_utils` (and its compiled `c_python_backend_utils`).
The SageMaker images (`sagemaker-tritonserver`) are that build with the
SageMaker endpoint enabled (`build.py --endpoint=sagemaker` adds
`docker/sagemaker/serve` and the SageMaker labels, no Python packages).
Anything else a python model imports (torch,
transformers, scikit-learn, ...) must come with the model, in a conda-pack
archive named by the `EXECUTION_ENV_PATH` parameter.
"""

from __future__ import annotations

import sys

# Top-level module names the pip packages above provide.
IMAGE_PACKAGES: frozenset[str] = frozenset(
    {
        "numpy",
        "pip",
        "setuptools",
        "pkg_resources",
        "_distutils_hack",
        "wheel",
        "virtualenv",
        "triton_python_backend_utils",
        "c_python_backend_utils",
    }
)

# Import names whose pip package is named differently.
PIP_NAMES: dict[str, str] = {
    "sklearn": "scikit-learn",
    "cv2": "opencv-python",
    "PIL": "pillow",
    "yaml": "pyyaml",
    "skimage": "scikit-image",
    "google": "protobuf",
    "bs4": "beautifulsoup4",
    "dateutil": "python-dateutil",
    "Crypto": "pycryptodome",
}


def image_has(module: str) -> bool:
    """True when `module` (a top-level name) imports in the image's Python as shipped."""
    return module in IMAGE_PACKAGES or module in sys.stdlib_module_names


def pip_name(module: str) -> str:
    return PIP_NAMES.get(module, module)
