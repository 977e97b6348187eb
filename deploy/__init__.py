"""deploy: take an NVIDIA Triton model repository to production on Amazon SageMaker."""

__version__ = "0.1.0"
