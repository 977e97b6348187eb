"""What a PyTriton script bound, checked, and the Triton config PyTriton would write for it.

`bound_models(document, script)` turns the recording (`record.record`) into
`BoundModel`s or raises one `BindError` listing every problem, each naming the
script's line, the model and the field. `model_config(model)` builds the
`config.pbtxt` the way PyTriton's `ModelConfigGenerator` does: names default
to INPUT_n / OUTPUT_n, `batching=False` writes max_batch_size 0, a
`DynamicBatcher` (PyTriton's default) becomes `dynamic_batching`, one
KIND_CPU instance per callable, `decoupled` and `response_cache` as set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.errors import BindError
from deploy.repository.datatypes import NUMPY_TO_TRITON
from deploy.repository.schema import model_config_pb2

# PyTriton's `Triton._validate_model_name`.
_MODEL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")

_DTYPE_FIX = (
    "use a numpy type Triton has: np.bool_, np.uint8..np.uint64, np.int8..np.int64, "
    "np.float16/32/64, or np.bytes_ (or object) for bytes and strings"
)


@dataclass(frozen=True)
class TensorSpec:
    name: str
    data_type: str  # Triton's TYPE_* name
    dims: tuple[int, ...]
    optional: bool = False


@dataclass(frozen=True)
class QueuePolicy:
    timeout_action: str
    default_timeout_microseconds: int
    allow_timeout_override: bool
    max_queue_size: int


@dataclass(frozen=True)
class Batcher:
    max_queue_delay_microseconds: int
    preferred_batch_size: tuple[int, ...]
    preserve_ordering: bool
    priority_levels: int
    default_priority_level: int
    default_queue_policy: QueuePolicy | None
    priority_queue_policy: dict[int, QueuePolicy]


@dataclass(frozen=True)
class BoundModel:
    name: str
    version: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    max_batch_size: int  # 0 when batching is off
    batcher: Batcher | None
    response_cache: bool
    decoupled: bool
    instances: int
    location: str  # "<script>:<line>" of the bind() call


class _Problems:
    """Collects problems so one run reports all of them."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.fixes: list[str] = []

    def add(self, where: str, message: str, fix: str) -> None:
        self.lines.append(f"{where}: {message}")
        if fix not in self.fixes:
            self.fixes.append(fix)


def relative_location(file: str, line: int, script: Path) -> str:
    path = Path(file) if file else script
    try:
        shown = path.resolve().relative_to(script.resolve().parent)
    except ValueError:
        shown = path
    return f"{shown}:{line}" if line else str(shown)


def bound_models(document: dict[str, Any], script: Path) -> list[BoundModel]:
    """The models of a recording, checked; `BindError` names every problem found."""
    error = document.get("error")
    if isinstance(error, dict):
        where = relative_location(str(error.get("file") or ""), int(error.get("line") or 0), script)
        raise BindError(
            f"the script raised {error.get('type')}: {error.get('message')}",
            where=f"{script.name} ({where})" if where.split(":")[0] != script.name else where,
            fix="run the script with python to reproduce it; deploy bind runs it with "
            "Triton.serve() and run() returning at once, in the script's folder",
        )
    bindings = document.get("bindings") or []
    if not bindings:
        calls = document.get("calls") or []
        at = (
            f" ({calls[0]['method']}() at line {calls[0]['line']})"
            if calls and calls[0].get("line")
            else ""
        )
        where = (
            relative_location("", 0, script)
            if not calls
            else relative_location(
                str(calls[0].get("file") or ""), int(calls[0].get("line") or 0), script
            )
        )
        raise BindError(
            f"the script ran to its end without calling Triton.bind(){at}",
            where=where,
            fix="bind at least one model: triton.bind(model_name=..., infer_func=..., "
            "inputs=[Tensor(...)], outputs=[Tensor(...)]) before triton.serve()",
        )
    problems = _Problems()
    models: list[BoundModel] = []
    first_seen: dict[str, str] = {}
    for binding in bindings:
        where = relative_location(
            str(binding.get("file") or ""), int(binding.get("line") or 0), script
        )
        model = _model(binding, where, problems)
        if model is None:
            continue
        if model.name in first_seen:
            problems.add(
                where,
                f"model {model.name!r} is bound a second time (first at {first_seen[model.name]})",
                "give each bind() its own model_name",
            )
            continue
        first_seen[model.name] = where
        models.append(model)
    if problems.lines:
        raise BindError(
            f"{len(problems.lines)} problem(s) in what the script binds; nothing was written:\n  "
            + "\n  ".join(problems.lines),
            where=str(script),
            fix="; ".join(problems.fixes),
        )
    return models


