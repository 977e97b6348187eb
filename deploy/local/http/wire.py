"""The SageMaker runtime wire format: AWS's JSON error shape and header names.

botocore's rest-json parser reads the error code from the `x-amzn-ErrorType`
header (then `__type`/`code` in the body) and the modelled members (for
`ModelError`: OriginalStatusCode, OriginalMessage, LogStreamArn) from the
JSON body, so a response built here raises the modelled exception class of
`boto3.client("sagemaker-runtime")`.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from deploy.hosting.limits import MAX_TARGET_MODEL, REALTIME_MAX_REQUEST

TARGET_MODEL = "x-amzn-sagemaker-target-model"
CUSTOM_ATTRIBUTES = "x-amzn-sagemaker-custom-attributes"
INVOKED_VARIANT = "x-Amzn-Invoked-Production-Variant"
DEFAULT_VARIANT = "AllTraffic"
# SageMaker's real-time InvokeEndpoint limit
DEFAULT_MAX_PAYLOAD = REALTIME_MAX_REQUEST
LOCAL_ACCOUNT = "000000000000"
# The local endpoint's manifest (not part of SageMaker's API; its paths are
# /endpoints/..., /ping and /invocations). The SDK reads it when given an endpoint_url.
MANIFEST_ROUTE = "/deploy/manifest.json"
# On the manifest route's answer: the endpoint's name, for clients given only its URL.
ENDPOINT_NAME_HEADER = "X-Deploy-Endpoint-Name"
_TARGET_MODEL = re.compile(r"[!-~][ -~]*")  # \A\S[\p{Print}]*\z, Java's ASCII classes


@dataclass
class AwsErrorReply:
    """One error response in AWS's JSON error shape."""

    code: str  # ValidationError, ModelError, ModelNotReadyException, ...
    status: int
    message: str
    members: dict[str, Any] = field(default_factory=dict)

    def encode(self) -> tuple[int, list[tuple[str, str]], bytes]:
        body = {"__type": self.code, "message": self.message, **self.members}
        headers = [
            ("Content-Type", "application/json"),
            ("x-amzn-ErrorType", self.code),
            ("x-amzn-RequestId", str(uuid.uuid4())),
        ]
        return self.status, headers, json.dumps(body).encode()


def validation_error(message: str) -> AwsErrorReply:
    return AwsErrorReply("ValidationError", 400, message)


def model_error(
    target_model: str,
    original_status: int,
    original_message: str,
    log_stream: str,
    *,
    fix: str | None = None,
) -> AwsErrorReply:
    """SageMaker's ModelError; `fix` (the local endpoint's advice) follows its message."""
    message = (
        f"Received client error ({original_status}) from model {target_model} with message "
        f'"{original_message}". See {log_stream} for more information.'
    )
    if fix:
        message += f" Fix: {fix}"
    return AwsErrorReply(
        "ModelError",
        424,
        message,
        {
            "OriginalStatusCode": original_status,
            "OriginalMessage": original_message,
            "LogStreamArn": log_stream,
        },
    )


def model_not_ready(message: str) -> AwsErrorReply:
    return AwsErrorReply("ModelNotReadyException", 429, message)


def service_unavailable(message: str) -> AwsErrorReply:
    return AwsErrorReply("ServiceUnavailable", 503, message)


def internal_failure(message: str) -> AwsErrorReply:
    return AwsErrorReply("InternalFailure", 500, message)


def payload_too_large(limit: int) -> tuple[int, list[tuple[str, str]], bytes]:
    # SageMaker answers an oversized body with a bare 413 (botocore: ClientError "413").
    body = json.dumps({"message": f"HTTP content length exceeded {limit} bytes."}).encode()
    return 413, [("Content-Type", "application/json")], body


def _constraint(value: str, member: str, constraint: str) -> AwsErrorReply:
    # The form AWS's request validation answers in.
    return validation_error(
        f"1 validation error detected: Value {value!r} at '{member}' failed to satisfy "
        f"constraint: {constraint}"
    )


def target_model(raw: bytes) -> str | AwsErrorReply:
    """The TargetModel header as SageMaker reads it: UTF-8 (what boto3 sends), 1 to
    1024 printable ASCII characters, not starting with a space."""
    try:
        value = raw.decode("utf-8")
    except UnicodeDecodeError:
        return validation_error("the X-Amzn-SageMaker-Target-Model header is not UTF-8")
    if len(value) > MAX_TARGET_MODEL:
        return _constraint(
            value[:64] + "...",
            "targetModel",
            f"Member must have length less than or equal to {MAX_TARGET_MODEL}",
        )
    if not _TARGET_MODEL.fullmatch(value):
        return _constraint(
            value,
            "targetModel",
            r"Member must satisfy regular expression pattern: \A\S[\p{Print}]*\z",
        )
    return value


def custom_attributes_problem(raw: bytes) -> AwsErrorReply | None:
    """SageMaker's constraint on CustomAttributes: at most 1024 ASCII characters."""
    if raw.isascii() and len(raw) <= 1024:
        return None
    value = raw.decode("utf-8", "replace")
    if len(raw) > 1024:
        return _constraint(
            value[:64] + "...",
            "customAttributes",
            "Member must have length less than or equal to 1024",
        )
    return _constraint(
        value, "customAttributes", r"Member must satisfy regular expression pattern: \p{ASCII}*"
    )


def reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def triton_error_message(body: bytes) -> str:
    """Triton's `{"error": "..."}` body as text (or the raw body)."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body.decode("utf-8", "replace").strip()
    if isinstance(document, dict) and isinstance(document.get("error"), str):
        return str(document["error"])
    return body.decode("utf-8", "replace").strip()
