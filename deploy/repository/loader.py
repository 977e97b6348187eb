"""Reads a Triton model repository into `deploy.repository.model` data.

Every `config.pbtxt` is parsed with Triton's own schema (`model_config_pb2`
from tritonclient) through `google.protobuf.text_format`. A missing config is
inferred only where Triton itself can fill one in from the model file
(ONNX, TensorRT plan, TF SavedModel, a python `model.py`). A python model
whose `model.py` defines `auto_complete_config` gets the config that hook
completes, as on SageMaker (`deploy.repository.autocomplete`, run in a
separate process). Anything unreadable is recorded as a `LoadProblem` rather
than raised, so one bad model does not hide the others.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path
from typing import Any

from google.protobuf import text_format

from deploy.box import refused, skip_reason
from deploy.errors import RepositoryError
from deploy.repository.autocomplete import AUTO_COMPLETE_TIMEOUT_S, complete_config, defines_hook
from deploy.repository.backends import AUTOCOMPLETE_FILES, backend_of, v2_datatype
from deploy.repository.datatypes import onnx_triton_type
from deploy.repository.files import (
    check_name,
    model_entries,
    printable,
    skipped,
    special_file,
    unreadable,
)
from deploy.repository.model import (
    CONFIG_FILE,
    DEPENDENCIES_PARAMETER,
    EnsembleStep,
    LoadProblem,
    Model,
    ModelVersion,
    Repository,
    Tensor,
)
from deploy.repository.schema import model_config_pb2

PYTHON_MODEL_FILE = "model.py"


def parse_config(text: str) -> Any:
    """Parse config.pbtxt text into a `ModelConfig` (raises text_format.ParseError)."""
    config = model_config_pb2.ModelConfig()
    text_format.Parse(text, config)
    return config


def format_config(config: Any) -> str:
    """`config` as config.pbtxt text."""
    return str(text_format.MessageToString(config))


def load_repository(root: Path, *, timeout: float = AUTO_COMPLETE_TIMEOUT_S) -> Repository:
    """Read every model folder of `root` (folders starting with '.' are not models).

    `timeout` bounds each python model's `auto_complete_config`.
    """
    try:
        is_dir = root.is_dir()
    except OSError as exc:
        raise unreadable(root, exc) from None
    if not is_dir:
        raise RepositoryError(
            "not a directory",
            where=str(root),
            fix="pass the folder that holds one sub-folder per model",
        )
    models: dict[str, Model] = {}
    problems: list[LoadProblem] = []
    try:
        children = sorted(root.iterdir())
    except OSError as exc:
        raise unreadable(root, exc) from None
    for folder in children:
        if folder.name.startswith(".") or skipped(folder.name):
            continue
        try:
            if not folder.is_dir():
                continue
        except OSError as exc:
            problems.append(_problem(folder, unreadable(folder, exc)))
            continue
        loaded = load_model(folder, timeout=timeout)
        if isinstance(loaded, LoadProblem):
            problems.append(loaded)
        else:
            models[folder.name] = loaded
    return Repository(root=root, models=models, problems=tuple(problems))


def completed_config(folder: Path, *, timeout: float = AUTO_COMPLETE_TIMEOUT_S) -> Any:
    """The config Triton would load `folder` with: config.pbtxt, inferred or auto-completed.

    For packaging and serving a model that relies on auto-completion; raises
    `RepositoryError` (naming the file and the fix) when there is none.
    """
    loaded = load_model(folder, timeout=timeout)
    if isinstance(loaded, LoadProblem):
        raise RepositoryError(
            f"model {loaded.model!r}: {loaded.message}",
            where=str(loaded.file) + (f": {loaded.field}" if loaded.field else ""),
            fix=loaded.fix,
        )
    return loaded.config


def load_model(folder: Path, *, timeout: float = AUTO_COMPLETE_TIMEOUT_S) -> Model | LoadProblem:
    """Read one model folder; anything unreadable in it is a `LoadProblem` naming the path.

    `timeout` bounds a python model's `auto_complete_config`.
    """
    try:
        check_name(folder)
        model_entries(folder)  # refuses unreadable folders, non-UTF-8 names, special files
        return _load_model(folder, timeout)
    except RepositoryError as exc:
        return _problem(folder, exc)
    except OSError as exc:
        return _problem(folder, unreadable(folder, exc))


def _problem(folder: Path, exc: RepositoryError) -> LoadProblem:
    return LoadProblem(
        model=printable(folder.name),
        file=Path(exc.where or printable(folder)),
        field="",
        message=exc.message,
        fix=exc.fix or "",
    )


def _load_model(folder: Path, timeout: float) -> Model | LoadProblem:
    versions = _versions(folder)
    config_path = folder / CONFIG_FILE
    inferred_from = ""
    if config_path.is_file():
        try:
            config = parse_config(config_path.read_text(encoding="utf-8"))
        except (text_format.ParseError, UnicodeDecodeError) as exc:
            return LoadProblem(
                model=folder.name,
                file=config_path,
                field=_field_of(str(exc)),
                message=f"cannot parse: {exc}",
                fix="fix the syntax; fields and enums are those of Triton's model_config.proto",
            )
    else:
        inferred = _infer_config(folder.name, versions)
        if inferred is None:
            return LoadProblem(
                model=folder.name,
                file=config_path,
                field="",
                message="no config.pbtxt, and Triton cannot infer one for this model",
                fix="write config.pbtxt (name, backend or platform, inputs, outputs); Triton "
                "infers configs only for model.onnx, model.plan, model.savedmodel and a "
                "python model.py (whose auto_complete_config states its inputs and outputs)",
            )
        config, inferred_from = inferred
    hook = _auto_complete_hook(config, versions)
    if hook is not None and skip_reason() is not None:
        if not (config.input and config.output):
            error = refused(
                str(hook),
                f"model {folder.name}'s config (inputs and outputs)",
                fix="write config.pbtxt with its inputs and outputs",
            )
            return LoadProblem(
                model=folder.name,
                file=hook,
                field="TritonPythonModel.auto_complete_config",
                message=error.message,
                fix=error.fix or "",
            )
        print(
            f"not run: {hook} (auto_complete_config), skipped by {skip_reason()}; config.pbtxt "
            "is complete, but the hook went unchecked (SageMaker's Triton runs it at load)",
            file=sys.stderr,
            flush=True,
        )
        hook = None
    if hook is not None:
        try:
            config = complete_config(hook, config, timeout=timeout)
        except RepositoryError as exc:
            return LoadProblem(
                model=folder.name,
                file=hook,
                field="TritonPythonModel.auto_complete_config",
                message=exc.message,
                fix=exc.fix or "",
            )
    return _model(
        folder,
        config,
        config_path if not inferred_from else None,
        versions,
        auto_completed=hook is not None,
    )


def _auto_complete_hook(config: Any, versions: tuple[ModelVersion, ...]) -> Path | None:
    """The latest version's model.py when it defines `auto_complete_config`, else None."""
    top_level = frozenset(c.name for v in versions for c in v.path.iterdir())
    if backend_of(config.platform, config.backend, top_level) != "python" or config.runtime:
        return None
    filename = config.default_model_filename or PYTHON_MODEL_FILE
    for version in reversed(versions):
        script = version.path / filename
        if script.is_file():
            return script if defines_hook(script) else None
    return None