def _model(binding: dict[str, Any], where: str, problems: _Problems) -> BoundModel | None:
    name = binding.get("model_name")
    if not isinstance(name, str) or not _MODEL_NAME.match(name) or name.startswith("."):
        problems.add(
            where,
            f"model_name {_shown(name)} is not a model name",
            "model_name may hold letters, digits, '.', '_' and '-' (not first '.')",
        )
        return None
    label = f"model {name!r}"
    count = len(problems.lines)
    version: Any = binding.get("model_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        problems.add(
            where,
            f"{label}: model_version {_shown(version)} is not a version",
            "pass model_version=1 (an integer >= 0)",
        )
    config: dict[str, Any] = binding.get("config") or {}
    batching: Any = config.get("batching")
    max_batch_size: Any = config.get("max_batch_size")
    if not isinstance(batching, bool):
        problems.add(
            where,
            f"{label}: config.batching {_shown(batching)} is not True or False",
            "pass ModelConfig(batching=True) or False",
        )
    elif batching and (not _is_int(max_batch_size) or max_batch_size < 1):
        problems.add(
            where,
            f"{label}: config.max_batch_size is {_shown(max_batch_size)}; with batching on "
            "it must be >= 1",
            "set ModelConfig(max_batch_size=N) with N >= 1, or ModelConfig(batching=False)",
        )
    inputs = _tensors(binding.get("inputs"), "inputs", "INPUT", label, where, problems)
    outputs = _tensors(binding.get("outputs"), "outputs", "OUTPUT", label, where, problems)
    for field, specs in (("inputs", inputs), ("outputs", outputs)):
        names = [t.name for t in specs]
        for duplicate in sorted({n for n in names if names.count(n) > 1}):
            problems.add(
                where,
                f"{label}: {field} name {duplicate!r} is used twice",
                "give every input (and every output) its own name",
            )
    for tensor in outputs:
        if tensor.optional:
            problems.add(
                where,
                f"{label}: output {tensor.name!r} is optional",
                "only inputs may be optional (PyTriton refuses optional outputs)",
            )
    instances: Any = binding.get("instances")
    if not _is_int(instances) or instances < 1:
        problems.add(
            where,
            f"{label}: infer_func is an empty list",
            "pass a callable, or a list of callables (one per instance)",
        )
    for value in binding.get("not_callable") or []:
        problems.add(
            where,
            f"{label}: infer_func {value} is not callable",
            "pass a function, a bound method or a callable object",
        )
    batcher = _batcher(config.get("batcher"), label, where, problems) if batching else None
    if len(problems.lines) > count:
        return None
    return BoundModel(
        name=name,
        version=int(version),
        inputs=inputs,
        outputs=outputs,
        max_batch_size=int(max_batch_size) if batching else 0,
        batcher=batcher,
        response_cache=bool(config.get("response_cache")),
        decoupled=bool(config.get("decoupled")),
        instances=int(instances),
        location=where,
    )


