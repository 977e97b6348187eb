"""Rules on config.pbtxt fields: identity, backend, tensors, batching, instances, sequences."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from deploy.repository import Model
from deploy.repository.backends import (
    BACKEND_DEFAULT_FILES,
    ENSEMBLE_PLATFORM,
    PLATFORM_BACKENDS,
)
from deploy.repository.schema import model_config_pb2 as pb
from deploy.validation.diagnostics import Diagnostic, error, warning
from deploy.validation.instances import gpu_count
from deploy.validation.registry import Context, model_rule


@model_rule
def name_matches_folder(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    if model.config_name and model.config_name != model.name:
        yield error(
            model.name,
            ctx.file_of(model),
            "name",
            f'name "{model.config_name}" differs from the folder name "{model.name}"',
            f'set name: "{model.name}" (or rename the folder); Triton serves the folder name',
        )


@model_rule
def platform_and_backend(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    platform, backend = model.config.platform, model.config.backend
    file = ctx.file_of(model)
    known_platforms = sorted([*PLATFORM_BACKENDS, ENSEMBLE_PLATFORM])
    if not platform and not backend:
        if not model.backend:  # Triton fills it in only from a default model file
            yield error(
                model.name,
                file,
                "backend",
                "neither backend nor platform is set, and no model file shows which backend "
                "serves it",
                'set backend (e.g. backend: "python") or platform '
                '(e.g. platform: "onnxruntime_onnx")',
            )
        return
    if platform and platform not in known_platforms:
        yield error(
            model.name,
            file,
            "platform",
            f'unknown platform "{platform}"',
            f"use one of {', '.join(known_platforms)}, or set backend instead",
        )
        return
    if platform == ENSEMBLE_PLATFORM and backend:
        yield error(
            model.name,
            file,
            "backend",
            f'an ensemble has no backend (got "{backend}")',
            "remove backend from the ensemble's config",
        )
    elif platform and backend and PLATFORM_BACKENDS.get(platform) != backend:
        yield error(
            model.name,
            file,
            "backend",
            f'platform "{platform}" is served by backend "{PLATFORM_BACKENDS[platform]}", '
            f'not "{backend}"',
            f'set backend: "{PLATFORM_BACKENDS[platform]}" or remove one of the two fields',
        )
    elif backend and backend not in BACKEND_DEFAULT_FILES and not platform:
        yield warning(
            model.name,
            file,
            "backend",
            f'backend "{backend}" is not one the SageMaker Triton image ships',
            "check the spelling, or make sure the image you deploy has this backend",
        )


def _tensor_fields(model: Model) -> Iterator[tuple[str, Any]]:
    for index, tensor in enumerate(model.config.input):
        yield f"input[{index}]", tensor
    for index, tensor in enumerate(model.config.output):
        yield f"output[{index}]", tensor


@model_rule
def tensors(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    file = ctx.file_of(model)
    for group, entries in (("input", model.config.input), ("output", model.config.output)):
        seen: set[str] = set()
        for index, tensor in enumerate(entries):
            where = f"{group}[{index}]"
            if not tensor.name:
                yield error(model.name, file, f"{where}.name", f"{group} has no name", "name it")
            elif tensor.name in seen:
                yield error(
                    model.name,
                    file,
                    f"{where}.name",
                    f'duplicate {group} name "{tensor.name}"',
                    f"give every {group} a distinct name",
                )
            seen.add(tensor.name)
    for where, tensor in _tensor_fields(model):
        if tensor.data_type == pb.TYPE_INVALID:
            yield error(
                model.name,
                file,
                f"{where}.data_type",
                f'"{tensor.name}" has no data_type',
                "set data_type, e.g. data_type: TYPE_FP32",
            )
        if not tensor.dims and not (model.max_batch_size > 0 and tensor.HasField("reshape")):
            yield error(
                model.name,
                file,
                f"{where}.dims",
                f'"{tensor.name}" has no dims',
                "declare dims (use [ 1 ] with reshape: { shape: [ ] } for a scalar per item)",
            )
        for dim in tensor.dims:
            if dim == 0 or dim < -1:
                yield error(
                    model.name,
                    file,
                    f"{where}.dims",
                    f'"{tensor.name}" has invalid dimension {dim}',
                    "use a positive size, or -1 for a variable-size dimension",
                )
                break
        if tensor.HasField("reshape"):
            yield from _reshape(model, file, where, tensor)


def _reshape(model: Model, file: str, where: str, tensor: Any) -> Iterator[Diagnostic]:
    dims, shape = list(tensor.dims), list(tensor.reshape.shape)
    for dim in shape:
        if dim == 0 or dim < -1:
            yield error(
                model.name,
                file,
                f"{where}.reshape.shape",
                f'"{tensor.name}" reshape has invalid dimension {dim}',
                "use a positive size, or -1 for a variable-size dimension",
            )
            return
    variable_dims, variable_shape = dims.count(-1), shape.count(-1)
    if variable_dims != variable_shape:
        yield error(
            model.name,
            file,
            f"{where}.reshape.shape",
            f'"{tensor.name}" dims {dims} and reshape {shape} have different numbers of '
            "variable-size (-1) dimensions",
            "use -1 in reshape exactly where the data can vary",
        )
    elif math.prod(d for d in dims if d != -1) != math.prod(d for d in shape if d != -1):
        yield error(
            model.name,
            file,
            f"{where}.reshape.shape",
            f'"{tensor.name}" dims {dims} hold {math.prod(dims)} elements but reshape '
            f"{shape} holds {math.prod(shape)}",
            "make reshape's element count equal to that of dims",
        )


@model_rule
def batching(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    file = ctx.file_of(model)
    config = model.config
    if config.max_batch_size < 0:
        yield error(
            model.name,
            file,
            "max_batch_size",
            f"max_batch_size is negative ({config.max_batch_size})",
            "use 0 (no batching) or a positive batch size",
        )
    if not config.HasField("dynamic_batching"):
        return
    if config.max_batch_size == 0:
        yield warning(
            model.name,
            file,
            "dynamic_batching",
            "dynamic_batching with max_batch_size: 0 is accepted and ignored by Triton",
            "set max_batch_size > 0 to batch requests, or remove dynamic_batching",
        )
        return
    for size in config.dynamic_batching.preferred_batch_size:
        if size > config.max_batch_size or size <= 0:
            yield error(
                model.name,
                file,
                "dynamic_batching.preferred_batch_size",
                f"preferred batch size {size} is outside 1..max_batch_size "
                f"({config.max_batch_size})",
                "use preferred sizes between 1 and max_batch_size",
            )


@model_rule
def instance_groups(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    file = ctx.file_of(model)
    gpus = gpu_count(ctx.instance_type) if ctx.instance_type else None
    for index, group in enumerate(model.config.instance_group):
        where = f"instance_group[{index}]"
        if group.count < 0:
            yield error(
                model.name,
                file,
                f"{where}.count",
                f"instance count is negative ({group.count})",
                "use a count of 1 or more",
            )
        negative = [g for g in group.gpus if g < 0]
        if negative:
            yield error(
                model.name,
                file,
                f"{where}.gpus",
                f"GPU ids must not be negative (got {negative[0]})",
                "list GPU ids from 0",
            )
        if group.gpus and group.kind not in (
            pb.ModelInstanceGroup.KIND_GPU,
            pb.ModelInstanceGroup.KIND_AUTO,
        ):
            yield error(
                model.name,
                file,
                f"{where}.gpus",
                "gpus are listed for a group that is not KIND_GPU",
                "remove gpus, or set kind: KIND_GPU",
            )
        if gpus is not None and gpus > 0:
            beyond = [g for g in group.gpus if g >= gpus]
            if beyond:
                yield error(
                    model.name,
                    file,
                    f"{where}.gpus",
                    f"GPU {beyond[0]} does not exist on {ctx.instance_type} ({gpus} GPU(s))",
                    f"use GPU ids 0..{gpus - 1}, or leave gpus out to use all of them",
                )
        if group.kind == pb.ModelInstanceGroup.KIND_GPU and gpus == 0:
            if model.backend == "python":
                yield warning(
                    model.name,
                    file,
                    f"{where}.kind",
                    f"KIND_GPU on a python-backend model, but {ctx.instance_type} has no GPU",
                    "use kind: KIND_CPU on CPU instances (python models run on the CPU anyway)",
                )
            else:
                yield error(
                    model.name,
                    file,
                    f"{where}.kind",
                    f"KIND_GPU, but {ctx.instance_type} has no GPU; Triton refuses to load it",
                    "use kind: KIND_CPU, or a GPU instance type",
                )
        if model.kind == "ensemble":
            yield error(
                model.name,
                file,
                where,
                "an ensemble takes no instance_group (its steps run on their own instances)",
                "remove instance_group from the ensemble; set it on the composing models",
            )


_CONTROL_KINDS = {
    pb.ModelSequenceBatching.Control.CONTROL_SEQUENCE_START: "START",
    pb.ModelSequenceBatching.Control.CONTROL_SEQUENCE_READY: "READY",
    pb.ModelSequenceBatching.Control.CONTROL_SEQUENCE_END: "END",
    pb.ModelSequenceBatching.Control.CONTROL_SEQUENCE_CORRID: "CORRID",
}
_CORRID_TYPES = {pb.TYPE_UINT64, pb.TYPE_INT64, pb.TYPE_UINT32, pb.TYPE_INT32, pb.TYPE_STRING}


@model_rule
def sequence_controls(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    if not model.config.HasField("sequence_batching"):
        return
    file = ctx.file_of(model)
    seen: dict[int, str] = {}
    for index, control_input in enumerate(model.config.sequence_batching.control_input):
        where = f"sequence_batching.control_input[{index}]"
        if not control_input.name:
            yield error(model.name, file, f"{where}.name", "control input has no name", "name it")
        if len(control_input.control) != 1:
            yield error(
                model.name,
                file,
                f"{where}.control",
                f'control input "{control_input.name}" must have exactly one control '
                f"(has {len(control_input.control)})",
                "declare one control per control input",
            )
        for control in control_input.control:
            label = _CONTROL_KINDS.get(control.kind, str(control.kind))
            if control.kind in seen:
                yield error(
                    model.name,
                    file,
                    f"{where}.control",
                    f"control {label} is declared twice "
                    f'("{seen[control.kind]}" and "{control_input.name}")',
                    "declare each control kind once",
                )
            seen[control.kind] = control_input.name
            if control.kind == pb.ModelSequenceBatching.Control.CONTROL_SEQUENCE_CORRID:
                if control.data_type not in _CORRID_TYPES:
                    yield error(
                        model.name,
                        file,
                        f"{where}.control.data_type",
                        "the CORRID control needs data_type UINT64, INT64, UINT32, INT32 or STRING",
                        "set data_type: TYPE_UINT64",
                    )
                continue
            values = [
                len(control.int32_false_true),
                len(control.fp32_false_true),
                len(control.bool_false_true),
            ]
            if sorted(values) != [0, 0, 2]:
                yield error(
                    model.name,
                    file,
                    f"{where}.control",
                    f"control {label} needs exactly one of int32_false_true, fp32_false_true, "
                    "bool_false_true, with two values",
                    "e.g. int32_false_true: [ 0, 1 ]",
                )


_NEEDS_ONE_SOURCE = {
    pb.BatchInput.BATCH_ELEMENT_COUNT,
    pb.BatchInput.BATCH_ACCUMULATED_ELEMENT_COUNT,
    pb.BatchInput.BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO,
    pb.BatchInput.BATCH_MAX_ELEMENT_COUNT_AS_SHAPE,
    pb.BatchInput.BATCH_ITEM_SHAPE,
    pb.BatchInput.BATCH_ITEM_SHAPE_FLATTEN,
}


@model_rule
def batch_inputs_outputs(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    file = ctx.file_of(model)
    inputs = {t.name for t in model.inputs}
    outputs = {t.name for t in model.outputs}
    config = model.config
    if (config.batch_input or config.batch_output) and config.max_batch_size <= 0:
        # Triton loads such a config and never fills the batch inputs.
        yield warning(
            model.name,
            file,
            "batch_input" if config.batch_input else "batch_output",
            "batch inputs/outputs only apply to batched models, but max_batch_size is 0",
            "set max_batch_size > 0 or remove batch_input/batch_output",
        )
    for index, batch_input in enumerate(config.batch_input):
        where = f"batch_input[{index}]"
        if not batch_input.target_name:
            yield error(
                model.name,
                file,
                f"{where}.target_name",
                "batch input has no target_name",
                "name it",
            )
        if batch_input.data_type not in (pb.TYPE_FP32, pb.TYPE_INT32, pb.TYPE_INT64):
            yield error(
                model.name,
                file,
                f"{where}.data_type",
                "batch input data_type must be TYPE_FP32, TYPE_INT32 or TYPE_INT64",
                "set data_type: TYPE_INT32",
            )
        sources = list(batch_input.source_input)
        if batch_input.kind in _NEEDS_ONE_SOURCE and len(sources) != 1:
            yield error(
                model.name,
                file,
                f"{where}.source_input",
                f"batch input kind {pb.BatchInput.Kind.Name(batch_input.kind)} needs exactly "
                f"one source_input (has {len(sources)})",
                "name one model input in source_input",
            )
        for source in sources:
            if source not in inputs:
                yield error(
                    model.name,
                    file,
                    f"{where}.source_input",
                    f'source_input "{source}" is not an input of this model',
                    f"use one of: {', '.join(sorted(inputs)) or '(no inputs declared)'}",
                )
    for index, batch_output in enumerate(config.batch_output):
        where = f"batch_output[{index}]"
        for target in batch_output.target_name:
            if target not in outputs:
                yield error(
                    model.name,
                    file,
                    f"{where}.target_name",
                    f'target_name "{target}" is not an output of this model',
                    f"use one of: {', '.join(sorted(outputs)) or '(no outputs declared)'}",
                )
        if not batch_output.target_name:
            yield error(
                model.name,
                file,
                f"{where}.target_name",
                "batch output has no target_name",
                "name it",
            )
        sources = list(batch_output.source_input)
        if len(sources) != 1 or sources[0] not in inputs:
            yield error(
                model.name,
                file,
                f"{where}.source_input",
                "BATCH_SCATTER_WITH_INPUT_SHAPE needs exactly one source_input naming a "
                "model input",
                "name one model input in source_input",
            )
