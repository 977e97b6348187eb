"""Triton's v2 binary protocol as SageMaker carries it.

A request is a JSON header followed by every input's raw bytes; the content
type says how long the header is:
`application/vnd.sagemaker-triton.binary+json;json-header-size=N`. Responses
use the same form when they carry binary outputs, else plain JSON.

Encoding copies each input once: the body is one `bytes.join` over the header
and memoryviews of the (contiguous, little-endian) arrays. BYTES elements are
4-byte little-endian lengths followed by the bytes (embedded NULs are kept).
Decoding never copies fixed-size outputs: they are read-only `np.frombuffer`
views into the response body. Every inconsistency in a response raises
`ResponseFormatError` naming the output and what is wrong.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deploy.client._errors import InvalidInputError, ModelError, ResponseFormatError
from deploy.client.dtypes import (
    DATATYPES,
    FIXED_DTYPES,
    datatype_of,
    is_bfloat16,
    to_bfloat16,
)

BINARY_CONTENT_TYPE = "application/vnd.sagemaker-triton.binary+json"
JSON_CONTENT_TYPE = "application/json"
_HEADER_SIZE_PARAM = "json-header-size"
_BINARY_PREFIX = f"{BINARY_CONTENT_TYPE};{_HEADER_SIZE_PARAM}="
_LENGTH = struct.Struct("<I")
# One encoder, built once: json.dumps(..., separators=...) builds a new one per call.
_JSON = json.JSONEncoder(separators=(",", ":"))
_quote = json.encoder.encode_basestring
_DECODER = json.JSONDecoder()
_MAX_ELEMENT = 2**32 - 1

Buffer = bytes | memoryview


@dataclass(frozen=True)
class Tensor:
    """An input with an explicit datatype, for when the array's dtype is ambiguous.

    `Tensor(bits, "BF16")` sends uint16 bit patterns (or float32 values,
    rounded) as BF16 without model metadata.
    """

    data: Any
    datatype: str


@dataclass(slots=True)
class EncodedInput:
    """One input ready to send: its header entry and its bytes (not yet joined)."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    parts: list[Buffer]
    nbytes: int


@dataclass(slots=True)
class EncodedRequest:
    """A request body and the header size its content type announces."""

    body: bytes
    header_size: int

    @property
    def content_type(self) -> str:
        return f"{BINARY_CONTENT_TYPE};{_HEADER_SIZE_PARAM}={self.header_size}"


@dataclass(slots=True)
class DecodedResponse:
    """Outputs by name (in response order) and the response's own fields."""

    outputs: dict[str, np.ndarray[Any, Any]]
    datatypes: dict[str, str]
    parameters: dict[str, Any] = field(default_factory=dict)
    model_name: str | None = None
    model_version: str | None = None


def encode_input(name: str, value: Any, datatype: str | None = None) -> EncodedInput:
    """Turn one array (or `Tensor`) into protocol bytes, checking its datatype.

    `datatype` is what the model expects (from metadata) or None to infer it.
    """
    where = f"input {name!r}"
    if isinstance(value, Tensor):
        if datatype is not None and value.datatype != datatype:
            raise InvalidInputError(
                f"is marked {value.datatype} but the model expects {datatype}", where=where
            )
        datatype = value.datatype
        value = value.data
    if isinstance(value, np.ndarray):
        array = value
    elif datatype in FIXED_DTYPES:
        # Plain Python values take the declared type (float32 for BF16, rounded later).
        wanted = np.float32 if datatype == "BF16" else FIXED_DTYPES[datatype]
        try:
            array = np.asarray(value, dtype=wanted)
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidInputError(f"is not {datatype}: {exc}", where=where) from exc
    elif datatype == "BYTES":
        array = np.asarray(value, dtype=object)
    else:
        array = np.asarray(value)
    if datatype is None:
        datatype = datatype_of(array, where=where)
    elif datatype not in DATATYPES:
        raise InvalidInputError(
            f"unknown datatype {datatype!r}",
            where=where,
            fix=f"use one of {', '.join(sorted(DATATYPES))}",
        )
    shape: tuple[int, ...] = array.shape
    if datatype == "BYTES":
        parts, nbytes = _bytes_parts(array, where)
        return EncodedInput(name, datatype, shape, parts, nbytes)
    fixed = _as_fixed(array, datatype, where)
    view = fixed.reshape(-1).data.cast("B") if fixed.size else memoryview(b"")
    return EncodedInput(name, datatype, shape, [view], view.nbytes)