def _tensors(
    entries: Any, field: str, prefix: str, label: str, where: str, problems: _Problems
) -> tuple[TensorSpec, ...]:
    if not isinstance(entries, list) or not entries:
        problems.add(
            where,
            f"{label}: {field} is empty",
            f"declare the model's {field} as a list of Tensor(...)",
        )
        return ()
    specs = []
    for index, entry in enumerate(entries, start=1):
        at = f"{label}: {field}[{index - 1}]"
        if "invalid" in entry:
            problems.add(
                where,
                f"{at} is {entry['invalid']}, not a Tensor",
                "list Tensor(name=..., dtype=..., shape=...) objects",
            )
            continue
        name = entry.get("name") or f"{prefix}_{index}"
        at = f"{at} ({name})"
        dtype = entry.get("dtype") or {}
        data_type = ""
        if dtype.get("missing"):
            problems.add(
                where,
                f"{at}: dtype is missing",
                "give every Tensor a dtype, e.g. Tensor(dtype=np.float32, shape=(-1,))",
            )
        elif dtype.get("bytes"):
            data_type = "TYPE_STRING"
        elif dtype.get("numpy") in NUMPY_TO_TRITON:
            data_type = NUMPY_TO_TRITON[dtype["numpy"]]
        else:
            shown = dtype.get("repr") or dtype.get("invalid") or "?"
            problems.add(where, f"{at}: dtype {shown} has no Triton datatype", _DTYPE_FIX)
        shape = entry.get("shape")
        if not isinstance(shape, list) or not all(
            _is_int(d) and (d == -1 or d >= 1) for d in shape
        ):
            shown = shape["invalid"] if isinstance(shape, dict) and "invalid" in shape else shape
            problems.add(
                where,
                f"{at}: shape {shown} is not a list of dimensions",
                "give shape as a tuple of sizes >= 1 or -1 (variable), without the batch dimension",
            )
            continue
        if data_type:
            specs.append(TensorSpec(name, data_type, tuple(shape), bool(entry.get("optional"))))
    return tuple(specs)


def _batcher(entry: Any, label: str, where: str, problems: _Problems) -> Batcher | None:
    if entry is None:
        return None
    at = f"{label}: config.batcher"
    if "invalid" in entry:
        problems.add(
            where,
            f"{at} is {entry['invalid']}, not a DynamicBatcher",
            "pass batcher=DynamicBatcher(...)",
        )
        return None
    numbers = ("max_queue_delay_microseconds", "priority_levels", "default_priority_level")
    for field in numbers:
        if not _is_int(entry.get(field)) or entry[field] < 0:
            problems.add(
                where,
                f"{at}.{field} {_shown(entry.get(field))} is not an integer >= 0",
                f"set DynamicBatcher({field}=N) with N >= 0",
            )
            return None
    preferred = entry.get("preferred_batch_size") or []
    if not isinstance(preferred, list) or not all(_is_int(p) and p >= 1 for p in preferred):
        problems.add(
            where,
            f"{at}.preferred_batch_size {_shown(preferred)} is not a list of sizes >= 1",
            "list batch sizes, e.g. preferred_batch_size=[4, 8]",
        )
        return None
    levels = int(entry["priority_levels"])
    default_level = int(entry["default_priority_level"])
    # PyTriton's ModelConfigGenerator checks these two.
    if default_level and default_level > levels:
        problems.add(
            where,
            f"{at}.default_priority_level {default_level} is above priority_levels {levels}",
            f"pick a default_priority_level between 1 and {levels}",
        )
    default_policy = _policy(
        entry.get("default_queue_policy"), f"{at}.default_queue_policy", where, problems
    )
    priority: dict[int, QueuePolicy] = {}
    raw_priority = entry.get("priority_queue_policy") or {}
    if raw_priority and not levels:
        problems.add(
            where,
            f"{at}.priority_queue_policy is set without priority_levels",
            "set priority_levels as well",
        )
    for key, value in raw_priority.items():
        level = int(key) if str(key).lstrip("-").isdigit() else -1
        if level < 0 or level > levels:
            problems.add(
                where,
                f"{at}.priority_queue_policy has priority {key}, outside 1..{levels}",
                f"use priorities between 1 and {levels}",
            )
            continue
        policy = _policy(value, f"{at}.priority_queue_policy[{key}]", where, problems)
        if policy is not None:
            priority[level] = policy
    return Batcher(
        max_queue_delay_microseconds=int(entry["max_queue_delay_microseconds"]),
        preferred_batch_size=tuple(int(p) for p in preferred),
        preserve_ordering=bool(entry.get("preserve_ordering")),
        priority_levels=levels,
        default_priority_level=default_level,
        default_queue_policy=default_policy,
        priority_queue_policy=priority,
    )


