"""Triton's binary protocol through the front door, without touching the tensors.

A caller that sends `application/vnd.sagemaker-triton.binary+json;json-header-size=N`
(as SageMaker's own clients and tritonclient's `InferenceServerClient.generate_request_body`
do) gets its body forwarded to the endpoint as it came. Only the JSON header
(its first N bytes) is parsed and checked, with the same field rules as a
v2 JSON request: the inputs' `binary_data_size` must add up to the bytes that
follow it, and no shared memory. The answer comes back the same way: the
endpoint's JSON header is read, its `model_name` set to the name the caller
used, and the tensor bytes after it are returned untouched (base64, as API
Gateway requires for a binary body).
"""

from __future__ import annotations

from typing import Any

from . import fast_json
from .request import (
    BINARY_CONTENT_TYPE,
    HEADER_SIZE_PARAM,
    Body,
    check_request,
    json_header_size,
    parse_json,
)


def forward_request(body: Body, *, extra: dict[str, Any] | None = None) -> tuple[bytes, str]:
    """(body, content type) to send on, after the JSON header is checked; `RequestError` if not.

    `extra` parameters (a router endpoint's model name) are added to the request's own and
    win over them: only the small JSON header is written again, the tensor bytes follow as
    they came."""
    data, size = body.data, body.header_size
    if not isinstance(data, bytes) or size is None:
        raise TypeError("forward_request takes a binary-protocol body (read_body's)")
    header = parse_json(memoryview(data)[:size], "the binary request's JSON header")
    check_request(header, binary_bytes=len(data) - size)
    if not extra:
        return data, f"{BINARY_CONTENT_TYPE};{HEADER_SIZE_PARAM}={size}"
    parameters = header.get("parameters")
    header["parameters"] = {**(parameters if isinstance(parameters, dict) else {}), **extra}
    header_bytes = fast_json.dumps(header)
    content_type = f"{BINARY_CONTENT_TYPE};{HEADER_SIZE_PARAM}={len(header_bytes)}"
    return header_bytes + memoryview(data)[size:], content_type


def answer(body: bytes, content_type: str, model: str) -> tuple[bytes, str]:
    """The endpoint's answer for the caller: (body, content type), `model_name` set to `model`.

    ValueError if the answer is not a v2 response (the handler's 502).
    """
    size = json_header_size(content_type)
    if size is None:  # the endpoint answered JSON (no output asked for binary data)
        document = _response_header(body)
        document["model_name"] = model
        return fast_json.dumps(document), "application/json"
    if size > len(body):
        raise ValueError(f"{HEADER_SIZE_PARAM}={size} is past the answer's {len(body)} bytes")
    header = _response_header(memoryview(body)[:size])
    header["model_name"] = model
    header_bytes = fast_json.dumps(header)
    content = f"{BINARY_CONTENT_TYPE};{HEADER_SIZE_PARAM}={len(header_bytes)}"
    return header_bytes + memoryview(body)[size:], content


def _response_header(data: bytes | memoryview) -> dict[str, Any]:
    document = fast_json.loads(data)
    if not isinstance(document, dict):
        raise ValueError("the endpoint's answer does not start with a JSON object")
    return document