def _as_fixed(array: np.ndarray[Any, Any], datatype: str, where: str) -> np.ndarray[Any, Any]:
    target = FIXED_DTYPES[datatype]
    dtype = array.dtype
    if datatype == "BF16":
        if is_bfloat16(dtype):
            return np.ascontiguousarray(array).view(np.uint16).astype(target, copy=False)
        if dtype.kind == "f":
            return to_bfloat16(array)
        if dtype.kind == "u" and dtype.itemsize == 2:
            return np.ascontiguousarray(array, dtype=target)
        raise InvalidInputError(
            f"is {dtype} but BF16 needs uint16 bit patterns or float values", where=where
        )
    if dtype == target and array.flags.c_contiguous:
        return array
    # The same kind and width in another byte order is the same data; anything else
    # is a caller's mistake that silent casting would hide.
    if dtype.kind != target.kind or dtype.itemsize != target.itemsize:
        raise InvalidInputError(
            f"is {_describe_dtype(dtype)} but the model expects {datatype}",
            where=where,
            fix=f"convert it with .astype(np.{target.type.__name__})",
        )
    return np.ascontiguousarray(array, dtype=target)


def _describe_dtype(dtype: np.dtype[Any]) -> str:
    if is_bfloat16(dtype):
        return "BF16"
    if dtype.kind in "OSU":
        return f"{dtype} (BYTES)"
    try:
        return f"{dtype} ({datatype_of(np.empty(0, dtype), where='')})"
    except InvalidInputError:
        return str(dtype)


def _bytes_parts(array: np.ndarray[Any, Any], where: str) -> tuple[list[Buffer], int]:
    kind = array.dtype.kind
    if kind not in "OSU":
        raise InvalidInputError(
            f"is {array.dtype} but the model expects BYTES",
            where=where,
            fix="pass an object array of bytes/str, or a numpy bytes/str array",
        )
    parts: list[Buffer] = []
    nbytes = 0
    pack = _LENGTH.pack
    for item in array.reshape(-1).tolist() if array.size else ():
        if isinstance(item, str):
            item = item.encode("utf-8")
        elif not isinstance(item, bytes):
            raise InvalidInputError(
                f"holds a {type(item).__name__}; BYTES elements must be bytes or str", where=where
            )
        if len(item) > _MAX_ELEMENT:
            raise InvalidInputError("has an element over 4 GiB", where=where)
        parts.append(pack(len(item)))
        parts.append(item)
        nbytes += 4 + len(item)
    return parts, nbytes


def _tensor_entries(items: Sequence[EncodedInput]) -> str:
    # Written by hand: this runs on every call and the generic encoder is several
    # times slower. Names are JSON-quoted; datatypes and shapes are known-safe.
    return ",".join(
        [
            f'{{"name":{_quote(item.name)},"datatype":"{item.datatype}",'
            f'"shape":[{",".join(map(str, item.shape))}],'
            f'"parameters":{{"binary_data_size":{item.nbytes}}}}}'
            for item in items
        ]
    )


def encode_request(
    inputs: Sequence[EncodedInput],
    outputs: Sequence[str] | None = None,
    *,
    class_count: int | None = None,
    parameters: Mapping[str, Any] | None = None,
    binary_output: bool = True,
) -> EncodedRequest:
    """Build the body: the JSON header, then every input's bytes in order."""
    chunks, header_size, _ = encode_parts(
        inputs,
        outputs,
        class_count=class_count,
        parameters=parameters,
        binary_output=binary_output,
    )
    return EncodedRequest(b"".join(chunks), header_size)


