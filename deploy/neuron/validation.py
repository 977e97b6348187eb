"""NeuronCore rules for `deploy validate --instance ml.inf1.*`.

Registered with `deploy.validation.register_rule` on import. Each Neuron
model (one whose config.pbtxt carries NEURON_CORE_START_INDEX/END_INDEX) must
fit the instance's NeuronCores, and no two models may share a core; an
overlap is reported once, on the first of the two models, naming both.
"""

from __future__ import annotations

from collections.abc import Iterator

from deploy.errors import NeuronError
from deploy.neuron.instances import NEURON_CORES, is_inferentia
from deploy.neuron.planning import PARAM_CORE_END, PARAM_CORE_START, check_core_plan, core_range_of
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
    """NeuronCore range of `model`: readable, inside the instance, not shared."""
    instance_type = context.instance_type
    if instance_type is None or not is_inferentia(instance_type):
        return
    parameters = {key: value.string_value for key, value in model.config.parameters.items()}
    file = context.file_of(model)
    try:
        cores = core_range_of(parameters)
    except NeuronError as exc:
        yield error(model.name, file, _FIELD, exc.message, exc.fix or "")
        return
    if cores is None:
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


register_rule(neuron_core_rule)
