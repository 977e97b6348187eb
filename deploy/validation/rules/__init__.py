"""Built-in rules; importing this package registers them (see `deploy.validation.registry`).

They re-implement offline what Triton checks when it loads a model
(triton-inference-server/core `model_config_utils.cc`, `ensemble_utils.cc`),
plus what SageMaker multi-model hosting adds. An error is something Triton,
as SageMaker runs it, refuses to load, or loads and then refuses every
request (its request-time checks, `infer_request.cc`); whatever it accepts
but serves badly is a warning with a fix.
"""

from __future__ import annotations

from . import (
    bundles,
    config,
    ensemble,
    files,
    golden,
    image,
    names,
    neuron,
    python_models,
    scheduling,
    torchscript,
)

__all__ = [
    "bundles",
    "config",
    "ensemble",
    "files",
    "golden",
    "image",
    "names",
    "neuron",
    "python_models",
    "scheduling",
    "torchscript",
]