def _field_of(message: str) -> str:
    # text_format errors read '3:1 : Message type "inference.ModelConfig" has no field named "x".'
    marker = 'field named "'
    if marker in message:
        return message.split(marker, 1)[1].split('"', 1)[0]
    return ""


def _versions(folder: Path) -> tuple[ModelVersion, ...]:
    versions = []
    for child in folder.iterdir():
        if child.is_dir() and child.name.isdigit():
            files = tuple(
                path
                for path in model_entries(child)
                if (child / path).is_file() or (child / path).is_symlink()
            )
            versions.append(ModelVersion(number=int(child.name), path=child, files=files))
    return tuple(sorted(versions, key=lambda v: v.number))


def _infer_config(name: str, versions: tuple[ModelVersion, ...]) -> tuple[Any, str] | None:
    for version in versions:
        for filename, (platform, backend) in AUTOCOMPLETE_FILES.items():
            if (version.path / filename).exists():
                config = model_config_pb2.ModelConfig(name=name, platform=platform, backend=backend)
                if filename == "model.onnx":
                    _onnx_io(version.path / filename, config)
                return config, filename
    # Triton then fills in backend "python" from a model.py (core
    # `AutoCompleteBackendFields`); the python backend completes the rest.
    for version in versions:
        if (version.path / PYTHON_MODEL_FILE).is_file():
            return model_config_pb2.ModelConfig(name=name, backend="python"), PYTHON_MODEL_FILE
    return None


