"""Rules on what the config points at: versions, model files, labels, warmup, environments."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePosixPath

from deploy.checkout import make_hint
from deploy.repository import Model, ModelVersion
from deploy.repository.backends import (
    FIL_MODEL_FILES,
    FIL_MODEL_TYPE_PARAMETER,
    OPTIONAL_DEFAULT_FILES,
    default_model_file,
    is_known_backend,
)
from deploy.repository.schema import model_config_pb2 as pb
from deploy.validation.diagnostics import Diagnostic, error, warning
from deploy.validation.registry import Context, model_rule

MODEL_DIR_VARIABLE = "$$TRITON_MODEL_DIRECTORY"


@model_rule
def versions_hold_the_model_file(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    if not model.versions:
        yield error(
            model.name,
            str(model.path),
            "",
            "no numeric version folder (e.g. 1/)",
            f"put the model files in {model.name}/1/",
        )
        return
    if model.kind == "ensemble" or model.inferred_from:
        return
    parameters = {key: value.string_value for key, value in model.config.parameters.items()}
    expected = default_model_file(
        model.platform, model.backend, model.config.default_model_filename, parameters
    )
    if expected is None:
        yield from _unchecked_model_file(ctx, model, parameters)
        return
    field = "default_model_filename" if model.config.default_model_filename else "backend"
    for version in _served_versions(model):
        if (version.path / expected).exists():
            continue
        fix = f"add {model.name}/{version.number}/{expected}" + (
            "" if model.config.default_model_filename else " or set default_model_filename"
        )
        if model.backend in OPTIONAL_DEFAULT_FILES and not model.config.default_model_filename:
            # The backend may build the file itself (DALI serializes a pipeline).
            yield warning(
                model.name,
                str(version.path),
                field,
                f"version {version.number} has no {expected}; the {model.backend} backend "
                "loads it unless it can build it from the folder's other files",
                fix,
            )
            continue
        if model.backend == "fil" and not model.config.default_model_filename:
            model_type = parameters.get(FIL_MODEL_TYPE_PARAMETER, "xgboost")
            fix += f' (the FIL backend looks for {expected} when model_type is "{model_type}")'
        yield error(
            model.name,
            str(version.path),
            field,
            f"version {version.number} has no {expected}, the file the "
            f"{model.backend or model.platform} backend loads",
            fix
            + (make_hint("; run `make models` for the examples") if expected == "model.pt" else ""),
        )


def _unchecked_model_file(
    ctx: Context, model: Model, parameters: dict[str, str]
) -> Iterator[Diagnostic]:
    """Say so when a model file cannot be checked, rather than claim one is missing."""
    if model.backend == "fil":
        model_type = parameters.get(FIL_MODEL_TYPE_PARAMETER, "")
        yield warning(
            model.name,
            ctx.file_of(model),
            f"parameters[{FIL_MODEL_TYPE_PARAMETER}]",
            f'FIL model_type "{model_type}" is not one deploy knows, so the model file could '
            "not be checked",
            f"use one of {', '.join(FIL_MODEL_FILES)}, or set default_model_filename",
        )
    elif model.backend and not is_known_backend(model.backend):
        yield warning(
            model.name,
            ctx.file_of(model),
            "backend",
            f'backend "{model.backend}" is not one deploy knows: the model file it loads '
            "could not be checked, and the SageMaker Triton image may not ship the backend",
            "check the spelling, make sure the image you deploy has this backend, and set "
            "default_model_filename to have the file checked",
        )


def _served_versions(model: Model) -> list[ModelVersion]:
    policy = model.config.version_policy
    which = policy.WhichOneof("policy_choice")
    versions = list(model.versions)
    if which == "all":
        return versions
    if which == "specific":
        wanted = set(policy.specific.versions)
        return [v for v in versions if v.number in wanted]
    count = policy.latest.num_versions if which == "latest" else 1
    return versions[-max(count, 1) :]


@model_rule
def version_policy(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    policy = model.config.version_policy
    if policy.WhichOneof("policy_choice") != "specific":
        return
    present = {v.number for v in model.versions}
    named = list(policy.specific.versions)
    # Triton loads the named versions that exist; with none of them it fails.
    report = error if not present.intersection(named) else warning
    for number in named:
        if number not in present:
            yield report(
                model.name,
                ctx.file_of(model),
                "version_policy.specific.versions",
                f"version {number} is named by version_policy but {model.name}/{number}/ "
                "does not exist",
                f"add the folder or list only existing versions ({sorted(present)})",
            )


@model_rule
def label_files(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    for index, tensor in enumerate(model.config.output):
        name = tensor.label_filename
        if not name:
            continue
        where = f"output[{index}].label_filename"
        if PurePosixPath(name).is_absolute() or ".." in PurePosixPath(name).parts:
            yield error(
                model.name,
                ctx.file_of(model),
                where,
                f'label file "{name}" is outside the model folder',
                "put the labels file in the model folder and name it relatively",
            )
        elif not (model.path / name).is_file():
            yield error(
                model.name,
                ctx.file_of(model),
                where,
                f'label file "{name}" does not exist in {model.name}/',
                f"add {model.name}/{name} (one label per line) or remove label_filename",
            )


@model_rule
def warmup_matches_inputs(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    declared = {t.name: t for t in model.config.input}
    file = ctx.file_of(model)
    for index, sample in enumerate(model.config.model_warmup):
        where = f"model_warmup[{index}]"
        if model.max_batch_size > 0 and not 1 <= sample.batch_size <= model.max_batch_size:
            yield error(
                model.name,
                file,
                f"{where}.batch_size",
                f"warmup batch_size {sample.batch_size} is outside 1..max_batch_size "
                f"({model.max_batch_size})",
                "use a batch_size between 1 and max_batch_size",
            )
        for name, value in sample.inputs.items():
            if name not in declared:
                yield error(
                    model.name,
                    file,
                    f"{where}.inputs[{name}]",
                    f'warmup input "{name}" is not a declared input',
                    f"use the declared inputs: {', '.join(sorted(declared))}",
                )
                continue
            tensor = declared[name]
            if value.data_type != tensor.data_type:
                yield error(
                    model.name,
                    file,
                    f"{where}.inputs[{name}].data_type",
                    f'warmup input "{name}" is {pb.DataType.Name(value.data_type)} but the '
                    f"input is {pb.DataType.Name(tensor.data_type)}",
                    f"set data_type: {pb.DataType.Name(tensor.data_type)}",
                )
            if not _dims_fit(list(value.dims), list(tensor.dims)):
                yield error(
                    model.name,
                    file,
                    f"{where}.inputs[{name}].dims",
                    f'warmup input "{name}" has dims {list(value.dims)} but the input '
                    f"declares {list(tensor.dims)}",
                    "give concrete dims that fit the declared ones (without the batch dimension)",
                )
        missing = [n for n, t in declared.items() if n not in sample.inputs and not t.optional]
        if missing:
            yield error(
                model.name,
                file,
                f"{where}.inputs",
                f"warmup sample gives no data for input(s) {', '.join(missing)}",
                "add a warmup input for every required input",
            )


def _dims_fit(given: list[int], declared: list[int]) -> bool:
    if len(given) != len(declared):
        return False
    return all(g > 0 and (d == -1 or d == g) for g, d in zip(given, declared, strict=True))


@model_rule
def execution_env(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    """Where Triton (as SageMaker runs it) finds the python backend's EXECUTION_ENV_PATH.

    `$$TRITON_MODEL_DIRECTORY` becomes the extracted model folder; an absolute
    path is read from the container's own file system (it may be created at run
    time, e.g. by a setup model); any other path is resolved against
    tritonserver's working directory, not the model folder (seen on the real
    tritonserver: "Failed to get the canonical path").
    """
    parameter = model.config.parameters.get("EXECUTION_ENV_PATH")
    if parameter is None:
        return
    value = parameter.string_value
    field = "parameters[EXECUTION_ENV_PATH]"
    file = ctx.file_of(model)
    ship = f"put the conda-pack archive in {model.name}/ and set {MODEL_DIR_VARIABLE}/<file>.tar.gz"
    if value.startswith(MODEL_DIR_VARIABLE):
        relative = PurePosixPath(value[len(MODEL_DIR_VARIABLE) :].lstrip("/"))
        path = model.path / relative
        if ".." in relative.parts and not path.resolve().is_relative_to(model.path.resolve()):
            yield error(
                model.name,
                file,
                field,
                f"EXECUTION_ENV_PATH points outside the model folder ({value}); the archive "
                "SageMaker extracts holds only the model folder",
                ship,
            )
        elif not path.exists():  # a conda-pack archive, or an environment already unpacked
            yield error(
                model.name,
                file,
                field,
                f"EXECUTION_ENV_PATH points at a missing archive ({value})",
                f"add the conda-pack archive to {model.name}/ and set "
                f"{MODEL_DIR_VARIABLE}/<file>.tar.gz",
            )
    elif PurePosixPath(value).is_absolute():
        yield warning(
            model.name,
            file,
            field,
            f"EXECUTION_ENV_PATH is an absolute path ({value}): it is not in the archive, and "
            "on SageMaker Triton reads it from the container's file system, so the model "
            "loads only if something creates that file first (e.g. a setup model)",
            f"{ship}, unless another model creates {value} at run time and loads first",
        )
    else:
        yield error(
            model.name,
            file,
            field,
            f"EXECUTION_ENV_PATH is a relative path ({value}), which Triton resolves against "
            "its working directory, not the model folder",
            f"set {MODEL_DIR_VARIABLE}/{value}, with the archive in {model.name}/",
        )


@model_rule
def bls_dependencies(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    for name in model.dependencies:
        if name == model.name:
            yield error(
                model.name,
                ctx.file_of(model),
                "parameters[deploy.dependencies]",
                "a model cannot depend on itself",
                "remove its own name from deploy.dependencies",
            )
        elif name not in ctx.repository.models:
            yield error(
                model.name,
                ctx.file_of(model),
                "parameters[deploy.dependencies]",
                f'dependency "{name}" is not a model in this repository',
                f"add {name}/ to the repository or remove it from deploy.dependencies",
            )
        elif ctx.repository.models[name].kind == "ensemble":
            yield error(
                model.name,
                ctx.file_of(model),
                "parameters[deploy.dependencies]",
                f'dependency "{name}" is an ensemble, which cannot be bundled into a BLS model',
                "call the ensemble's composing models from the BLS code instead",
            )
    if model.dependencies and model.backend != "python":
        yield warning(
            model.name,
            ctx.file_of(model),
            "parameters[deploy.dependencies]",
            "deploy.dependencies is meant for python-backend (BLS) models",
            "remove the parameter, or make sure the model loads its bundled dependencies",
        )
