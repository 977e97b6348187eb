"""KServe v2 JSON tensors ⇄ Triton's binary tensor protocol, without numpy.

The Lambda runtime has boto3 but not numpy; JSON headers go through
`fast_json`. Tensors are little-endian,
row-major; BYTES elements are a 4-byte little-endian length then the bytes.
Triton's SageMaker frontend answered JSON-only requests to python models with
"output tensor shape does not match size of output", so requests always go
out binary and ask for binary outputs.
"""

from __future__ import annotations

import array
import base64
import math
import struct
import sys
from typing import Any

from . import fast_json
from .request import (
    BINARY_CONTENT_TYPE,
    HEADER_SIZE_PARAM,
    RequestError,
    check_request,
    json_header_size,
)

__all__ = ["BINARY_CONTENT_TYPE", "HEADER_SIZE_PARAM", "decode_response", "encode_request"]

# v2 datatype → struct format character (BF16 and BYTES are handled apart).
_FORMATS = {
    "BOOL": "?",
    "UINT8": "B",
    "UINT16": "H",
    "UINT32": "I",
    "UINT64": "Q",
    "INT8": "b",
    "INT16": "h",
    "INT32": "i",
    "INT64": "q",
    "FP16": "e",
    "FP32": "f",
    "FP64": "d",
}
DATATYPES = frozenset({*_FORMATS, "BF16", "BYTES"})


class TensorError(RequestError):
    """A request tensor whose data cannot be encoded (the client's fault: HTTP 400)."""


# Element types `array` packs natively (much faster than struct for large tensors).
_ARRAY_CODES = {
    "UINT8": "B",
    "UINT16": "H",
    "UINT32": "I",
    "UINT64": "Q",
    "INT8": "b",
    "INT16": "h",
    "INT32": "i",
    "INT64": "q",
    "FP32": "f",
    "FP64": "d",
}
# Only where `array`'s C type has the wire size (it is platform-defined in principle).
_ARRAY_CODES = {
    datatype: code
    for datatype, code in _ARRAY_CODES.items()
    if array.array(code).itemsize == struct.calcsize(f"<{_FORMATS[datatype]}")
}
_SWAP = sys.byteorder != "little"


def _elements(name: str, shape: list[int], data: Any) -> list[Any]:
    """Row-major elements of flat or nested list data (a scalar is one element).

    KServe v2 takes a tensor flat or in its natural nesting: nested data must
    nest exactly as `shape` says, every list at a depth of that dimension's
    length, so ragged data is refused. One pass over the lists; the elements
    themselves are checked as they are packed.
    """
    if not isinstance(data, list):
        return [data]
    if not data or not isinstance(data[0], list):
        return data
    level: list[Any] = [data]
    for depth, extent in enumerate(shape):
        below: list[Any] = []
        for item in level:
            if not isinstance(item, list) or len(item) != extent:
                found = f"a list of {len(item)}" if isinstance(item, list) else "a scalar"
                raise TensorError(
                    f"input {name!r}: data nests unlike shape {shape}: dimension {depth}"
                    f" needs lists of {extent}, found {found} (send the data flat,"
                    " row-major, or nested exactly as the shape)"
                )
            below.extend(item)
        level = below
    return level


def encode_tensor(name: str, datatype: str, shape: list[int], data: Any) -> bytes:
    """Raw bytes of one v2 JSON input (`data` flat or nested as `shape`, row-major)."""
    if datatype not in DATATYPES:
        raise TensorError(f"input {name!r}: unknown datatype {datatype!r}")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise TensorError(f"input {name!r}: shape must be a list of non-negative integers")
    values = _elements(name, shape, data)
    expected = math.prod(shape)
    if len(values) != expected:
        raise TensorError(
            f"input {name!r}: shape {shape} holds {expected} elements, data has {len(values)}"
        )
    try:
        if datatype == "BYTES":
            return b"".join(_encode_bytes_element(v) for v in values)
        if datatype == "BF16":
            return b"".join(_bf16(v) for v in values)
        if datatype == "BOOL" and not all(isinstance(v, bool) for v in values):
            raise TensorError(f"input {name!r}: BOOL data must be true/false")
        code = _ARRAY_CODES.get(datatype)
        if code is None:  # BOOL, FP16
            return struct.pack(f"<{len(values)}{_FORMATS[datatype]}", *values)
        return _packed(code, _FORMATS[datatype], values)
    except (struct.error, TypeError, OverflowError) as exc:
        raise TensorError(f"input {name!r}: data does not fit {datatype}: {exc}") from exc
    except UnicodeEncodeError as exc:  # a lone surrogate escaped into a JSON string
        raise TensorError(f"input {name!r}: data holds a string that is not Unicode") from exc


def _packed(code: str, fmt: str, values: list[Any]) -> bytes:
    """Little-endian bytes of numbers as `array(code, values)` packs them.

    One `Struct` packing the whole list takes about half `array`'s time for
    large tensors (and less than `struct.pack`, which copies the arguments).
    Where it refuses what `array` takes (a float too large for FP32 becomes
    infinity there) or refuses with another message, `array` decides, so the
    bytes and errors are `array`'s.
    """
    try:
        return struct.Struct(f"<{len(values)}{fmt}").pack(*values)
    except (struct.error, TypeError, OverflowError, ValueError):
        packed = array.array(code, values)
        if _SWAP:
            packed.byteswap()
        return packed.tobytes()


def _encode_bytes_element(value: Any) -> bytes:
    if isinstance(value, str):
        raw = value.encode("utf-8")
    elif isinstance(value, bool | int | float):
        raw = str(value).encode("utf-8")
    else:
        raise TypeError(f"BYTES elements must be strings, got {type(value).__name__}")
    return struct.pack("<I", len(raw)) + raw


