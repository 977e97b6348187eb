"""numpy dtypes as Triton datatypes (the correspondence of tritonclient's `np_to_triton_dtype`)."""

from __future__ import annotations

from typing import Any

# numpy kind + item size -> Triton's TYPE_* name; bytes and objects are TYPE_STRING.
NUMPY_TO_TRITON: dict[str, str] = {
    "b1": "TYPE_BOOL",
    "u1": "TYPE_UINT8",
    "u2": "TYPE_UINT16",
    "u4": "TYPE_UINT32",
    "u8": "TYPE_UINT64",
    "i1": "TYPE_INT8",
    "i2": "TYPE_INT16",
    "i4": "TYPE_INT32",
    "i8": "TYPE_INT64",
    "f2": "TYPE_FP16",
    "f4": "TYPE_FP32",
    "f8": "TYPE_FP64",
}

# ONNX TensorProto type names that differ from Triton's TYPE_* names.
ONNX_TYPE_NAMES: dict[str, str] = {
    "FLOAT": "FP32",
    "DOUBLE": "FP64",
    "FLOAT16": "FP16",
    "BFLOAT16": "BF16",
}


def onnx_triton_type(onnx_type_name: str) -> str:
    """Triton's TYPE_* name for an ONNX element type name (may not exist in the schema)."""
    return "TYPE_" + ONNX_TYPE_NAMES.get(onnx_type_name, onnx_type_name)


def triton_type(dtype: Any) -> str | None:
    """Triton's TYPE_* name for a numpy dtype, or None when Triton has none."""
    import numpy as np

    resolved = np.dtype(dtype)
    if resolved.kind in "OS":
        return "TYPE_STRING"
    return NUMPY_TO_TRITON.get(f"{resolved.kind}{resolved.itemsize}")
