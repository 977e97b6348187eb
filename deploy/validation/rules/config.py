"""Rules on config.pbtxt fields: identity, backend, tensors, batching, instances, sequences."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from deploy.repository import Model
from deploy.repository.backends import ENSEMBLE_PLATFORM, PLATFORM_BACKENDS, TYPED_BACKENDS
from deploy.repository.schema import model_config_pb2 as pb
from deploy.validation.diagnostics import Diagnostic, error, warning
from deploy.validation.instances import MAX_GPUS, gpu_count
from deploy.validation.registry import Context, model_rule


@model_rule
def name_matches_folder(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    # Triton accepts it: on a SageMaker multi-model endpoint the model is
    # registered under its TargetModel, whatever `name` says (seen on the real
    # tritonserver in MME mode).
    if model.config_name and model.config_name != model.name:
        yield warning(
            model.name,
            ctx.file_of(model),
            "name",
            f'name "{model.config_name}" differs from the folder name "{model.name}": Triton '
            "accepts it, and on a SageMaker multi-model endpoint clients call the model by its "
            f'TargetModel ("{model.name}-<hash>.tar.gz"; "{model.name}" in the manifest), '
            f'never "{model.config_name}"',
            f'set name: "{model.name}" (or remove name) so logs, BLS calls and the manifest '
            "agree on one name",
        )


# Files from which Triton fills in a missing backend when `platform` is one it
# does not know (core `AutoCompleteBackendFields`): those of backends it does
# not check platforms against.
_UNTYPED_BACKEND_FILES = {"model.py": "python", "model.xml": "openvino"}


@model_rule
def platform_and_backend(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    platform, backend = model.config.platform, model.config.backend
    file = ctx.file_of(model)
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
    if platform == ENSEMBLE_PLATFORM:
        if backend:
            yield error(
                model.name,
                file,
                "backend",
                f'an ensemble has no backend (got "{backend}")',
                "remove backend from the ensemble's config",
            )
        return
    known_platforms = sorted([*PLATFORM_BACKENDS, ENSEMBLE_PLATFORM])
    typed = TYPED_BACKENDS.get(backend)
    if not backend and platform not in PLATFORM_BACKENDS:
        if model.config.default_model_filename in _UNTYPED_BACKEND_FILES:
            return  # Triton fills in python/openvino, which accept any platform value
        yield error(
            model.name,
            file,
            "platform",
            f'unknown platform "{platform}"',
            f"use one of {', '.join(known_platforms)}, or set backend instead",
        )
    elif typed is not None and platform and PLATFORM_BACKENDS.get(platform) != typed:
        served_by = PLATFORM_BACKENDS.get(platform)
        yield error(
            model.name,
            file,
            "backend",
            f'platform "{platform}" is served by backend "{served_by}", not "{backend}"'
            if served_by
            else f'backend "{backend}" does not serve platform "{platform}"',
            f'set backend: "{served_by}" or remove one of the two fields'
            if served_by
            else "remove platform, or set the platform of this backend",
        )


def _tensor_fields(model: Model) -> Iterator[tuple[str, Any]]:
    for index, tensor in enumerate(model.config.input):
        yield f"input[{index}]", tensor
    for index, tensor in enumerate(model.config.output):
        yield f"output[{index}]", tensor


@model_rule
def tensors(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    """Triton's `ValidateModelInput`/`ValidateModelOutput`/`ValidateIOShape`."""
    file = ctx.file_of(model)
    yield from _duplicate_names(model, file)
    trt = model.config.platform == "tensorrt_plan"
    for where, tensor in _tensor_fields(model):
        if tensor.data_type == pb.TYPE_INVALID:
            yield error(
                model.name,
                file,
                f"{where}.data_type",
                f'"{tensor.name}" has no data_type',
                "set data_type, e.g. data_type: TYPE_FP32",
            )
        if not tensor.dims:
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
        if (
            where.startswith("input")
            and tensor.format in _THREE_DIM_FORMATS
            and len(tensor.dims) != 3
        ):
            yield error(
                model.name,
                file,
                f"{where}.format",
                f'"{tensor.name}" has format {pb.ModelInput.Format.Name(tensor.format)}, which '
                f"needs exactly 3 dims (has {len(tensor.dims)})",
                "give 3 dims (without the batch dimension), or remove format",
            )
        if tensor.is_shape_tensor and not trt:
            yield error(
                model.name,
                file,
                f"{where}.is_shape_tensor",
                f'"{tensor.name}" is a shape tensor, which only the TensorRT platform supports',
                "remove is_shape_tensor",
            )
        if tensor.is_non_linear_format_io:
            if not trt:
                yield error(
                    model.name,
                    file,
                    f"{where}.is_non_linear_format_io",
                    f'"{tensor.name}" uses a non-linear IO format, which only the TensorRT '
                    "platform supports",
                    "remove is_non_linear_format_io",
                )
            elif len(tensor.dims) != 3:
                yield error(
                    model.name,
                    file,
                    f"{where}.dims",
                    f'"{tensor.name}" uses a non-linear IO format, which needs exactly 3 dims',
                    "give 3 dims, or remove is_non_linear_format_io",
                )