def encode_parts(
    inputs: Sequence[EncodedInput],
    outputs: Sequence[str] | None = None,
    *,
    class_count: int | None = None,
    parameters: Mapping[str, Any] | None = None,
    binary_output: bool = True,
) -> tuple[list[Buffer], int, int]:
    """The body as its pieces, not joined: the JSON header (bytes) then every
    input's bytes (views of the arrays); with the header's size and the body's.

    The direct transport writes the pieces to the socket as they are, so a
    large input is never copied into a body first."""
    if class_count is not None and not outputs:
        raise InvalidInputError(
            "class_count needs the output names",
            fix="pass outputs=[...] or give the endpoint a manifest",
        )
    if class_count is not None and (type(class_count) is not int or class_count < 1):
        raise InvalidInputError(f"class_count must be a positive integer, not {class_count!r}")
    simple = not outputs and not parameters and binary_output
    if simple:
        # The usual call repeats its header exactly: the same names, datatypes and shapes.
        key = tuple([(item.name, item.datatype, item.shape, item.nbytes) for item in inputs])
        head = _HEADS.get(key)
        if head is None:
            head = _header(inputs, outputs, class_count, parameters, binary_output)
            if len(_HEADS) >= _MAX_HEADS:
                _HEADS.clear()
            _HEADS[key] = head
    else:
        head = _header(inputs, outputs, class_count, parameters, binary_output)
    chunks: list[Buffer] = [head]
    size = len(head)
    for item in inputs:
        chunks.extend(item.parts)
        size += item.nbytes
    return chunks, len(head), size


# Request headers without outputs or parameters, by their inputs' names, datatypes,
# shapes and sizes; emptied when full.
_HEADS: dict[tuple[tuple[str, str, tuple[int, ...], int], ...], bytes] = {}
_MAX_HEADS = 256


def _header(
    inputs: Sequence[EncodedInput],
    outputs: Sequence[str] | None,
    class_count: int | None,
    parameters: Mapping[str, Any] | None,
    binary_output: bool,
) -> bytes:
    """A request's JSON header."""
    merged = dict(parameters) if parameters else {}
    text = ['{"inputs":[', _tensor_entries(inputs), "]"]
    if outputs:
        flag = "true" if binary_output else "false"
        extra = f',"classification":{class_count}' if class_count is not None else ""
        entries = ",".join(
            f'{{"name":{_quote(name)},"parameters":{{"binary_data":{flag}{extra}}}}}'
            for name in outputs
        )
        text += [',"outputs":[', entries, "]"]
    elif not merged:
        # The common case, without the generic encoder's per-call setup.
        text.append(
            ',"parameters":{"binary_data_output":%s}' % ("true" if binary_output else "false")
        )
        merged = {}
    else:
        merged.setdefault("binary_data_output", binary_output)
    if merged:
        try:
            text += [',"parameters":', _JSON.encode(merged)]
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"request parameters are not JSON: {exc}") from exc
    text.append("}")
    return "".join(text).encode("utf-8")


