"""Reading a Triton model repository: configs via Triton's protobuf schema, files, versions.

from deploy.repository import load_repository
repo = load_repository(Path("model_packages/examples"))
repo.models["addsub"].inputs  # (Tensor(name="INPUT0", datatype="FP32", shape=(4,)), ...)

completed_config(folder)  # the ModelConfig Triton would load, auto_complete_config applied
format_config(config)     # as config.pbtxt text; config_json(config): Triton's JSON form
"""

from __future__ import annotations

from deploy.repository.autocomplete import config_json
from deploy.repository.loader import (
    completed_config,
    format_config,
    load_model,
    load_repository,
    parse_config,
)
from deploy.repository.model import (
    COMPLETED_CONFIG_HEADER,
    CONFIG_FILE,
    DEPENDENCIES_PARAMETER,
    EnsembleStep,
    LoadProblem,
    Model,
    ModelKind,
    ModelVersion,
    Repository,
    Tensor,
)

__all__ = [
    "COMPLETED_CONFIG_HEADER",
    "CONFIG_FILE",
    "DEPENDENCIES_PARAMETER",
    "EnsembleStep",
    "LoadProblem",
    "Model",
    "ModelKind",
    "ModelVersion",
    "Repository",
    "Tensor",
    "completed_config",
    "config_json",
    "format_config",
    "load_model",
    "load_repository",
    "parse_config",
]
