"""NeuronCore planning: which cores each model instance gets, and whether a
repository's models fit one inf1 instance without sharing cores.

Pure functions over `CoreRange`s; `repository_core_ranges` reads the ranges
that `deploy neuron generate` wrote into each model's config.pbtxt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from deploy.errors import NeuronError
from deploy.neuron.instances import neuron_cores
from deploy.neuron.spec import CoreRange

# config.pbtxt parameters, named as python_backend's inferentia script names them.
PARAM_COMPILED_MODEL = "COMPILED_MODEL"
PARAM_CORE_START = "NEURON_CORE_START_INDEX"
PARAM_CORE_END = "NEURON_CORE_END_INDEX"
PARAM_THREADS_PER_CORE = "NUM_THREADS_PER_CORE"
# Ours: the per-instance ranges, computed here once so model.py only indexes them.
PARAM_INSTANCE_CORES = "INSTANCE_CORE_RANGES"
PARAM_BATCHING = "BATCHING"


def split_cores(cores: CoreRange, instances: int) -> list[CoreRange]:
    """Contiguous, equal slices of `cores`, one per model instance."""
    if instances < 1 or cores.count % instances:
        raise NeuronError(
            f"{cores.count} NeuronCores ({cores}) do not split evenly across {instances} instances",
            fix="pick an instance count that divides the number of cores",
        )
    width = cores.count // instances
    return [
        CoreRange(cores.start + i * width, cores.start + (i + 1) * width - 1)
        for i in range(instances)
    ]


@dataclass(frozen=True)
class CoreProblem:
    """One planning finding, naming the model(s) involved."""

    models: tuple[str, ...]
    message: str
    fix: str


def check_core_plan(
    ranges: Mapping[str, CoreRange], instance_type: str | None
) -> list[CoreProblem]:
    """Every range must fit `instance_type`'s NeuronCores (when given); no two may overlap."""
    problems: list[CoreProblem] = []
    if instance_type is not None:
        available = neuron_cores(instance_type)
        for name, cores in sorted(ranges.items()):
            if cores.end >= available:
                problems.append(
                    CoreProblem(
                        (name,),
                        f"NeuronCores {cores} are out of range: {instance_type} has "
                        f"{available} (0:{available - 1})",
                        "regenerate the model with --cores inside that range, "
                        "or pick a larger inf1",
                    )
                )
    ordered = sorted(ranges.items(), key=lambda item: (item[1].start, item[0]))
    for i, (first, first_cores) in enumerate(ordered):
        for second, second_cores in ordered[i + 1 :]:
            if first_cores.overlaps(second_cores):
                problems.append(
                    CoreProblem(
                        (first, second),
                        f"NeuronCores of {first} ({first_cores}) and {second} "
                        f"({second_cores}) overlap",
                        "give each model its own core range (deploy neuron generate --cores)",
                    )
                )
    return problems


def require_core_plan(ranges: Mapping[str, CoreRange], instance_type: str | None) -> None:
    """`check_core_plan`, raising the first problem as a `NeuronError`."""
    problems = check_core_plan(ranges, instance_type)
    if problems:
        first = problems[0]
        raise NeuronError(first.message, where=", ".join(first.models), fix=first.fix)


def core_range_of(parameters: Mapping[str, str]) -> CoreRange | None:
    """The core range in a model's config parameters, or None for a non-Neuron model."""
    if PARAM_CORE_START not in parameters or PARAM_CORE_END not in parameters:
        return None
    try:
        return CoreRange(int(parameters[PARAM_CORE_START]), int(parameters[PARAM_CORE_END]))
    except ValueError:
        raise NeuronError(
            f"{PARAM_CORE_START}/{PARAM_CORE_END} are not integers",
            fix="regenerate the model with deploy neuron generate",
        ) from None


def repository_core_ranges(repository: Path) -> dict[str, CoreRange]:
    """Core ranges of the Neuron models in a Triton repository, by model folder."""
    from google.protobuf import text_format

    from deploy.repository.schema import model_config_pb2

    if not repository.is_dir():
        raise NeuronError("model repository not found", where=str(repository))
    ranges: dict[str, CoreRange] = {}
    for config_path in sorted(repository.glob("*/config.pbtxt")):
        config = model_config_pb2.ModelConfig()
        try:
            text_format.Parse(config_path.read_text(encoding="utf-8"), config)
        except (OSError, text_format.ParseError) as exc:
            raise NeuronError(f"cannot parse: {exc}", where=str(config_path)) from exc
        parameters = {key: value.string_value for key, value in config.parameters.items()}
        try:
            cores = core_range_of(parameters)
        except NeuronError as exc:
            raise NeuronError(exc.message, where=str(config_path), fix=exc.fix) from None
        if cores is not None:
            ranges[config_path.parent.name] = cores
    return ranges
