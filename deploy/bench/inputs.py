"""Request inputs for a load test: generated from the model's tensor specs, or given.

Generated inputs follow the manifest (names, datatypes, shapes): a variable
dimension (-1) becomes 1 unless `--shape NAME=DIMS` says otherwise, and a
model that batches gets `batch` rows in front. Values are random (seeded)
so a model cannot answer from a cache of identical requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from deploy.client import ModelInfo, Tensor
from deploy.errors import BenchError

_DTYPES: dict[str, str] = {
    "BOOL": "bool",
    "INT8": "i1",
    "INT16": "<i2",
    "INT32": "<i4",
    "INT64": "<i8",
    "UINT8": "u1",
    "UINT16": "<u2",
    "UINT32": "<u4",
    "UINT64": "<u8",
    "FP16": "<f2",
    "FP32": "<f4",
    "FP64": "<f8",
    "BF16": "<f4",  # float32 values, rounded to bfloat16 by the SDK
}


def parse_shapes(specs: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """`NAME=DIMS` (DIMS like `3x224x224`, without the batch dimension) per input."""
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        name, _, dims = spec.partition("=")
        try:
            shape = tuple(int(d) for d in dims.lower().split("x")) if dims else ()
        except ValueError:
            shape = ()
        if not name or not shape or any(d < 1 for d in shape):
            raise BenchError(
                f"--shape {spec!r} is not NAME=DIMS",
                where="--shape",
                fix="give the input's dimensions without the batch one, e.g. INPUT0=3x224x224",
            )
        shapes[name] = shape
    return shapes


def generate_inputs(
    info: ModelInfo,
    *,
    batch: int = 1,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    seed: int = 0,
) -> dict[str, np.ndarray[Any, Any]]:
    """Inputs for every required input of `info`, `batch` rows when the model batches."""
    shapes = dict(shapes or {})
    where = f"model {info.name!r}"
    if info.max_batch_size == 0 and batch != 1:
        raise BenchError(
            f"--batch {batch}: the model does not batch (max_batch_size 0)",
            where=where,
            fix="leave out --batch, or give batched inputs with --input",
        )
    if info.max_batch_size and batch > info.max_batch_size:
        raise BenchError(
            f"--batch {batch} is over the model's max_batch_size {info.max_batch_size}",
            where=where,
            fix=f"use --batch {info.max_batch_size} or less",
        )
    unknown = sorted(set(shapes) - {spec.name for spec in info.inputs})
    if unknown:
        raise BenchError(
            f"--shape names no input of the model: {', '.join(unknown)}",
            where=where,
            fix=f"its inputs: {', '.join(spec.name for spec in info.inputs)}",
        )
    rng = np.random.default_rng(seed)
    lead = [batch] if info.max_batch_size > 0 else []
    inputs: dict[str, np.ndarray[Any, Any]] = {}
    for spec in info.inputs:
        if spec.optional and spec.name not in shapes:
            continue
        dims = shapes.get(spec.name) or tuple(d if d > 0 else 1 for d in spec.shape)
        if len(dims) != len(spec.shape) or any(
            want > 0 and have != want for have, want in zip(dims, spec.shape, strict=True)
        ):
            raise BenchError(
                f"--shape {spec.name}={'x'.join(map(str, dims))} does not fit the declared "
                f"shape {list(spec.shape)}",
                where=where,
                fix="only the -1 dimensions may be chosen",
            )
        shape = [*lead, *dims]
        if spec.datatype == "BYTES":
            inputs[spec.name] = np.full(shape, b"bench", dtype=np.object_)
        elif spec.datatype == "BOOL":
            inputs[spec.name] = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif spec.datatype.startswith(("FP", "BF")):
            inputs[spec.name] = rng.random(size=shape).astype(np.dtype(_DTYPES[spec.datatype]))
        else:
            inputs[spec.name] = rng.integers(0, 8, size=shape).astype(
                np.dtype(_DTYPES[spec.datatype])
            )
    return inputs


def items_per_request(info: ModelInfo | None, inputs: Mapping[str, Any]) -> int:
    """Inferences one request carries: its batch rows when the model batches, else 1."""
    if info is None or info.max_batch_size == 0 or not inputs:
        return 1
    first = next(iter(inputs.values()))
    array = first.data if isinstance(first, Tensor) else first
    shape = np.shape(array)
    return int(shape[0]) if shape else 1