def _onnx_io(path: Path, config: Any) -> None:
    """Fill inputs/outputs from the ONNX graph when the `onnx` package is present.

    Raises RepositoryError naming the file when it is not a regular file (a
    link to a FIFO would block the read) or not a readable ONNX model.
    """
    try:
        import onnx
    except ImportError:  # Triton reads them at load time; nothing to describe offline
        return
    if not stat.S_ISREG(path.stat().st_mode):  # follows links; opens nothing
        raise special_file(path)
    where = printable(path)
    fix = "export the model again (torch.onnx.export or onnx.save); Triton cannot load it either"
    try:
        model = onnx.load(str(path), load_external_data=False)
    except OSError:
        raise
    except Exception as exc:  # protobuf and onnx raise several types for bad bytes
        raise RepositoryError(f"not a valid ONNX model ({exc})", where=where, fix=fix) from None
    if not model.HasField("graph"):
        raise RepositoryError("not a valid ONNX model (it has no graph)", where=where, fix=fix)
    graph = model.graph
    initializers = {init.name for init in graph.initializer}
    for values, target in ((graph.input, config.input), (graph.output, config.output)):
        for value in values:
            if value.name in initializers:
                continue
            tensor_type = value.type.tensor_type
            type_name = onnx.TensorProto.DataType.Name(tensor_type.elem_type)
            try:
                data_type = model_config_pb2.DataType.Value(onnx_triton_type(type_name))
            except ValueError:
                raise RepositoryError(
                    f"tensor {value.name!r} has ONNX type {type_name}, which Triton cannot "
                    "describe in a config",
                    where=where,
                    fix="write config.pbtxt yourself, or export the model with tensor inputs "
                    "and outputs of a Triton datatype",
                ) from None
            dims = [d.dim_value if d.dim_value > 0 else -1 for d in tensor_type.shape.dim]
            entry = target.add()
            entry.name = value.name
            entry.data_type = data_type
            entry.dims.extend(dims)


def _tensors(entries: Any) -> tuple[Tensor, ...]:
    result = []
    for entry in entries:
        type_name = model_config_pb2.DataType.Name(entry.data_type)
        datatype = "" if type_name == "TYPE_INVALID" else v2_datatype(type_name)
        result.append(
            Tensor(
                name=entry.name,
                datatype=datatype,
                shape=tuple(int(d) for d in entry.dims),
                label_filename=getattr(entry, "label_filename", ""),
                optional=bool(getattr(entry, "optional", False)),
            )
        )
    return tuple(result)


def _model(
    folder: Path,
    config: Any,
    config_path: Path | None,
    versions: tuple[ModelVersion, ...],
    *,
    auto_completed: bool = False,
) -> Model:
    top_level = frozenset(p.parts[0] for v in versions for p in v.files)
    top_level |= frozenset(c.name for v in versions for c in v.path.iterdir() if c.is_dir())
    backend = backend_of(config.platform, config.backend, top_level)
    steps = tuple(
        EnsembleStep(
            model_name=step.model_name,
            model_version=int(step.model_version),
            input_map=dict(step.input_map),
            output_map=dict(step.output_map),
        )
        for step in config.ensemble_scheduling.step
    )
    declared = config.parameters.get(DEPENDENCIES_PARAMETER)
    dependencies = (
        tuple(part.strip() for part in declared.string_value.split(",") if part.strip())
        if declared is not None
        else ()
    )
    python_files: tuple[Path, ...] = ()
    if backend == "python":
        filename = config.default_model_filename or "model.py"
        python_files = tuple(v.path / filename for v in versions if (v.path / filename).is_file())
    outputs = _tensors(config.output)
    return Model(
        name=folder.name,
        path=folder,
        config=config,
        config_path=config_path,
        platform=config.platform,
        backend=backend,
        max_batch_size=int(config.max_batch_size),
        inputs=_tensors(config.input),
        outputs=outputs,
        versions=versions,
        ensemble_steps=steps,
        dependencies=dependencies,
        label_files=tuple(sorted({t.label_filename for t in outputs if t.label_filename})),
        python_files=python_files,
        inferred_from="" if config_path is not None else _inferred_name(folder, versions),
        auto_completed=auto_completed,
    )


def _inferred_name(folder: Path, versions: tuple[ModelVersion, ...]) -> str:
    for version in versions:
        for filename in (*AUTOCOMPLETE_FILES, PYTHON_MODEL_FILE):
            if (version.path / filename).exists():
                return filename
    return ""
