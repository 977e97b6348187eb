"""A model's `config.pbtxt` from its model file (`deploy init-config MODEL_DIR`).

The latest version folder's model file decides how:

- `model.onnx`: names, datatypes and dims from the graph (onnx package).
  When the first dimension of every input and output is symbolic it is the
  batch dimension: `max_batch_size` (default 4, Triton's onnxruntime default)
  with `dynamic_batching`, dims without it.
- `model.pt` (TorchScript keeps no shapes): the module runs once on a sample
  (`--sample-input FILE.npz`, one array per input in forward() order, the
  batch dimension first); inputs are named after forward()'s arguments when
  the file's names are exactly those, else `INPUT__<i>`; outputs `OUTPUT__<i>`.
  Batching (default 4, at least the sample's batch) when every sample input
  and output shares its first dimension; `--max-batch-size 0` keeps full
  shapes. The run happens in the box (`deploy.box`): a TorchScript file
  carries code.
- `model.py`: its `auto_complete_config`, run as the python backend runs it
  (`deploy.repository.autocomplete`, a separate process).

`write_config` writes the result atomically, refuses to replace a config
unless forced, runs the caller's check on it and puts the previous state
back when the check finds errors.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy import box
from deploy._files import with_umask
from deploy.box.copies import fresh_copy
from deploy.errors import RepositoryError
from deploy.repository.autocomplete import complete_config, defines_hook
from deploy.repository.backends import AUTOCOMPLETE_FILES
from deploy.repository.datatypes import onnx_triton_type, triton_type
from deploy.repository.loader import format_config
from deploy.repository.model import CONFIG_FILE
from deploy.repository.schema import model_config_pb2

DEFAULT_MAX_BATCH_SIZE = 4  # Triton's onnxruntime backend `default-max-batch-size`
_FILES = ("model.onnx", "model.pt", "model.py")
_KINDS = {"model.onnx": "onnx", "model.pt": "torchscript", "model.py": "python"}
# Loading a TorchScript file runs the code saved in it: that happens in the box.
_TORCHSCRIPT_STUB = Path(__file__).resolve().parent / "sandbox" / "torchscript_stub.py"
TORCHSCRIPT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class InferredConfig:
    model_dir: Path
    kind: str  # onnx | torchscript | python
    source: Path  # the model file it was inferred from
    config: Any  # model_config_pb2.ModelConfig

    @property
    def text(self) -> str:
        return format_config(self.config)


def infer_config(
    model_dir: Path, *, sample_input: Path | None = None, max_batch_size: int | None = None
) -> InferredConfig:
    """The config for `model_dir` from its latest version's model file."""
    if not model_dir.is_dir():
        raise RepositoryError(
            "not a folder", where=str(model_dir), fix="pass a model folder (MODEL_DIR/1/model.onnx)"
        )
    if max_batch_size is not None and max_batch_size < 0:
        raise RepositoryError(
            f"--max-batch-size {max_batch_size} is negative",
            where=str(model_dir),
            fix="pass 0 (no batching) or a positive size",
        )
    source = _model_file(model_dir)
    kind = _KINDS[source.name]
    if sample_input is not None and kind != "torchscript":
        raise RepositoryError(
            f"--sample-input is for TorchScript models; {source.name} states its tensors",
            where=str(sample_input),
            fix="leave out --sample-input",
        )
    if kind == "onnx":
        config = _onnx_config(model_dir.name, source, max_batch_size)
    elif kind == "torchscript":
        if sample_input is None:
            raise RepositoryError(
                "a TorchScript file keeps no input shapes or datatypes",
                where=str(source),
                fix="pass --sample-input FILE.npz with one array per forward() argument, in "
                "order, batch dimension first (np.savez('sample.npz', INPUT__0=x))",
            )
        config = _torchscript_config(model_dir.name, source, sample_input, max_batch_size)
    else:
        config = _python_config(model_dir.name, source, max_batch_size)
    return InferredConfig(model_dir, kind, source, config)


