"""Maps an error answer from SageMaker (or the local endpoint) to an SDK error.

Both transports feed the same facts in: the HTTP status, the service's error
code (`x-amzn-ErrorType` / botocore's `Error.Code`), its message, and for
`ModelError` the status and message Triton itself answered with.
"""

from __future__ import annotations

from dataclasses import dataclass

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
        return ModelError(
            detail,
            status=original,
            where=where,
            fix="check the inputs against the model's config.pbtxt",
        )
    if code in _TRANSIENT_CODES or (status in _TRANSIENT_STATUSES and code != "ValidationError"):
        return TransientError(EndpointError(answer.message, code=code, status=status, where=where))
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