def _bf16(element: Any) -> bytes:
    if not isinstance(element, int | float):  # float() would take "1.5" and "nan"
        raise TypeError(f"BF16 elements must be numbers, got {type(element).__name__}")
    value = float(element)
    # Round to nearest even on the upper 16 bits of the float32 pattern.
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    if math.isnan(value):
        return struct.pack("<H", 0x7FC0)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return struct.pack("<H", rounded & 0xFFFF)


def decode_tensor(datatype: str, shape: list[int], raw: bytes) -> tuple[list[Any], str | None]:
    """Flat v2 JSON data for raw bytes; the second item names an encoding if not plain."""
    count = math.prod(shape)
    if datatype == "BYTES":
        return _decode_bytes(raw, count)
    if datatype == "BF16":
        halves = struct.unpack(f"<{len(raw) // 2}H", raw)
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves], None
    if datatype not in _FORMATS:
        raise ValueError(f"unknown datatype {datatype!r} in the endpoint's response")
    code = _ARRAY_CODES.get(datatype)
    if code is None:  # BOOL, FP16
        values = list(struct.unpack(f"<{count}{_FORMATS[datatype]}", raw))
    elif _SWAP or len(raw) % array.array(code).itemsize:
        unpacked = array.array(code)
        unpacked.frombytes(raw)
        if _SWAP:
            unpacked.byteswap()
        values = unpacked.tolist()
    else:  # the floats straight from the answer's bytes, without copying them first
        values = memoryview(raw).cast(code).tolist()  # type: ignore[call-overload]  # code is a str
    if len(values) != count:
        raise ValueError(f"{datatype} output holds {len(values)} elements, shape says {count}")
    # A NaN or infinity makes the sum non-finite (so can overflow: then the list
    # comprehension below finds nothing to change). JSON has no NaN/Infinity;
    # KServe v2 clients expect strings for them.
    if datatype in _FLOATS and _maybe_non_finite(datatype, raw) and not math.isfinite(sum(values)):
        values = [v if math.isfinite(v) else str(v) for v in values]
    return values, None


_FLOATS = frozenset({"FP16", "FP32", "FP64"})
# Where the exponent's top bits sit: every NaN and infinity has this byte 0x7F or
# 0xFF (so do finite FP32 values ≥ 2**127 and FP64 ≥ 2**1016, which then pay the sum).
_HIGH_BYTE = {"FP32": 4, "FP64": 8}


def _maybe_non_finite(datatype: str, raw: bytes) -> bool:
    """False when no element of little-endian `raw` can be a NaN or infinity (a fast scan)."""
    step = _HIGH_BYTE.get(datatype)
    if step is None:  # FP16: the sum decides
        return True
    high = raw[step - 1 :: step]
    return b"\x7f" in high or b"\xff" in high


def _decode_bytes(raw: bytes, count: int) -> tuple[list[Any], str | None]:
    elements: list[bytes] = []
    offset = 0
    while offset < len(raw):
        (length,) = struct.unpack_from("<I", raw, offset)
        offset += 4
        elements.append(raw[offset : offset + length])
        offset += length
    if len(elements) != count:
        raise ValueError(f"BYTES output holds {len(elements)} elements, shape says {count}")
    try:
        return [e.decode("utf-8") for e in elements], None
    except UnicodeDecodeError:
        return [base64.b64encode(e).decode("ascii") for e in elements], "base64"


def encode_request(request: Any, *, extra: dict[str, Any] | None = None) -> tuple[bytes, str]:
    """A v2 JSON inference request → (binary body, content type); `RequestError` if malformed.

    `extra` parameters are added to the request's own (and win over them)."""
    checked = check_request(request)
    header_inputs: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    for tensor in checked.inputs:
        raw = encode_tensor(tensor.name, tensor.datatype, tensor.shape, tensor.data)
        header_inputs.append(
            {
                "name": tensor.name,
                "datatype": tensor.datatype,
                "shape": tensor.shape,
                "parameters": {**tensor.parameters, "binary_data_size": len(raw)},
            }
        )
        chunks.append(raw)
    header: dict[str, Any] = {"inputs": header_inputs}
    if checked.id is not None:
        header["id"] = checked.id
    parameters = checked.parameters
    if checked.outputs:
        header["outputs"] = [
            {"name": out.name, "parameters": {**out.parameters, "binary_data": True}}
            for out in checked.outputs
        ]
    else:
        parameters["binary_data_output"] = True
    header["parameters"] = {**parameters, **(extra or {})}
    header_bytes = fast_json.dumps(header)
    content_type = f"{BINARY_CONTENT_TYPE};{HEADER_SIZE_PARAM}={len(header_bytes)}"
    return b"".join([header_bytes, *chunks]), content_type


def decode_response(body: bytes, content_type: str) -> dict[str, Any]:
    """The endpoint's response (binary or JSON) → a v2 JSON response."""
    header_size = json_header_size(content_type)
    header_bytes = body if header_size is None else body[:header_size]
    response: dict[str, Any] = fast_json.loads(header_bytes)
    offset = len(header_bytes)
    for output in response.get("outputs", []):
        parameters = output.get("parameters") or {}
        size = parameters.pop("binary_data_size", None)
        if size is None:
            continue
        data, encoding = decode_tensor(
            output["datatype"], output["shape"], body[offset : offset + size]
        )
        offset += size
        output["data"] = data
        if encoding is not None:
            parameters["content_encoding"] = encoding
        if parameters:
            output["parameters"] = parameters
        else:
            output.pop("parameters", None)
    return response