_THREE_DIM_FORMATS = {pb.ModelInput.FORMAT_NHWC, pb.ModelInput.FORMAT_NCHW}


def _duplicate_names(model: Model, file: str) -> Iterator[Diagnostic]:
    """Tensors of one name. Triton loads the model and keeps the first entry per name
    (core `Model::Init`), but counts every non-optional input as required, while a
    request carries one tensor per name (`InferenceRequest::ValidateRequestInputs`):
    with more required inputs than names, it refuses every request."""
    required = sum(1 for tensor in model.config.input if not tensor.optional)
    names = {tensor.name for tensor in model.config.input}
    unservable = required > len(names)
    for group, entries in (("input", model.config.input), ("output", model.config.output)):
        seen: set[str] = set()
        for index, tensor in enumerate(entries):
            where = f"{group}[{index}]"
            if not tensor.name:
                yield error(model.name, file, f"{where}.name", f"{group} has no name", "name it")
            elif tensor.name in seen and group == "input" and unservable:
                refused = (
                    f'"expected {len(entries)} inputs but got {len(names)} inputs"'
                    if required == len(entries)
                    else '"expected number of inputs between ..."'
                )
                yield error(
                    model.name,
                    file,
                    f"{where}.name",
                    f'duplicate input name "{tensor.name}": Triton loads the model, then '
                    f"refuses every request ({refused}): the config requires {required} "
                    f"inputs, and a request carries at most {len(names)}, one per name",
                    "give every input a distinct name, or remove the duplicate",
                )
            elif tensor.name in seen:
                # Triton loads it, keeps the first entry per name and serves it.
                yield warning(
                    model.name,
                    file,
                    f"{where}.name",
                    f'duplicate {group} name "{tensor.name}": Triton keeps only one of them',
                    f"give every {group} a distinct name, or remove the duplicate",
                )
            seen.add(tensor.name)


def _element_count(dims: list[int]) -> int:
    """Triton's `GetElementCount`: -1 with any variable dimension, 0 for no dims."""
    if -1 in dims:
        return -1
    return math.prod(dims) if dims else 0


def _trunks(dims: list[int]) -> list[int]:
    """Element counts of the runs between variable-size (-1) dimensions."""
    counts, current = [], 1
    for dim in dims:
        if dim == -1:
            counts.append(current)
            current = 1
        else:
            current *= dim
    return [*counts, current]


def _reshape(model: Model, file: str, where: str, tensor: Any) -> Iterator[Diagnostic]:
    """Triton's reshape checks (core `ValidateIOShape`)."""
    dims, shape = list(tensor.dims), list(tensor.reshape.shape)
    field = f"{where}.reshape.shape"
    if not shape and model.max_batch_size == 0:
        yield error(
            model.name,
            file,
            field,
            f'"{tensor.name}" has an empty reshape, but a model without batching '
            "(max_batch_size: 0) cannot have scalar tensors",
            "reshape to [ 1 ], or set max_batch_size > 0",
        )
        return
    for dim in shape:
        if dim == 0 or dim < -1:
            yield error(
                model.name,
                file,
                field,
                f'"{tensor.name}" reshape has invalid dimension {dim}',
                "use a positive size, or -1 for a variable-size dimension",
            )
            return
    if not dims:
        return  # reported above
    dims_size, shape_size = _element_count(dims), _element_count(shape)
    if dims_size != shape_size and (shape_size != 0 or dims_size != 1):
        yield error(
            model.name,
            file,
            field,
            f'"{tensor.name}" dims {dims} and reshape {shape} hold different numbers of elements',
            "make reshape hold as many elements as dims, with -1 exactly where dims has -1",
        )
    elif dims_size == -1 and _trunks(dims) != _trunks(shape):
        yield error(
            model.name,
            file,
            field,
            f'"{tensor.name}" dims {dims} and reshape {shape} differ between their '
            "variable-size (-1) dimensions",
            "keep -1 in the same places, and equal element counts between them "
            "(e.g. [2, 4, -1] -> [8, -1])",
        )


_KIND = pb.ModelInstanceGroup


