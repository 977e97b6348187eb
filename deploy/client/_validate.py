"""Checks a request against the model's declared tensors before it is sent.

Only runs when the manifest describes the model; every error names the tensor.
Shapes honour -1 (any size) and, for models with `max_batch_size > 0`, a
leading batch dimension of 1..max_batch_size.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from deploy.client._errors import InvalidInputError, PayloadTooLargeError
from deploy.client._manifest import ModelInfo, TensorSpec
from deploy.client.codec import EncodedInput


def check_input_names(info: ModelInfo, names: Iterable[str]) -> None:
    given = list(names)
    declared = [spec.name for spec in info.inputs]
    unknown = [name for name in given if name not in declared]
    if unknown:
        raise InvalidInputError(
            f"model {info.name!r} has no input {unknown[0]!r}",
            where=f"input {unknown[0]!r}",
            fix=f"its inputs are {', '.join(declared) or 'none'}",
        )
    required = [spec.name for spec in info.inputs if not spec.optional]
    missing = [name for name in required if name not in given]
    if missing:
        raise InvalidInputError(
            f"model {info.name!r} needs input {missing[0]!r}",
            where=f"input {missing[0]!r}",
            fix=f"pass every required input: {', '.join(required)}",
        )


def check_shape(info: ModelInfo, spec: TensorSpec, encoded: EncodedInput) -> None:
    where = f"input {spec.name!r}"
    shape = encoded.shape
    declared = list(spec.shape)
    if info.max_batch_size > 0:
        if len(shape) != len(declared) + 1:
            raise InvalidInputError(
                f"has shape {list(shape)}; model {info.name!r} expects "
                f"[batch, {', '.join(map(str, declared))}]".replace(", ]", "]"),
                where=where,
                fix="add the leading batch dimension (for one item: array[None, ...])",
            )
        batch, shape = shape[0], shape[1:]
        if not 1 <= batch <= info.max_batch_size:
            raise InvalidInputError(
                f"has batch size {batch}; model {info.name!r} takes 1..{info.max_batch_size}",
                where=where,
                fix="split the request into smaller batches",
            )
    if len(shape) != len(declared) or any(
        want != -1 and want != got for want, got in zip(declared, shape, strict=True)
    ):
        raise InvalidInputError(
            f"has shape {list(encoded.shape)} but model {info.name!r} declares {declared}"
            + (" after the batch dimension" if info.max_batch_size > 0 else ""),
            where=where,
        )


def check_outputs(info: ModelInfo, outputs: Sequence[str]) -> None:
    declared = [spec.name for spec in info.outputs]
    for name in outputs:
        if name not in declared:
            raise InvalidInputError(
                f"model {info.name!r} has no output {name!r}",
                where=f"output {name!r}",
                fix=f"its outputs are {', '.join(declared) or 'none'}",
            )


def check_payload(
    size: int,
    limit: int,
    where: str,
    *,
    hosting: str | None = None,
    alternative: str | None = None,
    alternative_limit: int | None = None,
) -> None:
    if size > limit:
        raise PayloadTooLargeError(
            size,
            limit,
            where=where,
            hosting=hosting,
            alternative=alternative,
            alternative_limit=alternative_limit,
        )
