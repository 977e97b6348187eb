"""NeuronCore rules for `deploy validate --instance ml.inf1.*`.

Registered with `deploy.validation.register_rule` on import. A Neuron model
(one whose config.pbtxt carries NEURON_CORE_START_INDEX/END_INDEX) needs one
core slice per instance inside its range; with `--instance ml.inf1.*` its
range must fit the instance's NeuronCores and no two models may share a core
(an overlap is reported once, on the first of the two models, naming both).
"""

from __future__ import annotations

from collections.abc import Iterator

from deploy.errors import NeuronError
from deploy.neuron.instances import NEURON_CORES, is_inferentia
from deploy.neuron.planning import (
    PARAM_CORE_END,
    PARAM_CORE_START,
    PARAM_INSTANCE_CORES,
    check_core_plan,
    core_range_of,
)
from deploy.neuron.spec import CoreRange
from deploy.repository import Model
from deploy.validation.diagnostics import Diagnostic, error
from deploy.validation.registry import Context, register_rule

_FIELD = f"parameters.{PARAM_CORE_START}/{PARAM_CORE_END}"


def _ranges(context: Context) -> dict[str, CoreRange]:
    ranges = {}
    for name, model in context.repository.models.items():
        parameters = {key: value.string_value for key, value in model.config.parameters.items()}
        try:
            cores = core_range_of(parameters)
        except NeuronError:
            continue  # reported by neuron_core_rule for that model
        if cores is not None:
            ranges[name] = cores
    return ranges


def neuron_core_rule(context: Context, model: Model) -> Iterator[Diagnostic]:
    """NeuronCore range of `model`: readable, sliced per instance, inside the
    instance (`--instance ml.inf1.*`), not shared with another model."""
    parameters = {key: value.string_value for key, value in model.config.parameters.items()}
    file = context.file_of(model)
    try:
        cores = core_range_of(parameters)
    except NeuronError as exc:
        yield error(model.name, file, _FIELD, exc.message, exc.fix or "")
        return
    if cores is None:
        return
    yield from _instance_slices(model, file, parameters, cores)
    instance_type = context.instance_type
    if instance_type is None or not is_inferentia(instance_type):
        return
    ranges = _ranges(context)
    if instance_type not in NEURON_CORES:
        if model.name == min(ranges):
            yield error(
                model.name,
                file,
                "--instance",
                f"unknown Inferentia instance type {instance_type!r}",
                f"use one of: {', '.join(NEURON_CORES)}",
            )
        return
    for problem in check_core_plan(ranges, instance_type):
        if problem.models[0] == model.name:
            yield error(model.name, file, _FIELD, problem.message, problem.fix)


def _instance_slices(
    model: Model, file: str, parameters: dict[str, str], cores: CoreRange
) -> Iterator[Diagnostic]:
    """INSTANCE_CORE_RANGES: one slice per instance, inside the model's range."""
    text = parameters.get(PARAM_INSTANCE_CORES)
    if text is None:
        return
    field = f"parameters.{PARAM_INSTANCE_CORES}"
    fix = "regenerate the model with deploy neuron generate (--cores, --instances)"
    count = sum(group.count or 1 for group in model.config.instance_group) or 1
    slices = text.split(",")
    if len(slices) != count:
        yield error(
            model.name,
            file,
            field,
            f"{len(slices)} NeuronCore slices for {count} model instances",
            fix,
        )
        return
    for piece in slices:
        first, _, last = piece.partition("-")
        if not (first.isdigit() and last.isdigit()) or not (
            cores.start <= int(first) <= int(last) <= cores.end
        ):
            yield error(
                model.name,
                file,
                field,
                f"slice {piece!r} is not a first-last range inside NeuronCores {cores}",
                fix,
            )
            return


register_rule(neuron_core_rule)
