"""Ensemble rules (Triton's `ensemble_utils.cc`): steps, tensor wiring, dtypes, shapes, cycles."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from deploy.repository import Model
from deploy.repository.schema import model_config_pb2 as pb
from deploy.validation.diagnostics import Diagnostic, error
from deploy.validation.registry import Context, model_rule


@dataclass(frozen=True)
class _Tensor:
    datatype: int
    shape: tuple[int, ...]  # including the batch dimension (-1) when batching
    origin: str


def _full_shape(model: Model, dims: list[int]) -> tuple[int, ...]:
    return ((-1,) if model.max_batch_size > 0 else ()) + tuple(int(d) for d in dims)


def _compatible(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b, strict=True))


@model_rule
def ensemble_steps(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    if model.kind != "ensemble":
        return
    file = ctx.file_of(model)
    config = model.config
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
    tensors: dict[str, _Tensor] = {
        t.name: _Tensor(t.data_type, _full_shape(model, list(t.dims)), "ensemble input")
        for t in config.input
    }
    producers: dict[str, int] = {}
    # First pass: what each step produces (so later checks see every tensor).
    for index, step in enumerate(steps):
        composing = ctx.repository.models.get(step.model_name)
        for key, value in step.output_map.items():
            if value in producers or value in tensors:
                yield error(
                    model.name,
                    file,
                    f"ensemble_scheduling.step[{index}].output_map[{key}]",
                    f'tensor "{value}" is produced more than once',
                    "give each step output its own ensemble tensor name",
                )
            producers[value] = index
            if composing is None:
                continue
            outputs = {t.name: t for t in composing.config.output}
            if key in outputs:
                tensors.setdefault(
                    value,
                    _Tensor(
                        outputs[key].data_type,
                        _full_shape(composing, list(outputs[key].dims)),
                        f'output "{key}" of {step.model_name}',
                    ),
                )
    for index, step in enumerate(steps):
        yield from _check_step(ctx, model, file, index, step, tensors)
    yield from _check_outputs(model, file, producers, tensors)
    yield from _check_cycles(model, file, steps)


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
    if model.max_batch_size > 0 and composing.max_batch_size < model.max_batch_size:
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
            inputs[key].data_type,
            _full_shape(composing, list(inputs[key].dims)),
            f'input "{key}" of {step.model_name}',
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
    model: Model,
    file: str,
    field: str,
    source: _Tensor,
    datatype: int,
    shape: tuple[int, ...],
    target: str,
) -> Iterator[Diagnostic]:
    if source.datatype != datatype:
        yield error(
            model.name,
            file,
            field,
            f"{source.origin} is {pb.DataType.Name(source.datatype)} but {target} is "
            f"{pb.DataType.Name(datatype)}",
            "make the data types equal (Triton does not convert between steps)",
        )
    elif not _compatible(source.shape, shape):
        yield error(
            model.name,
            file,
            field,
            f"{source.origin} has shape {list(source.shape)} but {target} expects "
            f"{list(shape)} (-1: any size, batch dimension included)",
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
                output.data_type,
                _full_shape(model, list(output.dims)),
                f'ensemble output "{output.name}"',
            )


def _check_cycles(
    model: Model, file: str, steps: list[pb.ModelEnsembling.Step]
) -> Iterator[Diagnostic]:
    produced_by = {value: i for i, s in enumerate(steps) for value in s.output_map.values()}
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
