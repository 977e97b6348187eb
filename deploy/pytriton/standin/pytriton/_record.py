"""`deploy bind`'s recording process: run the script, write what it bound as JSON.

Started as `python -B -c BOOT STANDIN_ROOT REQUEST RESULT` with this stand-in
first on `sys.path`; REQUEST holds {"script": path, "argv": [...]}. RESULT gets
{"bindings": [...], "calls": [...]} or {"error": {...}}. Only descriptions
leave this process: dtypes as numpy type strings, values that are not what
PyTriton takes as their repr, so the caller can name the model and field.
"""

from __future__ import annotations

import enum
import json
import sys
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from ._script import run_script
from .model_config.common import DynamicBatcher, QueuePolicy
from .model_config.tensor import Tensor
from .triton import Binding

_BYTES_TYPES = (object, np.object_, bytes, np.bytes_)


def describe_dtype(dtype: Any) -> dict[str, Any]:
    if dtype is None:
        return {"missing": True}
    if isinstance(dtype, np.dtype):
        dtype = dtype.type
    if any(dtype is t for t in _BYTES_TYPES):
        return {"bytes": True, "repr": repr(dtype)}
    try:
        resolved = np.dtype(dtype)
    except (TypeError, ValueError):
        return {"invalid": repr(dtype)}
    if resolved.kind == "S":
        return {"bytes": True, "repr": repr(dtype)}
    return {"numpy": resolved.kind + str(resolved.itemsize), "repr": repr(dtype)}


def _plain(value: Any) -> Any:
    """JSON-able form of config values: ints and bools as such, anything else as repr."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, np.integer):
        return int(value)
    return {"invalid": repr(value)}


def describe_tensor(tensor: Any) -> dict[str, Any]:
    if not isinstance(tensor, Tensor):
        return {"invalid": repr(tensor)}
    shape = tensor.shape
    return {
        "name": tensor.name
        if isinstance(tensor.name, str) or tensor.name is None
        else repr(tensor.name),
        "dtype": describe_dtype(tensor.dtype),
        "shape": _plain(list(shape))
        if isinstance(shape, (list, tuple))
        else {"invalid": repr(shape)},
        "optional": bool(tensor.optional),
    }


def describe_policy(policy: Any) -> Any:
    if policy is None:
        return None
    if not isinstance(policy, QueuePolicy):
        return {"invalid": repr(policy)}
    return {
        "timeout_action": _plain(policy.timeout_action),
        "default_timeout_microseconds": _plain(policy.default_timeout_microseconds),
        "allow_timeout_override": _plain(policy.allow_timeout_override),
        "max_queue_size": _plain(policy.max_queue_size),
    }


def describe_batcher(batcher: Any) -> Any:
    if batcher is None:
        return None
    if not isinstance(batcher, DynamicBatcher):
        return {"invalid": repr(batcher)}
    priority = batcher.priority_queue_policy
    return {
        "max_queue_delay_microseconds": _plain(batcher.max_queue_delay_microseconds),
        "preferred_batch_size": _plain(batcher.preferred_batch_size),
        "preserve_ordering": _plain(batcher.preserve_ordering),
        "priority_levels": _plain(batcher.priority_levels),
        "default_priority_level": _plain(batcher.default_priority_level),
        "default_queue_policy": describe_policy(batcher.default_queue_policy),
        "priority_queue_policy": (
            None
            if priority is None
            else {str(_plain(k)): describe_policy(v) for k, v in dict(priority).items()}
        ),
    }


def describe_binding(binding: Binding) -> dict[str, Any]:
    config = binding.config
    return {
        "model_name": _plain(binding.model_name),
        "model_version": _plain(binding.model_version),
        "inputs": [describe_tensor(t) for t in binding.inputs],
        "outputs": [describe_tensor(t) for t in binding.outputs],
        "config": {
            "batching": _plain(config.batching),
            "max_batch_size": _plain(config.max_batch_size),
            "batcher": describe_batcher(config.batcher),
            "response_cache": _plain(config.response_cache),
            "decoupled": _plain(config.decoupled),
            "model_warmup": bool(config.model_warmup),
        },
        "instances": len(binding.infer_funcs),
        "not_callable": [repr(f) for f in binding.infer_funcs if not callable(f)],
        "strict": bool(binding.strict),
        "file": binding.file,
        "line": binding.line,
    }


def _where(exc: BaseException, script: Path) -> tuple[str, int]:
    """The innermost frame of the script's own folder, else of the script."""
    folder = str(script.parent) + "/"
    standin = str(Path(__file__).resolve().parent) + "/"
    found = ("", 0)
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename.startswith(folder) and not frame.filename.startswith(standin):
            found = (frame.filename, frame.lineno or 0)
    if isinstance(exc, SyntaxError) and exc.filename:
        found = (exc.filename, exc.lineno or 0)
    return found


def main(request_path: str, result_path: str) -> None:
    request = json.loads(Path(request_path).read_text(encoding="utf-8"))
    script = Path(request["script"]).resolve()
    try:
        recording = run_script(script, list(request.get("argv", [])))
        result: dict[str, Any] = {
            "bindings": [describe_binding(b) for b in recording.bindings],
            "calls": [
                {"method": c.method, "file": c.file, "line": c.line} for c in recording.calls
            ],
        }
    except BaseException as exc:  # the script's own failure, reported to the caller
        file, line = _where(exc, script)
        result = {
            "error": {
                "type": type(exc).__name__,
                "message": str(exc),
                "file": file,
                "line": line,
                "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
            }
        }
    Path(result_path).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