def encode(
    inputs: Mapping[str, Any],
    outputs: Sequence[str] | None = None,
    *,
    class_count: int | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> EncodedRequest:
    """Encode named arrays (or `Tensor`s) into one request body, without model metadata."""
    encoded = [encode_input(name, value) for name, value in inputs.items()]
    return encode_request(encoded, outputs, class_count=class_count, parameters=parameters)


def encode_response(outputs: Sequence[EncodedInput]) -> EncodedRequest:
    """A response body in the form Triton answers with (all outputs binary).

    For tests and benchmarks that need server-side bodies; same layout as a request.
    """
    head = ('{"outputs":[' + _tensor_entries(outputs) + "]}").encode("utf-8")
    chunks: list[Buffer] = [head]
    for item in outputs:
        chunks.extend(item.parts)
    return EncodedRequest(b"".join(chunks), len(head))


def header_size_of(content_type: str | None) -> int | None:
    """The JSON header length a content type announces; None for a plain JSON body."""
    if not content_type:
        return None
    if content_type.startswith(_BINARY_PREFIX) and content_type[len(_BINARY_PREFIX) :].isdigit():
        return int(content_type[len(_BINARY_PREFIX) :])  # the usual form, parsed fast
    media, *params = (part.strip() for part in content_type.split(";"))
    for param in params:
        key, _, value = param.partition("=")
        if key.strip().lower() == _HEADER_SIZE_PARAM:
            text = value.strip()
            if not text.isdigit():
                raise ResponseFormatError(
                    f"content type {content_type!r} has a non-numeric {_HEADER_SIZE_PARAM}"
                )
            return int(text)
    if media.lower() == BINARY_CONTENT_TYPE:
        raise ResponseFormatError(
            f"content type {content_type!r} is binary but gives no {_HEADER_SIZE_PARAM}"
        )
    return None


def decode(body: Buffer | bytearray, content_type: str | None) -> DecodedResponse:
    """Parse a response body into arrays; raises `ResponseFormatError` when malformed."""
    return decode_response(body, content_type)


def decode_response(body: Buffer | bytearray, content_type: str | None) -> DecodedResponse:
    """Parse a response body into arrays; raises `ResponseFormatError` when malformed."""
    return _decode(body, content_type, "outputs")


def decode_request(body: Buffer | bytearray, content_type: str | None) -> DecodedResponse:
    """Parse a request body (its inputs) the way a server would; same checks."""
    return _decode(body, content_type, "inputs")


def _decode(body: Buffer | bytearray, content_type: str | None, key: str) -> DecodedResponse:
    view = memoryview(body)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    header_size = header_size_of(content_type)
    head = None
    if header_size is None:
        header_size = view.nbytes  # all JSON: decoded afresh every time
    elif header_size > view.nbytes:
        raise ResponseFormatError(
            f"header size {header_size} is larger than the {view.nbytes}-byte response"
        )
    elif header_size <= _MAX_LAYOUT_HEADER:
        head = view[:header_size].tobytes()
    layout = _LAYOUTS.get((head, key)) if head is not None else None
    try:
        if layout is not None and layout.end == view.nbytes:
            return layout.apply(view)
        header = _parse_header(view[:header_size])
        decoded = _decode_tensors(header, view, header_size, key)
        if head is not None:
            _remember(head, key, header, view.nbytes)
        return decoded
    except ResponseFormatError:
        raise
    except (ValueError, TypeError, OverflowError, MemoryError) as exc:
        # Belt and braces: the checks below should catch everything first.
        raise ResponseFormatError(f"malformed response: {exc}") from exc


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where each tensor lies in a body whose JSON header has been seen (and
    checked) before: a model answers the same header call after call, so the
    same header bytes give the same names, datatypes, shapes and offsets."""

    end: int  # the body's length: a body of another length is checked afresh
    tensors: tuple[tuple[str, str, tuple[int, ...], int, int, int], ...]
    parameters: tuple[tuple[str, Any], ...]
    model_name: str | None
    model_version: str | None
    entry: str

    def apply(self, view: memoryview) -> DecodedResponse:
        outputs: dict[str, np.ndarray[Any, Any]] = {}
        datatypes: dict[str, str] = {}
        for name, datatype, shape, count, start, stop in self.tensors:
            if datatype == "BYTES":
                where = f"{self.entry} {name!r}"
                outputs[name] = _parse_bytes(view[start:stop], count, where).reshape(shape)
            else:
                dtype = FIXED_DTYPES[datatype]
                array = np.frombuffer(view, dtype=dtype, count=count, offset=start)
                outputs[name] = array.reshape(shape)
            datatypes[name] = datatype
        return DecodedResponse(
            outputs, datatypes, dict(self.parameters), self.model_name, self.model_version
        )


# Header bytes (and "outputs" or "inputs") → layout; emptied when full.
_LAYOUTS: dict[tuple[bytes, str], _Layout] = {}
_MAX_LAYOUTS = 64
_MAX_LAYOUT_HEADER = 16 * 1024  # larger headers (many outputs) are parsed each time
_SCALARS = (str, int, float, bool, type(None))


def _remember(head: bytes, key: str, header: dict[str, Any], end: int) -> None:
    """Keep the layout of a header that decoded cleanly: every tensor binary, and
    only scalar parameters (a cached nested value could be changed by a caller)."""
    tensors = []
    offset = len(head)
    for entry in header[key]:
        size = (entry.get("parameters") or {}).get("binary_data_size")
        if size is None:
            return  # JSON data: decoded afresh each time
        shape = tuple(entry["shape"])
        tensors.append(
            (entry["name"], entry["datatype"], shape, math.prod(shape), offset, offset + size)
        )
        offset += size
    parameters = header.get("parameters")
    if not isinstance(parameters, dict):
        parameters = {}
    if not all(isinstance(value, _SCALARS) for value in parameters.values()):
        return
    version = header.get("model_version")
    name = header.get("model_name")
    if len(_LAYOUTS) >= _MAX_LAYOUTS:
        _LAYOUTS.clear()
    _LAYOUTS[head, key] = _Layout(
        end,
        tuple(tensors),
        tuple(parameters.items()),
        name if isinstance(name, str) else None,
        str(version) if version is not None else None,
        key[:-1],
    )


def _parse_header(raw: memoryview) -> dict[str, Any]:
    try:
        header = _DECODER.decode(str(raw, "utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ResponseFormatError(f"response header is not JSON: {exc}") from exc
    except (RecursionError, MemoryError) as exc:
        raise ResponseFormatError(
            f"response header is JSON nested too deeply or too large to parse "
            f"({type(exc).__name__}, {raw.nbytes} bytes)"
        ) from exc
    if not isinstance(header, dict):
        raise ResponseFormatError("response header is not a JSON object")
    if "error" in header and "outputs" not in header and "inputs" not in header:
        raise ModelError(str(header["error"]))
    return header


def _decode_tensors(
    header: dict[str, Any], view: memoryview, header_size: int, key: str
) -> DecodedResponse:
    entries = header.get(key)
    if not isinstance(entries, list):
        raise ResponseFormatError(f"body has no {key!r} list")
    outputs: dict[str, np.ndarray[Any, Any]] = {}
    datatypes: dict[str, str] = {}
    offset = header_size
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ResponseFormatError(f"{key[:-1]} #{index} has no name")
        name = entry["name"]
        where = f"{key[:-1]} {name!r}"
        if name in outputs:
            raise ResponseFormatError("appears twice in the response", where=where)
        datatype = entry.get("datatype")
        if datatype not in DATATYPES:
            raise ResponseFormatError(f"has unknown datatype {datatype!r}", where=where)
        shape = _shape(entry.get("shape"), where)
        count = math.prod(shape)
        parameters = entry.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise ResponseFormatError("has parameters that are not an object", where=where)
        size = parameters.get("binary_data_size")
        if size is not None:
            if type(size) is not int or size < 0:
                raise ResponseFormatError(f"has invalid binary_data_size {size!r}", where=where)
            if offset + size > view.nbytes:
                raise ResponseFormatError(
                    f"claims {size} bytes at offset {offset} but the response has "
                    f"{view.nbytes} bytes (truncated?)",
                    where=where,
                )
            array = _from_binary(view[offset : offset + size], datatype, shape, count, where)
            offset += size
        elif "data" in entry:
            array = _from_json(entry["data"], datatype, shape, count, where)
        else:
            raise ResponseFormatError("carries neither binary data nor JSON data", where=where)
        outputs[name] = array
        datatypes[name] = datatype
    if offset != view.nbytes:
        raise ResponseFormatError(
            f"response has {view.nbytes - offset} bytes after the last output "
            "(header sizes disagree with the body)"
        )
    parameters = header.get("parameters")
    version = header.get("model_version")
    return DecodedResponse(
        outputs,
        datatypes,
        parameters if isinstance(parameters, dict) else {},
        header.get("model_name") if isinstance(header.get("model_name"), str) else None,
        str(version) if version is not None else None,
    )


def _shape(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(type(dim) is int and dim >= 0 for dim in value):
        raise ResponseFormatError(f"has invalid shape {value!r}", where=where)
    return tuple(value)


def _from_binary(
    data: memoryview, datatype: str, shape: tuple[int, ...], count: int, where: str
) -> np.ndarray[Any, Any]:
    if datatype == "BYTES":
        return _parse_bytes(data, count, where).reshape(shape)
    dtype = FIXED_DTYPES[datatype]
    if data.nbytes != count * dtype.itemsize:
        raise ResponseFormatError(
            f"has {data.nbytes} bytes but shape {list(shape)} of {datatype} needs "
            f"{count * dtype.itemsize}",
            where=where,
        )
    return np.frombuffer(data, dtype=dtype, count=count).reshape(shape)


def _parse_bytes(data: memoryview, count: int, where: str) -> np.ndarray[Any, Any]:
    if count * 4 > data.nbytes:
        # Checked before allocating: a forged shape must not allocate gigabytes.
        raise ResponseFormatError(
            f"BYTES data of {data.nbytes} bytes cannot hold {count} elements", where=where
        )
    # One copy of the region, then bytes slicing: cheaper than a memoryview slice per item.
    raw = data.tobytes()
    items: list[bytes] = [b""] * count
    offset = 0
    end = len(raw)
    unpack = _LENGTH.unpack_from
    for index in range(count):
        if offset + 4 > end:
            raise ResponseFormatError(
                f"BYTES data ends inside the length of element {index} of {count}", where=where
            )
        (length,) = unpack(raw, offset)
        offset += 4
        if offset + length > end:
            raise ResponseFormatError(
                f"BYTES element {index} claims {length} bytes but only {end - offset} remain",
                where=where,
            )
        items[index] = raw[offset : offset + length]
        offset += length
    if offset != end:
        raise ResponseFormatError(
            f"BYTES data has {end - offset} bytes after its {count} elements", where=where
        )
    result = np.empty(count, dtype=object)
    result[:] = items
    return result


def _from_json(
    data: Any, datatype: str, shape: tuple[int, ...], count: int, where: str
) -> np.ndarray[Any, Any]:
    if not isinstance(data, list):
        raise ResponseFormatError("has JSON data that is not a list", where=where)
    flat = _flatten(data)
    if len(flat) != count:
        raise ResponseFormatError(
            f"has {len(flat)} JSON values but shape {list(shape)} needs {count}", where=where
        )
    if datatype == "BYTES":
        result = np.empty(count, dtype=object)
        for index, item in enumerate(flat):
            if not isinstance(item, str):
                raise ResponseFormatError("has a non-string BYTES value", where=where)
            result[index] = item.encode("utf-8")
        return result.reshape(shape)
    wanted = bool if datatype == "BOOL" else (int if datatype[0] in "IU" else float)
    for item in flat:
        # bool is an int subclass; ints are fine where floats are expected.
        wrong = (wanted is bool) != isinstance(item, bool) or not isinstance(item, int | float)
        if wrong or (wanted is int and not isinstance(item, int)):
            raise ResponseFormatError(f"has JSON value {item!r}, not {datatype}", where=where)
    if datatype == "BF16":
        return to_bfloat16(np.array(flat, dtype=np.float32)).reshape(shape)
    dtype = FIXED_DTYPES[datatype]
    if wanted is int:
        info = np.iinfo(dtype)
        if any(not info.min <= item <= info.max for item in flat):
            raise ResponseFormatError(f"has a JSON value out of range for {datatype}", where=where)
    return np.array(flat, dtype=dtype).reshape(shape)


def _flatten(data: list[Any]) -> list[Any]:
    flat: list[Any] = []
    stack = [iter(data)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            flat.append(item)
        else:
            stack.pop()
    return flat