def _policy(entry: Any, at: str, where: str, problems: _Problems) -> QueuePolicy | None:
    if entry is None:
        return None
    if "invalid" in entry:
        problems.add(
            where, f"{at} is {entry['invalid']}, not a QueuePolicy", "pass QueuePolicy(...)"
        )
        return None
    action = entry.get("timeout_action")
    if action not in ("REJECT", "DELAY"):
        problems.add(
            where,
            f"{at}.timeout_action {_shown(action)} is not REJECT or DELAY",
            "use TimeoutAction.REJECT or TimeoutAction.DELAY",
        )
        return None
    for field in ("default_timeout_microseconds", "max_queue_size"):
        if not _is_int(entry.get(field)) or entry[field] < 0:
            problems.add(
                where,
                f"{at}.{field} {_shown(entry.get(field))} is not an integer >= 0",
                f"set {field} to an integer >= 0",
            )
            return None
    return QueuePolicy(
        timeout_action=str(action),
        default_timeout_microseconds=int(entry["default_timeout_microseconds"]),
        allow_timeout_override=bool(entry.get("allow_timeout_override")),
        max_queue_size=int(entry["max_queue_size"]),
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    if isinstance(value, dict) and "invalid" in value:
        return str(value["invalid"])
    return repr(value)


def model_config(model: BoundModel) -> Any:
    """The `ModelConfig` (protobuf) PyTriton's generator writes for `model`."""
    pb = model_config_pb2
    config = pb.ModelConfig(name=model.name, backend="python", max_batch_size=model.max_batch_size)
    for specs, target in ((model.inputs, config.input), (model.outputs, config.output)):
        for spec in specs:
            entry = target.add()
            entry.name = spec.name
            entry.data_type = pb.DataType.Value(spec.data_type)
            entry.dims.extend(spec.dims)
            if spec.optional:
                entry.optional = True
    group = config.instance_group.add()
    group.kind = pb.ModelInstanceGroup.Kind.Value("KIND_CPU")
    group.count = model.instances
    if model.batcher is not None:
        batcher = model.batcher
        dynamic = config.dynamic_batching
        dynamic.SetInParent()  # PyTriton writes `dynamic_batching {}` for the default batcher
        dynamic.max_queue_delay_microseconds = batcher.max_queue_delay_microseconds
        dynamic.preferred_batch_size.extend(batcher.preferred_batch_size)
        dynamic.preserve_ordering = batcher.preserve_ordering
        dynamic.priority_levels = batcher.priority_levels
        dynamic.default_priority_level = batcher.default_priority_level
        if batcher.default_queue_policy is not None:
            _set_policy(dynamic.default_queue_policy, batcher.default_queue_policy)
        for level, policy in sorted(batcher.priority_queue_policy.items()):
            _set_policy(dynamic.priority_queue_policy[level], policy)
    if model.decoupled:
        config.model_transaction_policy.decoupled = True
    if model.response_cache:
        config.response_cache.enable = True
    return config


def _set_policy(target: Any, policy: QueuePolicy) -> None:
    target.timeout_action = model_config_pb2.ModelQueuePolicy.TimeoutAction.Value(
        policy.timeout_action
    )
    target.default_timeout_microseconds = policy.default_timeout_microseconds
    target.allow_timeout_override = policy.allow_timeout_override
    target.max_queue_size = policy.max_queue_size
