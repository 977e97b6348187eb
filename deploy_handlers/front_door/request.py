"""What the front door takes from a caller, checked before anything is encoded or sent.

An HTTP API event carries the body as text or as base64, with a content type.
The body is a KServe v2 JSON inference request, or a request in Triton's
binary protocol (`application/vnd.sagemaker-triton.binary+json;json-header-size=N`:
N bytes of JSON header, then the raw tensors), which goes on as it came: only
its header is parsed and checked. Everything a caller can get wrong here is a
`RequestError`, whose message names the field (`inputs[0].shape`,
`outputs[1].name`, `parameters`, the `content-type` header, ...), and which the
handler answers with its `status` (400, or 415 for a content type it does not
take). The tensor data of a JSON request is checked as it is encoded, in one
pass (`binary.encode_tensor`).

Exceptions: `RequestError` (ValueError) ← `binary.TensorError` (a tensor's data).
"""

from __future__ import annotations

import binascii
import math
from dataclasses import dataclass
from typing import Any

import pybase64

from . import fast_json

# Media types the front door parses as v2 JSON. A missing content type is JSON too
# (callers such as awscurl often send none).
JSON_MEDIA_TYPES = frozenset({"application/json"})
# Triton's binary protocol, as SageMaker's clients send it to an endpoint.
BINARY_CONTENT_TYPE = "application/vnd.sagemaker-triton.binary+json"
HEADER_SIZE_PARAM = "json-header-size"
_MAX_HEADER_DIGITS = 10  # a count of bytes; more digits than any body can hold is refused


class RequestError(ValueError):
    """A request the caller got wrong (HTTP `status`, 400 unless said otherwise)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class InputTensor:
    """One entry of `inputs`, its fields of the right types (data still unchecked)."""

    where: str  # "inputs[0]"
    name: str
    datatype: str
    shape: list[int]
    data: Any
    parameters: dict[str, Any]


@dataclass(frozen=True)
class OutputRequest:
    name: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class InferRequest:
    inputs: list[InputTensor]
    outputs: list[OutputRequest]
    id: str | None
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Body:
    """A request body: `header_size` is set for Triton's binary protocol, None for v2 JSON."""

    data: str | bytes
    header_size: int | None = None


def json_header_size(content_type: str) -> int | None:
    """The `json-header-size` parameter of a content type (None if absent).

    ValueError unless it is a plain decimal count: no sign, no spaces inside,
    ASCII digits only, at most ten of them.
    """
    for part in content_type.split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() != HEADER_SIZE_PARAM:
            continue
        value = value.strip()
        if not (value.isascii() and value.isdigit() and len(value) <= _MAX_HEADER_DIGITS):
            raise ValueError(f"{HEADER_SIZE_PARAM}={value[:20]!r} is not a byte count")
        return int(value)
    return None


def read_body(event: dict[str, Any]) -> Body:
    """The event's body after its content type and base64 are checked.

    v2 JSON comes back as the text (or bytes) to parse; the binary protocol as
    bytes whose header size is checked against the body's length.
    """
    headers = event.get("headers")
    content_type = None
    if isinstance(headers, dict):  # API Gateway lowercases names; a direct invoke may not
        content_type = next(
            (value for key, value in headers.items() if str(key).lower() == "content-type"), None
        )
    header_size = None
    if content_type is not None:
        content_type = str(content_type)
        media_type = content_type.split(";", 1)[0].strip().lower()
        if media_type == BINARY_CONTENT_TYPE:
            header_size = _binary_header_size(content_type)
        elif media_type not in JSON_MEDIA_TYPES:
            raise RequestError(
                f"content-type {content_type[:100]!r} is not taken here: send a KServe v2"
                " JSON request as application/json, or Triton's binary protocol as"
                f" {BINARY_CONTENT_TYPE};{HEADER_SIZE_PARAM}=N",
                status=415,
            )
    data = _decoded(event)
    if header_size is None:
        return Body(data)
    if isinstance(data, str):  # a direct invoke may send the binary protocol as text
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError:
            raise RequestError("the request body is not valid UTF-8 text") from None
    if header_size > len(data):
        raise RequestError(
            f"content-type {HEADER_SIZE_PARAM}={header_size} is longer than the request"
            f" body ({len(data)} bytes): it must be the length of the JSON header"
        )
    return Body(data, header_size)


def _binary_header_size(content_type: str) -> int:
    where = f"content-type {content_type[:120]!r}"
    try:
        size = json_header_size(content_type)
    except ValueError as exc:
        raise RequestError(
            f"{where}: {exc}; {HEADER_SIZE_PARAM} must be the JSON header's length in bytes"
        ) from None
    if size is None:
        raise RequestError(
            f"{where} needs ;{HEADER_SIZE_PARAM}=N, the length in bytes of the JSON header"
            " that starts the body"
        )
    if size == 0:
        raise RequestError(f"{where}: {HEADER_SIZE_PARAM}=0, but the body must start with JSON")
    return size


