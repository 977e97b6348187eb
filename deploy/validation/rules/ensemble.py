"""Ensemble rules: steps, tensor wiring, dtypes, shapes, unused tensors, cycles, decoupled steps.

Ported from triton-inference-server/core `ValidateEnsembleSchedulingConfig`
(`model_config_utils.cc`, the config alone) and `ValidateEnsembleConfig`
(`ensemble_scheduler/ensemble_utils.cc`, with the composing models' configs).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from deploy.repository import Model
from deploy.repository.schema import model_config_pb2 as pb
from deploy.validation.diagnostics import Diagnostic, error, warning
from deploy.validation.registry import Context, model_rule


@dataclass(frozen=True)
class _Tensor:
    datatype: int
    dims: tuple[int, ...]  # as declared (reshape's shape for the ensemble's own inputs/outputs)
    shape: tuple[int, ...]  # dims with the batch dimension (-1) first when batching
    origin: str


def _tensor(model: Model, dims: list[int], datatype: int, origin: str) -> _Tensor:
    declared = tuple(int(d) for d in dims)
    batch = (-1,) if model.max_batch_size > 0 else ()
    return _Tensor(datatype, declared, batch + declared, origin)


def _own(model: Model, entry: pb.ModelInput | pb.ModelOutput, origin: str) -> _Tensor:
    dims = list(entry.reshape.shape) if entry.HasField("reshape") else list(entry.dims)
    return _tensor(model, dims, entry.data_type, origin)


def _same(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b, strict=True))


def _compatible(a: _Tensor, b: _Tensor) -> bool:
    # Triton compares the declared dims, then the dims with the batch dimension,
    # so a batching step may feed a non-batching one declared [-1, ...].
    return _same(a.dims, b.dims) or _same(a.shape, b.shape)


@model_rule
def ensemble_scheduling_only_on_ensembles(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    if model.kind != "ensemble" and model.config.HasField("ensemble_scheduling"):
        yield error(
            model.name,
            ctx.file_of(model),
            "ensemble_scheduling",
            f'ensemble_scheduling is set, but the platform is "{model.config.platform}", '
            'not "ensemble"',
            'remove ensemble_scheduling, or set platform: "ensemble" (and no backend)',
        )


@model_rule
def ensemble_steps(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    if model.kind != "ensemble":
        return
    file = ctx.file_of(model)
    config = model.config
    for field, present in (
        ("optimization", config.HasField("optimization")),
        ("model_warmup", bool(config.model_warmup)),
    ):
        if present:
            yield error(
                model.name,
                file,
                field,
                f"an ensemble takes no {field} (its steps are optimized and warmed up "
                "as models of their own)",
                f"remove {field} from the ensemble; set it on the composing models",
            )
    steps = list(config.ensemble_scheduling.step)
    if not steps:
        yield error(
            model.name,
            file,
            "ensemble_scheduling.step",
            "the ensemble has no steps",
            "add ensemble_scheduling { step [ ... ] }",
        )
        return
    incomplete = False
    for index, step in enumerate(steps):
        for field, present in (
            ("model_name", bool(step.model_name)),
            ("input_map", bool(step.input_map)),
            ("output_map", bool(step.output_map)),
        ):
            if not present:
                incomplete = True
                yield error(
                    model.name,
                    file,
                    f"ensemble_scheduling.step[{index}].{field}",
                    f"step {index} has no {field}",
                    f"set {field} for every step",
                )
    if incomplete:
        return
    tensors: dict[str, _Tensor] = {t.name: _own(model, t, "ensemble input") for t in config.input}
    producers: dict[str, int] = {}
    ensemble_inputs = {t.name for t in config.input}
    # First pass: what each step produces (so later checks see every tensor).
    for index, step in enumerate(steps):
        composing = ctx.repository.models.get(step.model_name)
        for key, value in step.output_map.items():
            if value in producers:
                yield error(
                    model.name,
                    file,
                    f"ensemble_scheduling.step[{index}].output_map[{key}]",
                    f'tensor "{value}" is produced more than once',
                    "give each step output its own ensemble tensor name",
                )
            elif value in ensemble_inputs:
                # Seen on the real tritonserver: it loads (the input is ready from the start).
                yield warning(
                    model.name,
                    file,
                    f"ensemble_scheduling.step[{index}].output_map[{key}]",
                    f'step {index} writes its output "{key}" into the ensemble input "{value}"',
                    "give the step output its own ensemble tensor name",
                )
            producers[value] = index
            if composing is None:
                continue
            outputs = {t.name: t for t in composing.config.output}
            if key in outputs:
                tensors.setdefault(
                    value,
                    _tensor(
                        composing,
                        list(outputs[key].dims),
                        outputs[key].data_type,
                        f'output "{key}" of {step.model_name}',
                    ),
                )
    for index, step in enumerate(steps):
        yield from _check_step(ctx, model, file, index, step, tensors)
    yield from _check_outputs(model, file, producers, tensors)
    yield from _check_unused(model, file, steps)
    cycle = list(_check_cycles(model, file, steps))
    yield from cycle
    if not cycle:
        yield from _check_decoupled(ctx, model, file, steps)


def _check_step(
    ctx: Context,
    model: Model,
    file: str,
    index: int,
    step: pb.ModelEnsembling.Step,
    tensors: dict[str, _Tensor],
) -> Iterator[Diagnostic]:
    where = f"ensemble_scheduling.step[{index}]"
    composing = ctx.repository.models.get(step.model_name)
    if composing is None:
        yield error(
            model.name,
            file,
            f"{where}.model_name",
            f'step model "{step.model_name}" is not in the repository',
            f"add {step.model_name}/ to the repository or fix model_name",
        )
        return
    if step.model_version > 0 and step.model_version not in {v.number for v in composing.versions}:
        yield error(
            model.name,
            file,
            f"{where}.model_version",
            f"{step.model_name} has no version {step.model_version}",
            "use -1 (latest) or an existing version",
        )
    # A non-batching step (max_batch_size 0) may sit in a batching ensemble.
    if 0 < composing.max_batch_size < model.max_batch_size:
        yield error(
            model.name,
            file,
            "max_batch_size",
            f"ensemble max_batch_size {model.max_batch_size} exceeds that of step model "
            f"{step.model_name} ({composing.max_batch_size})",
            f"lower the ensemble's max_batch_size to at most {composing.max_batch_size}",
        )
    inputs = {t.name: t for t in composing.config.input}
    for key, value in step.input_map.items():
        field = f"{where}.input_map[{key}]"
        if key not in inputs:
            yield error(
                model.name,
                file,
                field,
                f'"{key}" is not an input of {step.model_name}',
                f"use one of its inputs: {', '.join(sorted(inputs))}",
            )
            continue
        source = tensors.get(value)
        if source is None:
            yield error(
                model.name,
                file,
                field,
                f'tensor "{value}" is neither an ensemble input nor produced by a step',
                "map it from an ensemble input or from a step's output_map",
            )
            continue
        yield from _match(
            model,
            file,
            field,
            source,
            _tensor(
                composing,
                list(inputs[key].dims),
                inputs[key].data_type,
                f'input "{key}" of {step.model_name}',
            ),
        )
    for name, tensor in inputs.items():
        if name not in step.input_map and not tensor.optional:
            yield error(
                model.name,
                file,
                f"{where}.input_map",
                f'required input "{name}" of {step.model_name} is not mapped',
                f'add input_map {{ key: "{name}" value: "<ensemble tensor>" }}',
            )
    outputs = {t.name for t in composing.config.output}
    for key in step.output_map:
        if key not in outputs:
            yield error(
                model.name,
                file,
                f"{where}.output_map[{key}]",
                f'"{key}" is not an output of {step.model_name}',
                f"use one of its outputs: {', '.join(sorted(outputs))}",
            )


def _match(
    model: Model, file: str, field: str, source: _Tensor, target: _Tensor
) -> Iterator[Diagnostic]:
    if source.datatype != target.datatype:
        yield error(
            model.name,
            file,
            field,
            f"{source.origin} is {pb.DataType.Name(source.datatype)} but {target.origin} is "
            f"{pb.DataType.Name(target.datatype)}",
            "make the data types equal (Triton does not convert between steps)",
        )
    elif not _compatible(source, target):
        yield error(
            model.name,
            file,
            field,
            f"{source.origin} has shape {list(source.shape)} but {target.origin} expects "
            f"{list(target.shape)} (-1: any size, batch dimension included)",
            "make the shapes agree, or reshape in the composing model",
        )


def _check_outputs(
    model: Model, file: str, producers: dict[str, int], tensors: dict[str, _Tensor]
) -> Iterator[Diagnostic]:
    for index, output in enumerate(model.config.output):
        field = f"output[{index}]"
        if output.name not in producers:
            yield error(
                model.name,
                file,
                field,
                f'ensemble output "{output.name}" is not produced by any step',
                f'map a step output to "{output.name}" in its output_map',
            )
            continue
        produced = tensors.get(output.name)
        if produced is not None:
            yield from _match(
                model,
                file,
                field,
                produced,
                _own(model, output, f'ensemble output "{output.name}"'),
            )


def _check_unused(
    model: Model, file: str, steps: list[pb.ModelEnsembling.Step]
) -> Iterator[Diagnostic]:
    """Triton refuses ensemble inputs no step reads and step outputs nothing reads."""
    consumed = {value for step in steps for value in step.input_map.values()}
    outputs = {t.name for t in model.config.output}
    for index, tensor in enumerate(model.config.input):
        if tensor.name not in consumed:
            yield error(
                model.name,
                file,
                f"input[{index}]",
                f'ensemble input "{tensor.name}" is not used by any step',
                "map it in a step's input_map, or remove the input",
            )
    for index, step in enumerate(steps):
        for key, value in step.output_map.items():
            if value not in consumed and value not in outputs:
                yield error(
                    model.name,
                    file,
                    f"ensemble_scheduling.step[{index}].output_map[{key}]",
                    f'tensor "{value}" is produced but neither read by a step nor an '
                    "ensemble output",
                    f'remove output_map {{ key: "{key}" ... }}, or use "{value}"',
                )


def _check_decoupled(
    ctx: Context, model: Model, file: str, steps: list[pb.ModelEnsembling.Step]
) -> Iterator[Diagnostic]:
    """Triton's decoupled labels (`ValidateEnsembleConfig`): every step, and the ensemble's
    outputs, must draw on at most one decoupled branch; a decoupled step makes the
    ensemble decoupled."""
    labels: dict[str, int] = {t.name: 0 for t in model.config.input}
    decoupled: list[int] = []
    pending = list(range(len(steps)))
    while pending:
        ready = [i for i in pending if all(v in labels for v in steps[i].input_map.values())]
        if not ready:
            return  # unconnected tensors are reported by the wiring checks
        for index in ready:
            pending.remove(index)
            step = steps[index]
            found = {labels[v] for v in step.input_map.values()}
            if len(found) > 1:
                yield error(
                    model.name,
                    file,
                    f"ensemble_scheduling.step[{index}].input_map",
                    f"step {index} ({step.model_name}) receives inputs that come from different "
                    "decoupled models",
                    "feed the step from one decoupled branch only",
                )
                return
            label = found.pop() if found else 0
            composing = ctx.repository.models.get(step.model_name)
            if composing is not None and composing.config.model_transaction_policy.decoupled:
                decoupled.append(index)
                label = len(decoupled)
            for value in step.output_map.values():
                labels.setdefault(value, label)
    produced = {labels[t.name] for t in model.config.output if t.name in labels}
    if len(produced) > 1:
        yield error(
            model.name,
            file,
            "output",
            "the ensemble's outputs come from different decoupled models",
            "produce every output from one decoupled branch",
        )
    elif decoupled:
        names = ", ".join(f"step {i} ({steps[i].model_name})" for i in decoupled)
        yield warning(
            model.name,
            file,
            "ensemble_scheduling.step",
            f"the ensemble is decoupled because {names} is: it streams its responses, and "
            "SageMaker's InvokeEndpoint (real-time and multi-model) expects exactly one "
            "response per request",
            "use models with decoupled: false in the ensemble",
        )


def _check_cycles(
    model: Model, file: str, steps: list[pb.ModelEnsembling.Step]
) -> Iterator[Diagnostic]:
    # Ensemble inputs are ready from the start, whoever else writes them.
    inputs = {t.name for t in model.config.input}
    produced_by = {
        value: i
        for i, s in enumerate(steps)
        for value in s.output_map.values()
        if value not in inputs
    }
    edges = {
        i: {produced_by[v] for v in s.input_map.values() if v in produced_by}
        for i, s in enumerate(steps)
    }
    state: dict[int, int] = {}  # 1 visiting, 2 done

    def visit(node: int, path: list[int]) -> list[int] | None:
        state[node] = 1
        for parent in sorted(edges[node]):
            if state.get(parent) == 1:
                return [*path, node, parent]
            if state.get(parent) is None:
                found = visit(parent, [*path, node])
                if found:
                    return found
        state[node] = 2
        return None

    for node in range(len(steps)):
        if state.get(node) is None:
            cycle = visit(node, [])
            if cycle:
                names = " -> ".join(f"step[{i}] ({steps[i].model_name})" for i in cycle)
                yield error(
                    model.name,
                    file,
                    "ensemble_scheduling.step",
                    f"steps feed each other in a cycle: {names}",
                    "break the cycle; an ensemble is a directed acyclic graph",
                )
                return


@model_rule
def ensemble_model_cycles(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    """An ensemble must not contain itself through nested ensembles."""
    if model.kind != "ensemble":
        return
    pending = [(s.model_name, [model.name]) for s in model.ensemble_steps]
    seen: set[str] = set()
    while pending:
        name, chain = pending.pop()
        if name == model.name:
            yield error(
                model.name,
                ctx.file_of(model),
                "ensemble_scheduling.step",
                f"the ensemble contains itself: {' -> '.join([*chain, name])}",
                "remove the step that leads back to this ensemble",
            )
            return
        if name in seen:
            continue
        seen.add(name)
        nested = ctx.repository.models.get(name)
        if nested is not None and nested.kind == "ensemble":
            pending.extend((s.model_name, [*chain, name]) for s in nested.ensemble_steps)