@model_rule
def instance_groups(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    """Triton's `NormalizeInstanceGroup` and `ValidateInstanceGroup` for SageMaker instances."""
    file = ctx.file_of(model)
    gpus = gpu_count(ctx.instance_type) if ctx.instance_type else None
    limit = gpus if gpus else MAX_GPUS  # without --instance: what the largest instance has
    on = (
        f"on {ctx.instance_type} ({gpus} GPU(s))"
        if gpus
        else (f"on any SageMaker instance (at most {MAX_GPUS} GPUs)")
    )
    for index, group in enumerate(model.config.instance_group):
        where = f"instance_group[{index}]"
        if model.kind == "ensemble":
            yield error(
                model.name,
                file,
                where,
                "an ensemble takes no instance_group (its steps run on their own instances)",
                "remove instance_group from the ensemble; set it on the composing models",
            )
            continue
        if group.count < 0:
            # Triton replaces a count below 1 with its default (1, or 2 for ONNX/TF on CPU).
            yield warning(
                model.name,
                file,
                f"{where}.count",
                f"instance count is negative ({group.count}); Triton uses its default count",
                "use a count of 1 or more, or leave count out",
            )
        if group.gpus and group.kind in (_KIND.KIND_CPU, _KIND.KIND_MODEL):
            yield error(
                model.name,
                file,
                f"{where}.gpus",
                f"gpus are listed for a {_KIND.Kind.Name(group.kind)} group",
                "remove gpus, or set kind: KIND_GPU",
            )
            continue
        if group.kind == _KIND.KIND_AUTO and group.gpus and gpus == 0:
            # KIND_AUTO without GPUs becomes KIND_CPU, which must list no GPU.
            yield error(
                model.name,
                file,
                f"{where}.gpus",
                f"KIND_AUTO with gpus becomes KIND_CPU on {ctx.instance_type} (no GPU), and a "
                "KIND_CPU group must not list gpus",
                "remove gpus, or use a GPU instance type",
            )
            continue
        if group.kind == _KIND.KIND_GPU and gpus == 0:
            yield error(
                model.name,
                file,
                f"{where}.kind",
                f"KIND_GPU, but {ctx.instance_type} has no GPU; Triton refuses to load it",
                "use kind: KIND_CPU, or a GPU instance type",
            )
            continue
        beyond = [g for g in group.gpus if g < 0 or g >= limit]
        if beyond and group.kind == _KIND.KIND_GPU:
            yield error(
                model.name,
                file,
                f"{where}.gpus",
                f"GPU {beyond[0]} does not exist {on}",
                f"use GPU ids 0..{limit - 1}, or leave gpus out to use all of them",
            )
        elif beyond:  # KIND_AUTO falls back to KIND_CPU, which then refuses the gpus
            yield error(
                model.name,
                file,
                f"{where}.gpus",
                f"GPU {beyond[0]} does not exist {on}; KIND_AUTO then becomes KIND_CPU, which "
                "must not list gpus",
                f"use GPU ids 0..{limit - 1}, or leave gpus out",
            )
        if group.profile and model.config.platform != "tensorrt_plan":
            yield error(
                model.name,
                file,
                f"{where}.profile",
                "profile is only supported for TensorRT models",
                "remove profile",
            )
        elif any(not p.isdigit() for p in group.profile):
            yield error(
                model.name,
                file,
                f"{where}.profile",
                "profile entries must be non-negative integers (TensorRT optimization "
                "profile indexes)",
                'use e.g. profile: [ "0" ]',
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
            # Triton loads it; the backend then gets an input with an empty name.
            yield warning(
                model.name,
                file,
                f"{where}.target_name",
                "batch input has no target_name, so the model receives it under an empty name",
                "set target_name to the model input it feeds",
            )
        if batch_input.data_type not in (pb.TYPE_FP32, pb.TYPE_INT32):
            yield error(
                model.name,
                file,
                f"{where}.data_type",
                "batch input data_type must be TYPE_INT32 or TYPE_FP32",
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
        targets: set[str] = set()
        for target in batch_output.target_name:
            if target in targets:
                yield error(
                    model.name,
                    file,
                    f"{where}.target_name",
                    f'target_name "{target}" is given twice',
                    "list each output once",
                )
            targets.add(target)
            if target not in outputs:
                yield error(
                    model.name,
                    file,
                    f"{where}.target_name",
                    f'target_name "{target}" is not an output of this model',
                    f"use one of: {', '.join(sorted(outputs)) or '(no outputs declared)'}",
                )
        if not batch_output.target_name:
            # Seen on the real tritonserver: loading this config crashes it.
            yield error(
                model.name,
                file,
                f"{where}.target_name",
                "batch output has no target_name (Triton crashes loading it)",
                "name the model output(s) it scatters in target_name",
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