def _decoded(event: dict[str, Any]) -> str | bytes:
    raw = event.get("body")
    if raw is None:
        raw = ""
    if not isinstance(raw, str):
        raise RequestError("the request body must be text")
    if not event.get("isBase64Encoded"):
        return raw
    try:
        return pybase64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RequestError(
            f"the request body is marked isBase64Encoded but is not valid base64: {exc}"
        ) from exc


def parse_json(data: str | bytes | memoryview, what: str = "the request body") -> Any:
    """The JSON document; nesting deep enough to exhaust the parser is a 400, not a crash."""
    try:
        return fast_json.loads(data)
    except RecursionError:
        raise RequestError(f"{what} is not valid JSON: it nests too deeply") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, int digit limit
        raise RequestError(f"{what} is not valid JSON: {exc}") from None


def parse_body(text: str | bytes) -> Any:
    """The v2 JSON request body's document."""
    return parse_json(text)


def check_request(document: Any, *, binary_bytes: int | None = None) -> InferRequest:
    """The v2 request's fields, each of its declared type, or a `RequestError` naming it.

    `binary_bytes` is set for the JSON header of a binary-protocol request: the
    length of the tensor bytes after it. An input may then carry its data there
    (`parameters.binary_data_size`) instead of in `data`, and the sizes must add
    up to exactly that length. Such inputs have `data` None.
    """
    where_doc = "the request body" if binary_bytes is None else "the binary request's JSON header"
    if not isinstance(document, dict):
        raise RequestError(f"{where_doc} must be a JSON object")
    inputs = document.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise RequestError("request needs a non-empty 'inputs' list")
    checked: list[InputTensor] = []
    names: set[str] = set()
    binary_total = 0
    for index, tensor in enumerate(inputs):
        where = f"inputs[{index}]"
        if not isinstance(tensor, dict):
            raise RequestError(f"{where} must be an object")
        parameters = _parameters(tensor.get("parameters"), f"{where}.parameters")
        size = parameters.get("binary_data_size") if binary_bytes is not None else None
        if size is not None:
            if type(size) is not int or size < 0:
                raise RequestError(
                    f"{where}.parameters.binary_data_size must be a non-negative integer"
                )
            binary_total += size
        needed = {"name", "datatype", "shape"} | ({"data"} if size is None else set())
        if not needed <= tensor.keys():
            raise RequestError(
                f"{where} needs 'name', 'datatype', 'shape' and 'data'"
                + ("" if binary_bytes is None else " (or parameters.binary_data_size)")
            )
        name, datatype, shape = tensor["name"], tensor["datatype"], tensor["shape"]
        if not isinstance(name, str) or not name:
            raise RequestError(f"{where}.name must be a non-empty string")
        if name in names:
            raise RequestError(f"{where}.name: input {name!r} is given twice")
        names.add(name)
        if not isinstance(datatype, str):
            raise RequestError(f'{where}.datatype must be a string such as "FP32"')
        if not isinstance(shape, list) or not all(
            type(d) is int and d >= 0
            for d in shape  # bool is an int: refused
        ):
            raise RequestError(
                f"{where}.shape (input {name!r}) must be a list of non-negative integers"
            )
        checked.append(InputTensor(where, name, datatype, shape, tensor.get("data"), parameters))
    if binary_bytes is not None and binary_total != binary_bytes:
        raise RequestError(
            f"the inputs' parameters.binary_data_size add up to {binary_total} bytes, but"
            f" {binary_bytes} bytes follow the JSON header ({HEADER_SIZE_PARAM} in the"
            " content-type must be the header's length)"
        )
    request_id = document.get("id")
    if "id" in document and not isinstance(request_id, str):
        raise RequestError("id must be a string")
    return InferRequest(
        checked,
        _outputs(document.get("outputs")),
        request_id,
        _parameters(document.get("parameters"), "parameters"),
    )


def _outputs(outputs: Any) -> list[OutputRequest]:
    if outputs is None:
        return []
    if not isinstance(outputs, list):
        raise RequestError('outputs must be a list of objects such as {"name": "OUTPUT0"}')
    checked = []
    for index, output in enumerate(outputs):
        where = f"outputs[{index}]"
        if not isinstance(output, dict):
            raise RequestError(f'{where} must be an object such as {{"name": "OUTPUT0"}}')
        name = output.get("name")
        if not isinstance(name, str) or not name:
            raise RequestError(f"{where}.name must be a non-empty string")
        checked.append(
            OutputRequest(name, _parameters(output.get("parameters"), f"{where}.parameters"))
        )
    return checked


def _parameters(parameters: Any, where: str) -> dict[str, Any]:
    """v2 parameters: an object of strings, finite numbers and booleans (null: none)."""
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        raise RequestError(f"{where} must be an object of strings, numbers and booleans")
    for key, value in parameters.items():
        if not isinstance(value, str | int | float) or (
            isinstance(value, float) and not math.isfinite(value)
        ):
            raise RequestError(f"{where}.{key} must be a string, a finite number or a boolean")
        if key.startswith("shared_memory_"):
            raise RequestError(f"{where}.{key}: the front door takes no shared memory")
    return dict(parameters)
