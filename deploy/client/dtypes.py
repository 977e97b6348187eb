"""Triton v2 datatypes and their numpy counterparts.

numpy has no bfloat16. BF16 tensors travel as their raw 16-bit patterns: the
SDK accepts a `uint16` array of bit patterns, a float32 array (rounded to the
nearest bfloat16, ties to even, by `to_bfloat16`) when the model's metadata
says BF16, or an `ml_dtypes.bfloat16` array (used as bits, without importing
ml_dtypes). BF16 outputs come back as `uint16` bit patterns; `from_bfloat16`
widens them to float32 exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from deploy.client._errors import InvalidInputError
from deploy.client.manifest import DATATYPES as MANIFEST_DATATYPES

# Fixed-size datatypes, little-endian as the protocol sends them.
FIXED_DTYPES: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype(np.bool_),
    "INT8": np.dtype("i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "UINT8": np.dtype("u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
    "BF16": np.dtype("<u2"),
}
# Every datatype the manifest contract names has a dtype here (BYTES: numpy objects).
DATATYPES: frozenset[str] = MANIFEST_DATATYPES

_BY_KIND_SIZE = {
    ("i", 1): "INT8",
    ("i", 2): "INT16",
    ("i", 4): "INT32",
    ("i", 8): "INT64",
    ("u", 1): "UINT8",
    ("u", 2): "UINT16",
    ("u", 4): "UINT32",
    ("u", 8): "UINT64",
    ("f", 2): "FP16",
    ("f", 4): "FP32",
    ("f", 8): "FP64",
}


def is_bfloat16(dtype: np.dtype[Any]) -> bool:
    """True for ml_dtypes' bfloat16 (recognised by name, so ml_dtypes stays optional)."""
    # dtype.name is slow to compute: test the cheap attributes first.
    return dtype.itemsize == 2 and dtype.kind not in "iufbOSU" and dtype.name == "bfloat16"


# Native little-endian dtypes → datatype: one dict lookup on the hot path.
_BY_DTYPE: dict[np.dtype[Any], str] = {
    dtype: name for name, dtype in FIXED_DTYPES.items() if name != "BF16"
}


def datatype_of(array: np.ndarray[Any, Any], *, where: str) -> str:
    """The v2 datatype an array travels as when no metadata says otherwise."""
    dtype = array.dtype
    known = _BY_DTYPE.get(dtype)
    if known is not None:
        return known
    if is_bfloat16(dtype):
        return "BF16"
    if dtype.kind in "OSU":
        return "BYTES"
    if dtype.kind == "b":
        return "BOOL"
    name = _BY_KIND_SIZE.get((dtype.kind, dtype.itemsize))
    if name is None:
        raise InvalidInputError(
            f"numpy dtype {dtype} has no Triton datatype",
            where=where,
            fix="convert it to a bool, integer, float, bytes or str array",
        )
    return name


def to_bfloat16(values: Any) -> np.ndarray[Any, np.dtype[np.uint16]]:
    """Round float32 values to bfloat16 bit patterns (nearest, ties to even)."""
    floats = np.ascontiguousarray(values, dtype=np.float32)
    bits = floats.view(np.uint32)
    rounded = (bits + (((bits >> 16) & 1) + np.uint32(0x7FFF))) >> 16
    # A NaN must stay a NaN (rounding could carry into the sign bit): keep a quiet NaN.
    quiet_nan = ((bits >> 16) & np.uint32(0x8000)) | np.uint32(0x7FC0)
    return np.where(np.isnan(floats), quiet_nan, rounded).astype(np.uint16)


def from_bfloat16(bits: Any) -> np.ndarray[Any, np.dtype[np.float32]]:
    """Widen bfloat16 bit patterns (uint16) to float32; exact."""
    patterns = np.ascontiguousarray(bits, dtype=np.uint16)
    return (patterns.astype(np.uint32) << 16).view(np.float32)
