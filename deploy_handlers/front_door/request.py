"""What the front door takes from a caller, checked before anything is encoded or sent.

An HTTP API event carries the body as text or as base64, with a content type;
the body is a KServe v2 JSON inference request. Everything a caller can get
wrong here is a `RequestError`, whose message names the field (`inputs[0].shape`,
`outputs[1].name`, `parameters`, the `content-type` header, ...), and which the
handler answers with its `status` (400, or 415 for a content type it does not
take). The tensor data itself is checked as it is encoded, in one pass
(`binary.encode_tensor`).

Exceptions: `RequestError` (ValueError) ← `binary.TensorError` (a tensor's data).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass
from typing import Any

# Media types the front door parses as v2 JSON. A missing content type is JSON too
# (callers such as awscurl often send none); Triton's binary protocol is refused.
JSON_MEDIA_TYPES = frozenset({"application/json"})


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


def body_text(event: dict[str, Any]) -> str | bytes:
    """The event's body as JSON text, after its content type and base64 are checked."""
    headers = event.get("headers")
    content_type = None
    if isinstance(headers, dict):  # API Gateway lowercases names; a direct invoke may not
        content_type = next(
            (value for key, value in headers.items() if str(key).lower() == "content-type"), None
        )
    if content_type is not None:
        media_type = str(content_type).split(";", 1)[0].strip().lower()
        if media_type not in JSON_MEDIA_TYPES:
            raise RequestError(
                f"content-type {str(content_type)[:100]!r} is not taken here: send a KServe v2"
                " JSON request as application/json (Triton's binary protocol goes to the"
                " SageMaker endpoint directly)",
                status=415,
            )
    raw = event.get("body")
    if raw is None:
        raw = ""
    if not isinstance(raw, str):
        raise RequestError("the request body must be text")
    if not event.get("isBase64Encoded"):
        return raw
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RequestError(
            f"the request body is marked isBase64Encoded but is not valid base64: {exc}"
        ) from exc


def parse_body(text: str | bytes) -> Any:
    """The JSON document; nesting deep enough to exhaust the parser is a 400, not a crash."""
    try:
        return json.loads(text)
    except RecursionError:
        raise RequestError("the request body is not valid JSON: it nests too deeply") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, int digit limit
        raise RequestError(f"the request body is not valid JSON: {exc}") from None


def check_request(document: Any) -> InferRequest:
    """The v2 request's fields, each of its declared type, or a `RequestError` naming it."""
    if not isinstance(document, dict):
        raise RequestError("the request body must be a JSON object")
    inputs = document.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise RequestError("request needs a non-empty 'inputs' list")
    checked: list[InputTensor] = []
    names: set[str] = set()
    for index, tensor in enumerate(inputs):
        where = f"inputs[{index}]"
        if not isinstance(tensor, dict):
            raise RequestError(f"{where} must be an object")
        if not {"name", "datatype", "shape", "data"} <= tensor.keys():
            raise RequestError(f"{where} needs 'name', 'datatype', 'shape' and 'data'")
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
        checked.append(
            InputTensor(
                where,
                name,
                datatype,
                shape,
                tensor["data"],
                _parameters(tensor.get("parameters"), f"{where}.parameters"),
            )
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
