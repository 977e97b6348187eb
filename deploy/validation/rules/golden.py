"""Golden cases (`<model>/golden/`) must fit the model's declared inputs and outputs.

A case that names a tensor the model lacks, or holds the wrong datatype or
shape, would fail at release time with Triton's request error; here it fails
offline, naming the case file. The format is `deploy.repository.golden`'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from deploy.repository import Model, Tensor
from deploy.repository.golden import (
    FORMAT_HINT,
    GOLDEN_FOLDER,
    TOLERANCE_FILE,
    GoldenCase,
    GoldenError,
    case_files,
    datatype_of,
    load_case,
    read_tolerance,
)
from deploy.validation.diagnostics import Diagnostic, error
from deploy.validation.registry import Context, model_rule


@model_rule
def golden_cases_fit_the_model(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    tolerance: dict[str, Any] = {}
    try:
        tolerance = read_tolerance(model.path / GOLDEN_FOLDER / TOLERANCE_FILE)
    except GoldenError as exc:
        yield _unreadable(model, exc)
    for path in case_files(model.path):
        try:
            case = load_case(path, tolerance)
        except GoldenError as exc:
            yield _unreadable(model, exc)
            continue
        yield from _fit(model, case, "input", case.inputs, model.inputs)
        yield from _fit(model, case, "output", case.outputs, model.outputs)


def _unreadable(model: Model, exc: GoldenError) -> Diagnostic:
    where = exc.where or str(model.path / GOLDEN_FOLDER)
    return error(model.name, where, "", exc.message, exc.fix or FORMAT_HINT)


def _fit(
    model: Model,
    case: GoldenCase,
    role: str,
    arrays: dict[str, Any],
    declared: tuple[Tensor, ...],
) -> Iterator[Diagnostic]:
    where = str(case.path)
    by_name = {tensor.name: tensor for tensor in declared}
    for name in sorted(set(arrays) - set(by_name)):
        yield error(
            model.name,
            where,
            f"{role}.{name}",
            f"the model has no {role} named {name!r} (its {role}s: "
            f"{', '.join(sorted(by_name)) or 'none'})",
            f"rename it to one of the model's {role}s, or remove it from the case",
        )
    if role == "input":
        for tensor in declared:
            if tensor.name not in arrays and not tensor.optional:
                yield error(
                    model.name,
                    where,
                    f"input.{tensor.name}",
                    f"the case gives no value for the required input {tensor.name!r}",
                    f"add input.{tensor.name} ({tensor.datatype}, shape "
                    f"{_expected_shape(model, tensor)}) to the case",
                )
    for name, array in sorted(arrays.items()):
        if name not in by_name:
            continue
        tensor = by_name[name]
        stored = datatype_of(array)
        wanted = "FP32" if tensor.datatype == "BF16" else tensor.datatype
        if tensor.datatype and stored != wanted:
            yield error(
                model.name,
                where,
                f"{role}.{name}",
                f"{role} {name!r} is {stored}, the model declares {tensor.datatype}",
                f"store it as {wanted} (numpy {array.dtype.name} -> the declared type)"
                if wanted != "BYTES"
                else "store it as strings or bytes",
            )
        if not _shape_fits(model, tensor, tuple(array.shape)):
            yield error(
                model.name,
                where,
                f"{role}.{name}",
                f"{role} {name!r} has shape {list(array.shape)}, the model takes "
                f"{_expected_shape(model, tensor)}",
                "record the case again with `deploy invoke --record-golden`, or reshape it",
            )


def _expected_shape(model: Model, tensor: Tensor) -> str:
    dims = ["any" if dim < 0 else str(dim) for dim in tensor.shape]
    if model.max_batch_size > 0:
        dims.insert(0, f"batch 1..{model.max_batch_size}")
    return "[" + ", ".join(dims) + "]"


def _shape_fits(model: Model, tensor: Tensor, shape: tuple[int, ...]) -> bool:
    if model.max_batch_size > 0:
        if not shape or not 1 <= shape[0] <= model.max_batch_size:
            return False
        shape = shape[1:]
    if len(shape) != len(tensor.shape):
        return False
    return all(dim < 0 or dim == got for dim, got in zip(tensor.shape, shape, strict=True))
