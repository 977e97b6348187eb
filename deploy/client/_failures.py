"""Maps an error answer from SageMaker (or the local endpoint) to an SDK error.

Both transports feed the same facts in: the HTTP status, the service's error
code (`x-amzn-ErrorType` / botocore's `Error.Code`), its message, and for
`ModelError` the status and message Triton itself answered with.
"""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deploy.client._errors import ClientError, EndpointError, ModelError, ModelNotFoundError
from deploy.client._retry import TransientError

_THROTTLING_CODES = frozenset(
    {"ThrottlingException", "Throttling", "ThrottledException", "TooManyRequestsException"}
)
_TRANSIENT_CODES = frozenset({"ModelNotReadyException", "ServiceUnavailable", *_THROTTLING_CODES})
_TRANSIENT_STATUSES = frozenset({429, 503, 507})
_NOT_FOUND_HINTS = (
    "unknown model",
    "model not found",
    "failed to download model",
    "not in the store",
    "no archive",
    "no inference component",
)
# Triton's and the SageMaker platform's wording for a model that did not load.
_LOAD_FAILURE_HINTS = (
    "load failed",
    "failed to load",
    "unable to load",
    "unavailable state",
)
# SageMaker's ValidationError for an inference component with no copy (scaled to zero):
# "Inference Component has no capacity to process this request. ApplicationAutoScaling
# may be in-progress (if configured) or try to increase the capacity by invoking
# UpdateInferenceComponentRuntimeConfig API." The failed call counts in the
# NoCapacityInvocationFailures metric, whose alarm starts a copy: a retry may succeed.
_NO_CAPACITY_HINT = "has no capacity to process this request"
_NO_CAPACITY_FIX = (
    "the model's inference component has no copy (it scaled to zero); one is starting "
    "(minutes on SageMaker): retry later, or raise its min_copies"
)
# An AWS error answer is a small JSON object; a larger body is kept as text, unparsed.
MAX_ERROR_DOCUMENT = 1024 * 1024
_MISSING_MODULE = re.compile(r"No module named '([^']+)'")
# Triton: "load failed for model 'm': version 1 is at UNAVAILABLE state: <cause>"
_LOAD_CAUSES = (
    re.compile(r"UNAVAILABLE state: (.*)", re.S),
    re.compile(r"load failed for model '[^']*': (.*)", re.S),
)


@dataclass(frozen=True, slots=True)
class ErrorAnswer:
    status: int | None
    code: str | None
    message: str
    original_status: int | None = None
    original_message: str | None = None


def to_exception(answer: ErrorAnswer, *, endpoint: str, model: str) -> ClientError | TransientError:
    """The SDK error for an error answer; `TransientError` when a retry may succeed."""
    where = f"endpoint {endpoint!r}, model {model!r}"
    code, status = answer.code, answer.status
    if code == "ModelError":
        detail = answer.original_message or answer.message
        original = answer.original_status
        if original in _TRANSIENT_STATUSES:
            return TransientError(EndpointError(detail, code=code, status=original, where=where))
        if original == 404 or _mentions_missing_model(detail):
            return ModelNotFoundError(detail, where=where)
        if _mentions_load_failure(detail):
            return ModelError(detail, status=original, where=where, fix=load_failure_fix(detail))
        return ModelError(
            detail,
            status=original,
            where=where,
            fix="check the inputs against the model's config.pbtxt",
        )
    if code in _TRANSIENT_CODES or (status in _TRANSIENT_STATUSES and code != "ValidationError"):
        return TransientError(EndpointError(answer.message, code=code, status=status, where=where))
    if code == "ValidationError" and _NO_CAPACITY_HINT in answer.message.lower():
        return TransientError(
            EndpointError(
                answer.message, code=code, status=status, where=where, fix=_NO_CAPACITY_FIX
            )
        )
    if status == 413:
        return EndpointError(
            f"the endpoint refused the request size: {answer.message}",
            code=code,
            status=status,
            where=where,
            fix="send smaller batches (SageMaker real-time payloads are limited to 6 MB)",
        )
    if code == "ValidationError" and _mentions_missing_model(answer.message):
        return ModelNotFoundError(answer.message, where=where)
    if code == "ValidationError" and _mentions_load_failure(answer.message):
        return ModelError(
            answer.message, status=status, where=where, fix=load_failure_fix(answer.message)
        )
    if code == "ValidationError" and "endpoint" in answer.message.lower():
        return EndpointError(
            answer.message,
            code=code,
            status=status,
            where=where,
            fix="check the endpoint name and region (or endpoint_url)",
        )
    return EndpointError(answer.message, code=code, status=status, where=where)


def _mentions_missing_model(message: str) -> bool:
    lowered = message.lower()
    return any(hint in lowered for hint in _NOT_FOUND_HINTS)


def _mentions_load_failure(message: str) -> bool:
    lowered = message.lower()
    return any(hint in lowered for hint in _LOAD_FAILURE_HINTS)


def load_failure_fix(message: str) -> str:
    """Advice for a model that failed to load, naming the cause Triton gave."""
    missing = _MISSING_MODULE.search(message)
    if missing:
        package = missing.group(1).split(".")[0]
        return (
            f"the model failed to load because its Python code imports {package!r}, which "
            "the serving image lacks: ship it in an execution environment (a conda-pack "
            "archive named by the EXECUTION_ENV_PATH parameter) and re-package the model"
        )
    causes = (pattern.search(message) for pattern in _LOAD_CAUSES)
    cause = next((found for found in causes if found), None)
    text = (cause.group(1) if cause else message).strip()
    if len(text) > 300:
        text = text[:297] + "..."
    return f"the model failed to load: {text} (the endpoint's log has the details)"


def error_document(body: bytes) -> dict[str, Any] | None:
    """An error answer's JSON object ({} for an empty body or another JSON value);
    None when it is not JSON, too large or nested too deeply to parse."""
    if not body:
        return {}
    if len(body) > MAX_ERROR_DOCUMENT:
        return None
    try:
        document = json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    return document if isinstance(document, dict) else {}


def _shortened(text: str, limit: int = 4096) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def answer_from_response(status: int, headers: Mapping[str, str], body: bytes) -> ErrorAnswer:
    """Read an InvokeEndpoint error answer the way botocore's rest-json parser
    does, so a request sent without botocore fails with the same facts.

    `headers` must look names up case-insensitively (urllib3's do).
    """
    if status >= 500 and (not body.strip() or body.strip().startswith(b"<html>")):
        # botocore's "generic" error: a proxy's or load balancer's page, no AWS shape.
        code: str | None = str(status)
        return ErrorAnswer(
            status=status, code=code, message=http.client.responses.get(status, "") or code or ""
        )
    document = error_document(body)
    if document is None:  # botocore keeps an unparsable body as the message
        document = {"message": _shortened(body.decode("utf-8", "replace"))}
    message = document.get("message", document.get("Message", ""))
    code = document.get("__type", str(status))
    if "x-amzn-errortype" in headers:
        code = headers["x-amzn-errortype"]
    elif "code" in document or "Code" in document:
        code = document.get("code", document.get("Code", ""))
    if isinstance(code, str):
        code = code.split(":", 1)[0].rsplit("#", 1)[-1]
    original = document.get("OriginalStatusCode")
    if isinstance(original, str) and original.isdigit():
        original = int(original)
    original_message = document.get("OriginalMessage")
    return ErrorAnswer(
        status=status,
        code=code if isinstance(code, str) else None,
        message=str(message or code or ""),
        original_status=original if isinstance(original, int) else None,
        original_message=original_message if isinstance(original_message, str) else None,
    )
