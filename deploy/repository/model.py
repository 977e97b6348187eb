"""Plain data describing a Triton model repository (no I/O here).

`Repository.models` maps a model's folder name to its `Model`; configs that
could not be read are kept as `LoadProblem`s so `deploy validate` can report
them all at once instead of stopping at the first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

ModelKind = Literal["model", "ensemble", "bls"]
DEPENDENCIES_PARAMETER = "deploy.dependencies"
CONFIG_FILE = "config.pbtxt"
# First line of a config.pbtxt that `deploy package` wrote from auto_complete_config's result.
COMPLETED_CONFIG_HEADER = (
    "# Completed by TritonPythonModel.auto_complete_config (written by deploy package)"
)


@dataclass(frozen=True)
class Tensor:
    """An input or output as declared: v2 datatype name, dims without the batch dim."""

    name: str
    datatype: str  # FP32, BYTES, ... ("" when data_type is missing)
    shape: tuple[int, ...]
    label_filename: str = ""
    optional: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}


@dataclass(frozen=True)
class EnsembleStep:
    model_name: str
    model_version: int
    input_map: dict[str, str]  # composing model's input -> ensemble tensor
    output_map: dict[str, str]  # composing model's output -> ensemble tensor


@dataclass(frozen=True)
class ModelVersion:
    number: int
    path: Path
    files: tuple[Path, ...]  # relative to the version folder, sorted


@dataclass(frozen=True)
class Model:
    """One model folder of the repository, its parsed config and its files."""

    name: str  # the folder name, which is what Triton serves
    path: Path
    config: Any  # tritonclient.grpc.model_config_pb2.ModelConfig
    config_path: Path | None  # None when the config is inferred from the model file
    platform: str
    backend: str  # the backend that serves it (derived from platform if unset)
    max_batch_size: int
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    versions: tuple[ModelVersion, ...]
    ensemble_steps: tuple[EnsembleStep, ...] = ()
    dependencies: tuple[str, ...] = ()  # BLS calls declared in deploy.dependencies
    label_files: tuple[str, ...] = ()
    python_files: tuple[Path, ...] = ()  # model.py of python-backend versions
    inferred_from: str = ""  # the model file a missing config was inferred from
    auto_completed: bool = False  # config completed by model.py's auto_complete_config

    @property
    def kind(self) -> ModelKind:
        if self.platform == "ensemble":
            return "ensemble"
        if self.dependencies:
            return "bls"
        return "model"

    @property
    def config_name(self) -> str:
        return str(self.config.name)

    @property
    def config_source(self) -> str:
        """Where the config comes from, in words (for `deploy validate --show-config`)."""
        hook = "auto_complete_config in model.py"
        if self.config_path is not None:
            return (
                f"{self.config_path.name} completed by {hook}"
                if self.auto_completed
                else (self.config_path.name)
            )
        if self.auto_completed:
            return hook
        return f"inferred by Triton from {self.inferred_from}"


@dataclass(frozen=True)
class LoadProblem:
    """A model folder whose config could not be read or inferred."""

    model: str
    file: Path
    field: str
    message: str
    fix: str


@dataclass(frozen=True)
class Repository:
    root: Path
    models: dict[str, Model] = field(default_factory=dict)
    problems: tuple[LoadProblem, ...] = ()

    def model(self, name: str) -> Model | None:
        return self.models.get(name)

    def closure(self, name: str) -> list[str]:
        """`name` plus every model it needs (ensemble steps, BLS dependencies), sorted."""
        seen: set[str] = set()
        pending = [name]
        while pending:
            current = pending.pop()
            if current in seen:
                continue
            seen.add(current)
            model = self.models.get(current)
            if model is None:
                continue
            pending.extend(step.model_name for step in model.ensemble_steps)
            pending.extend(model.dependencies)
        return sorted(seen)