def write_config(
    inferred: InferredConfig,
    *,
    force: bool = False,
    check: Callable[[Path], Sequence[str]] | None = None,
) -> Path:
    """Write `MODEL_DIR/config.pbtxt`; `check(model_dir)` lists errors that undo it."""
    path = inferred.model_dir / CONFIG_FILE
    previous = path.read_bytes() if path.is_file() else None
    if previous is not None and not force:
        raise RepositoryError(
            "config.pbtxt exists; nothing was written",
            where=str(path),
            fix="pass --force to replace it",
        )
    _atomic_write(path, inferred.text.encode())
    errors = list(check(inferred.model_dir)) if check is not None else []
    if errors:
        if previous is None:
            path.unlink()
        else:
            _atomic_write(path, previous)
        raise RepositoryError(
            "the generated config does not validate; it was not kept:\n  " + "\n  ".join(errors),
            where=str(path),
            fix="write config.pbtxt by hand from the printed problems",
        )
    return path


def _atomic_write(path: Path, data: bytes) -> None:
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        with_umask(Path(name)).replace(path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def _model_file(model_dir: Path) -> Path:
    versions = sorted(
        (int(child.name), child)
        for child in model_dir.iterdir()
        if child.is_dir() and child.name.isdigit()
    )
    for _, version in reversed(versions):
        for name in _FILES:
            if (version / name).is_file():
                return version / name
    raise RepositoryError(
        "no version folder holds model.onnx, model.pt or model.py",
        where=str(model_dir),
        fix="put the model file in a version folder (MODEL_DIR/1/model.onnx); other model "
        "formats need a hand-written config.pbtxt",
    )


def _tensor(target: Any, name: str, data_type: str, dims: Sequence[int]) -> None:
    entry = target.add()
    entry.name = name
    entry.data_type = model_config_pb2.DataType.Value(data_type)
    entry.dims.extend(dims)


def _onnx_config(name: str, source: Path, max_batch_size: int | None) -> Any:
    try:
        import onnx
    except ImportError:
        raise RepositoryError(
            "reading an ONNX graph needs the onnx package",
            where=str(source),
            fix="pip install onnx",
        ) from None
    try:
        model = onnx.load(str(source), load_external_data=False)
    except Exception as exc:  # protobuf and onnx raise several types for bad bytes
        raise RepositoryError(
            f"not a valid ONNX model ({exc})",
            where=str(source),
            fix="export the model again (torch.onnx.export or onnx.save)",
        ) from None
    graph = model.graph
    initializers = {init.name for init in graph.initializer}
    tensors: list[tuple[str, str, str, list[int]]] = []  # (field, name, type, dims)
    fixed_first: list[str] = []
    for field, values in (("input", graph.input), ("output", graph.output)):
        for value in values:
            if value.name in initializers:
                continue
            tensor_type = value.type.tensor_type
            type_name = onnx.TensorProto.DataType.Name(tensor_type.elem_type)
            data_type = onnx_triton_type(type_name)
            if data_type not in model_config_pb2.DataType.DESCRIPTOR.values_by_name:
                raise RepositoryError(
                    f"{field} {value.name!r} has ONNX type {type_name}, which Triton cannot "
                    "describe in a config",
                    where=str(source),
                    fix="export the model with tensors of a Triton datatype",
                )
            dims = [d.dim_value if d.dim_value > 0 else -1 for d in tensor_type.shape.dim]
            if not dims or dims[0] != -1:
                fixed_first.append(value.name)
            tensors.append((field, value.name, data_type, dims))
    batchable = not fixed_first
    if max_batch_size is None:
        max_batch_size = DEFAULT_MAX_BATCH_SIZE if batchable else 0
    elif max_batch_size > 0 and not batchable:
        raise RepositoryError(
            f"--max-batch-size {max_batch_size}, but the first dimension of "
            f"{', '.join(fixed_first)} is fixed in the graph, so it is no batch dimension",
            where=str(source),
            fix="pass --max-batch-size 0, or export the model with a dynamic first axis "
            "(torch.onnx.export(..., dynamic_axes={name: {0: 'batch'}}))",
        )
    platform, backend = AUTOCOMPLETE_FILES["model.onnx"]
    config = model_config_pb2.ModelConfig(
        name=name, platform=platform, max_batch_size=max_batch_size
    )
    for field, tensor_name, data_type, dims in tensors:
        target = config.input if field == "input" else config.output
        _tensor(target, tensor_name, data_type, dims[1:] if max_batch_size else dims)
    if max_batch_size:
        config.dynamic_batching.SetInParent()
    del backend
    return config


def _torchscript_config(
    name: str, source: Path, sample_input: Path, max_batch_size: int | None
) -> Any:
    import numpy as np

    try:
        with np.load(sample_input, allow_pickle=False) as loaded:
            arrays = [(key, loaded[key]) for key in loaded.files]
    except (OSError, ValueError) as exc:
        raise RepositoryError(
            f"cannot read the sample input ({exc})",
            where=str(sample_input),
            fix="write it with np.savez('sample.npz', INPUT__0=array, ...)",
        ) from None
    if not arrays:
        raise RepositoryError(
            "the sample input holds no arrays", where=str(sample_input), fix="save one per input"
        )
    ran = _run_boxed(source, sample_input)
    step = ran.get("error")
    if step == "torch":
        raise RepositoryError(
            "running a TorchScript model needs torch", where=str(source), fix="pip install torch"
        )
    if step == "load":
        raise RepositoryError(
            f"not a TorchScript model ({ran.get('message')})",
            where=str(source),
            fix="save it with torch.jit.save(torch.jit.script(model) or torch.jit.trace(...))",
        )
    if step == "run":
        raise RepositoryError(
            f"the model failed on the sample input: {ran.get('message')}",
            where=f"{source} with {sample_input}",
            fix="pass arrays of the shapes and dtypes forward() takes, in its argument order",
        )
    if step == "result":
        raise RepositoryError(
            f"forward() returned {ran.get('message')}, not a tensor or a tuple of tensors",
            where=str(source),
            fix="write config.pbtxt by hand (the PyTorch backend needs tensor outputs)",
        )
    arguments = [str(a) for a in ran["arguments"]]
    keys = [key for key, _ in arrays]
    by_name = sorted(keys) == sorted(arguments)
    if by_name:
        ordered = [(key, dict(arrays)[key]) for key in arguments]
    else:
        ordered = [(f"INPUT__{i}", array) for i, (_, array) in enumerate(arrays)]
    inputs: list[tuple[str, str, list[int]]] = []
    for key, array in ordered:
        data_type = triton_type(array.dtype)
        if data_type is None or data_type == "TYPE_STRING":
            raise RepositoryError(
                f"sample input {key!r} has dtype {array.dtype}, which the PyTorch backend "
                "cannot take",
                where=str(sample_input),
                fix="save numeric or bool arrays",
            )
        inputs.append((key, data_type, list(array.shape)))
    outs: list[tuple[str, str, list[int]]] = []
    for i, output in enumerate(ran["outputs"]):
        dtype = str(output["dtype"])
        data_type = "TYPE_BF16" if dtype == "bfloat16" else triton_type(np.dtype(dtype))
        if data_type is None:
            raise RepositoryError(
                f"output {i} has dtype {dtype}, which Triton has not",
                where=str(source),
                fix="return tensors of a Triton datatype",
            )
        outs.append((f"OUTPUT__{i}", data_type, [int(d) for d in output["shape"]]))
    firsts = {shape[0] if shape else None for _, _, shape in inputs + outs}
    batch = next(iter(firsts)) if len(firsts) == 1 else None
    if max_batch_size is None:
        max_batch_size = max(DEFAULT_MAX_BATCH_SIZE, batch) if batch else 0
    elif max_batch_size > 0 and not batch:
        raise RepositoryError(
            f"--max-batch-size {max_batch_size}, but the sample's inputs and outputs do not "
            "share a first dimension",
            where=f"{source} with {sample_input}",
            fix="pass --max-batch-size 0, or a sample whose arrays all start with the batch",
        )
    elif max_batch_size > 0 and batch is not None and batch > max_batch_size:
        raise RepositoryError(
            f"the sample's batch of {batch} is above --max-batch-size {max_batch_size}",
            where=str(sample_input),
            fix="pass a smaller sample or a larger --max-batch-size",
        )
    platform = "pytorch_libtorch"
    config = model_config_pb2.ModelConfig(
        name=name, platform=platform, max_batch_size=max_batch_size
    )
    for target, entries in ((config.input, inputs), (config.output, outs)):
        for tensor_name, data_type, shape in entries:
            _tensor(target, tensor_name, data_type, shape[1:] if max_batch_size else shape)
    if max_batch_size:
        config.dynamic_batching.SetInParent()
    return config


def _run_boxed(source: Path, sample_input: Path) -> dict[str, Any]:
    """What the TorchScript model does on the sample, from `_TORCHSCRIPT_STUB` in the box."""
    if box.skip_reason() is not None:
        raise box.refused(
            str(source), "inferring a TorchScript model's config", fix="write config.pbtxt by hand"
        )
    box.announce(source, "init-config runs it on the sample input")
    with box.scratch(prefix="deploy-torchscript-") as scratch:
        copy = scratch.work / "model" / source.parent.name
        linked = fresh_copy(source.parent, copy)
        sample = scratch.work / "sample.npz"
        shutil.copyfile(sample_input, sample)
        result = scratch.work / "result.json"
        stderr_path = scratch.work / "stderr.txt"
        with stderr_path.open("wb") as stderr:
            outcome = box.run(
                [
                    sys.executable,
                    "-E",
                    "-s",
                    "-B",
                    str(_TORCHSCRIPT_STUB),
                    str(copy / source.name),
                    str(sample),
                    str(result),
                ],
                box=scratch,
                writable=[copy],
                readable=[_TORCHSCRIPT_STUB.parent, *linked],
                limits=_torchscript_limits(),
                timeout=TORCHSCRIPT_TIMEOUT_S,
                stderr=stderr,
            )
        try:
            document = json.loads(result.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            document = None
        tail = stderr_path.read_text(encoding="utf-8", errors="replace").strip()[-2000:]
    if outcome.timed_out:
        raise RepositoryError(
            f"running the model on the sample took over {TORCHSCRIPT_TIMEOUT_S:g} s",
            where=str(source),
            fix="pass a smaller sample, or write config.pbtxt by hand",
        )
    if not isinstance(document, dict):
        raise RepositoryError(
            f"running the model on the sample stopped with status {outcome.returncode}"
            + (f"; its last output: {tail}" if tail else ""),
            where=str(source),
            fix="load it with torch.jit.load to see why, or write config.pbtxt by hand",
        )
    return document


def _torchscript_limits() -> box.Limits:
    """20 CPU-minutes, this machine's memory, 1 GiB files."""
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return box.Limits(cpu_s=1200, data_bytes=memory, file_bytes=1 << 30, open_files=1024)


def _python_config(name: str, source: Path, max_batch_size: int | None) -> Any:
    if not defines_hook(source):
        raise RepositoryError(
            "model.py defines no auto_complete_config, so nothing states its tensors",
            where=str(source),
            fix="write config.pbtxt (inputs, outputs), or add TritonPythonModel."
            "auto_complete_config (auto_complete_model_config.add_input(...))",
        )
    start = model_config_pb2.ModelConfig(name=name, backend="python")
    if max_batch_size is not None:
        start.max_batch_size = max_batch_size
    config = complete_config(source, start)
    if not config.input or not config.output:
        raise RepositoryError(
            "auto_complete_config states no inputs or no outputs",
            where=str(source),
            fix="add them in auto_complete_config, or write config.pbtxt",
        )
    return config
