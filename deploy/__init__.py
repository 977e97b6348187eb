"""deploy: take an NVIDIA Triton model repository to production on Amazon SageMaker."""

from importlib.metadata import PackageNotFoundError, version

try:
    # One source: the distribution's metadata (pyproject.toml's version).
    __version__ = version("triton-sagemaker-deploy")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
