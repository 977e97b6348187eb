"""Per-model call metrics as CloudWatch embedded metric format (EMF) records.

SageMaker publishes no per-model metrics for a multi-model endpoint, so the
callers publish them: the Lambda front door on every inference request, and
the SDK when asked to (`Endpoint(metrics=...)`). Each call is one JSON object
on one line; CloudWatch Logs turns the line into metrics in the namespace
`Deploy/Models` under two dimension sets, [Endpoint, Model] and [Endpoint,
Model, TargetModel]: `Model` is the manifest's logical name, `TargetModel` the
archive key (or the router's target) the call was sent to, so a canary's
calls are told from the stable version's. `deploy status`, the stage's
dashboard and per-model alarms read these names, so they live here only.

Every record carries every metric (an error count of 0 on success), so
`Sum(ModelErrors) / Sum(Requests)` is an error rate and `Latency`'s
percentiles cover every call. Errors are counted by class (`error_class`):
429s and throttling codes are `Throttles`; SageMaker's `ModelError` and any
5xx are `ModelErrors`; other 4xx (validation included) are `ClientErrors`.

The record is written here rather than with awslabs' `aws-embedded-metrics`:
that library is a dependency the SDK and the Lambda bundle do not otherwise
have (both depend on nothing of ours or beyond their own short lists), it
flushes through a per-call `MetricsLogger` built around asyncio and
environment detection (it probes for the Lambda/EC2/ECS environment on first
use), and a record is a small, documented JSON object
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html).
Standard library only: the Lambda bundle carries this file as
`deploy_handlers/front_door/model_metrics.py`, a byte-for-byte copy (a test
compares the two).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

NAMESPACE = "Deploy/Models"
ENDPOINT = "Endpoint"
MODEL = "Model"
TARGET_MODEL = "TargetModel"
DIMENSION_SETS: tuple[tuple[str, ...], ...] = ((ENDPOINT, MODEL), (ENDPOINT, MODEL, TARGET_MODEL))

REQUESTS = "Requests"
LATENCY = "Latency"  # the whole call as the emitter sees it
CLIENT_ERRORS = "ClientErrors"
MODEL_ERRORS = "ModelErrors"
THROTTLES = "Throttles"
REQUEST_BYTES = "RequestBytes"
RESPONSE_BYTES = "ResponseBytes"
UNITS: dict[str, str] = {
    REQUESTS: "Count",
    LATENCY: "Milliseconds",
    CLIENT_ERRORS: "Count",
    MODEL_ERRORS: "Count",
    THROTTLES: "Count",
    REQUEST_BYTES: "Bytes",
    RESPONSE_BYTES: "Bytes",
}
ERROR_METRICS = (CLIENT_ERRORS, MODEL_ERRORS, THROTTLES)

# Dimension values for a call that names no model the manifest knows, or reached no
# TargetModel: callers choose names, and each distinct value is a new (billed) metric.
UNKNOWN_MODEL = "(unknown)"
NO_TARGET = "(none)"
# CloudWatch takes dimension values of 1 to 1024 characters.
_MAX_VALUE = 1024

_THROTTLING_CODES = frozenset(
    {"ThrottlingException", "Throttling", "ThrottledException", "TooManyRequestsException"}
)


def directive() -> list[dict[str, Any]]:
    """The `_aws.CloudWatchMetrics` member: which members are metrics, under which
    dimension sets (a new list each time)."""
    return [
        {
            "Namespace": NAMESPACE,
            "Dimensions": [list(names) for names in DIMENSION_SETS],
            "Metrics": [{"Name": name, "Unit": unit} for name, unit in UNITS.items()],
        }
    ]


# Shared by every record (built once: a record is written out as soon as it is made).
_DIRECTIVE = directive()


def error_class(status: int, code: str | None = None) -> str | None:
    """The error metric a call answered with `status` (and service error `code`) counts
    in: `THROTTLES`, `MODEL_ERRORS` or `CLIENT_ERRORS`; None for a success."""
    if status == 429 or code in _THROTTLING_CODES:
        return THROTTLES
    if code == "ModelError" or status >= 500:
        return MODEL_ERRORS
    if status >= 400:
        return CLIENT_ERRORS
    return None


def _value(text: str | None, empty: str) -> str:
    return text[:_MAX_VALUE] if text else empty


def record(
    *,
    endpoint: str,
    model: str | None,
    target_model: str | None,
    latency_ms: float,
    request_bytes: int = 0,
    response_bytes: int = 0,
    error: str | None = None,
    timestamp_ms: int | None = None,
) -> dict[str, Any]:
    """One call as an EMF object: the directive under `_aws` (one object shared by every
    record: write it out, do not change it), the dimensions and metrics as members.
    `error` is what `error_class` answered (None: a success)."""
    if error is not None and error not in ERROR_METRICS:
        raise ValueError(f"error must be one of {', '.join(ERROR_METRICS)} or None, not {error!r}")
    return {
        "_aws": {
            "Timestamp": int(time.time() * 1000) if timestamp_ms is None else timestamp_ms,
            "CloudWatchMetrics": _DIRECTIVE,
        },
        ENDPOINT: _value(endpoint, NO_TARGET),
        MODEL: _value(model, UNKNOWN_MODEL),
        TARGET_MODEL: _value(target_model, NO_TARGET),
        REQUESTS: 1,
        LATENCY: round(latency_ms, 3),
        CLIENT_ERRORS: int(error == CLIENT_ERRORS),
        MODEL_ERRORS: int(error == MODEL_ERRORS),
        THROTTLES: int(error == THROTTLES),
        REQUEST_BYTES: request_bytes,
        RESPONSE_BYTES: response_bytes,
    }


def line(document: Mapping[str, Any]) -> str:
    """A record as one line of compact JSON (what CloudWatch Logs reads)."""
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)
