"""A python model's `auto_complete_config`, run the way Triton's python backend runs it.

SageMaker starts Triton with config auto-completion on, so a python model
whose `model.py` defines `TritonPythonModel.auto_complete_config` may ship
no `config.pbtxt`, or a partial one: Triton calls the hook with the config it
has and takes `max_batch_size`, `input`, `output`, the scheduler (if none is
set) and `model_transaction_policy` from what it returns
(triton-inference-server/core `TritonModel::UpdateModelConfig`).

The hook is the model's own code, so it runs in the box (`deploy.box`), in a
separate Python process (`sandbox/autocomplete_stub.py`, with a stand-in for
`triton_python_backend_utils`), from a fresh copy of the model folder, bounded
by a timeout. Nothing here imports the model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor

from deploy import box
from deploy.box.copies import fresh_copy
from deploy.errors import RepositoryError
from deploy.repository.schema import model_config_pb2

AUTO_COMPLETE_TIMEOUT_S = 30.0
HOOK = "auto_complete_config"
_STUB = Path(__file__).resolve().parent / "sandbox" / "autocomplete_stub.py"
_OUTPUT_TAIL = 2000  # characters of the model's stderr quoted in an error
# What the hook may use: a minute of CPU, 4 GiB of data (torch imports fit), 256 MiB files.
LIMITS = box.Limits(cpu_s=60, data_bytes=4 << 30, file_bytes=256 << 20, open_files=1024)

# Field types protobuf's JSON form writes as strings; Triton's JSON form
# (core `ModelConfigToJson`) writes them as numbers.
_INT64_TYPES = frozenset(
    {
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED64,
    }
)


def defines_hook(model_py: Path) -> bool:
    """True when `model_py` mentions `auto_complete_config` (defined or inherited)."""
    try:
        return HOOK in model_py.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def config_json(config: Any) -> dict[str, Any]:
    """`config` in Triton's JSON form: every field present, 64-bit integers as numbers."""
    document: dict[str, Any] = json_format.MessageToDict(
        config, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    _numbers(config.DESCRIPTOR, document)
    return document


def _numbers(descriptor: Any, document: dict[str, Any]) -> None:
    for field in descriptor.fields:
        if field.name not in document:
            continue
        value = document[field.name]
        message = field.message_type
        if message is not None and message.GetOptions().map_entry:
            inner = message.fields_by_name["value"]
            for key, item in value.items():
                if inner.message_type is not None:
                    _numbers(inner.message_type, item)
                elif inner.type in _INT64_TYPES:
                    value[key] = int(item)
        elif message is not None:
            for item in value if isinstance(value, list) else [value]:
                _numbers(message, item)
        elif field.type in _INT64_TYPES:
            document[field.name] = (
                [int(v) for v in value] if isinstance(value, list) else int(value)
            )


def complete_config(
    model_py: Path, config: Any, *, timeout: float = AUTO_COMPLETE_TIMEOUT_S
) -> Any:
    """`config` (a `ModelConfig`) as `model_py`'s `auto_complete_config` completes it.

    `model_py` is `<model>/<version>/model.py`. Raises `RepositoryError`
    naming the model when the hook raises, returns something else than the
    config object, returns a config Triton cannot read, or runs past `timeout`.
    """
    model = model_py.parent.parent.name
    where = f"model {model} ({model_py})"
    if box.skip_reason() is not None:
        raise box.refused(
            str(model_py),
            f"model {model}'s {HOOK}",
            fix="write config.pbtxt with the inputs and outputs",
        )
    box.announce(model_py, HOOK)
    with box.scratch(prefix="deploy-autocomplete-") as scratch:
        work = scratch.work
        # The hook runs from a fresh copy of the model folder: its only writable place.
        copy = work / "model" / model
        linked = fresh_copy(model_py.parent.parent, copy)
        copied_py = copy / model_py.parent.name / model_py.name
        request, result = work / "config.json", work / "result.json"
        # What the hook sees: the config with the fields Triton fills in first.
        seen = model_config_pb2.ModelConfig()
        seen.CopyFrom(config)
        seen.name = seen.name or model
        seen.backend = seen.backend or "python"
        request.write_text(json.dumps(config_json(seen)), encoding="utf-8")
        stderr_path = work / "stderr.txt"
        with stderr_path.open("wb") as stderr:
            outcome_of_run = box.run(
                [
                    sys.executable,
                    "-E",  # no PYTHON* variables
                    "-s",  # no user site-packages
                    "-B",  # no __pycache__ written into the model folder
                    str(_STUB),
                    str(copied_py),
                    model_py.parent.name,
                    str(request),
                    str(result),
                ],
                box=scratch,
                writable=[copy],
                readable=[_STUB.parent, *linked],
                limits=LIMITS,
                timeout=timeout,
                stderr=stderr,
            )
        if outcome_of_run.timed_out:
            raise RepositoryError(
                f"{HOOK} did not return within {timeout:g} s",
                where=where,
                fix=f"make {HOOK} return promptly (no network, no model loading), "
                "or write config.pbtxt with the inputs and outputs",
            )
        outcome = _read_result(result)
        error_output = stderr_path.read_text(encoding="utf-8", errors="replace")
    absent = list(outcome.get("absent", []))
    if "error" in outcome or "config" not in outcome:
        crash = _crash_message(outcome_of_run.returncode, error_output)
        message = str(outcome.get("error") or crash)
        at = f" at {outcome['where']}" if outcome.get("where") else ""
        missing = (
            f" ({model_py.name} imports {', '.join(absent)}, not installed where deploy runs; "
            "they were replaced by stand-ins)"
            if absent
            else ""
        )
        raise RepositoryError(
            f"{HOOK} failed{at}: {message}{missing}",
            where=where,
            fix=(f"install {', '.join(absent)} here, or " if absent else "")
            + f"fix {HOOK}; Triton runs it when it loads the model and refuses the model "
            "when it fails",
        )
    return _merge(config, outcome["config"], where)


def _read_result(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


def _crash_message(returncode: int | None, stderr: str) -> str:
    if returncode is not None and returncode < 0:
        reason = f"the process was killed by signal {-returncode}"
    else:
        reason = f"the process exited with status {returncode} before reporting"
    tail = stderr.strip()[-_OUTPUT_TAIL:]
    return reason + (f"; its last output: {tail}" if tail else "")


def _merge(original: Any, completed: Any, where: str) -> Any:
    """Take back what Triton takes from the hook's config (core `UpdateModelConfig`)."""
    updated = model_config_pb2.ModelConfig()
    try:
        json_format.ParseDict(completed, updated)
    except (json_format.ParseError, TypeError, ValueError) as exc:
        raise RepositoryError(
            f"{HOOK} returned a config Triton cannot read: {exc}",
            where=where,
            fix="use the field names and values of Triton's model configuration "
            "(e.g. data_type: TYPE_FP32, dims: [4])",
        ) from exc
    config = model_config_pb2.ModelConfig()
    config.CopyFrom(original)
    config.max_batch_size = updated.max_batch_size
    del config.input[:]
    config.input.extend(updated.input)
    del config.output[:]
    config.output.extend(updated.output)
    choice = updated.WhichOneof("scheduling_choice")
    current = config.WhichOneof("scheduling_choice")
    if current is None and choice is not None:
        getattr(config, choice).CopyFrom(getattr(updated, choice))
    elif current is not None and choice != current:
        raise RepositoryError(
            f"{HOOK} changes the scheduler from {current} to {choice}, which Triton refuses",
            where=where,
            fix="keep the scheduler config.pbtxt sets, or drop it from config.pbtxt",
        )
    if updated.HasField("model_transaction_policy"):
        config.model_transaction_policy.decoupled = updated.model_transaction_policy.decoupled
    return config
