"""CloudWatch: recent errors and latency of an endpoint variant (`AWS/SageMaker`), and
each logical model's calls over a window (`Deploy/Models`, the per-model metrics the
front door and the SDK publish: `deploy.client.model_metrics`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from deploy.aws.session import AwsSession, aws_call
from deploy.client import model_metrics

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient

NAMESPACE = "AWS/SageMaker"


@dataclass(frozen=True)
class VariantHealth:
    window_minutes: int
    invocations: float
    errors_5xx: float
    model_latency_avg_ms: float | None  # ModelLatency is reported in microseconds
    model_latency_max_ms: float | None


class CloudWatch:
    def __init__(self, session: AwsSession) -> None:
        self._session = session

    @property
    def _cw(self) -> CloudWatchClient:
        client: CloudWatchClient = self._session.client("cloudwatch")
        return client

    def variant_health(
        self, endpoint: str, variant: str, *, minutes: int = 60, now: datetime | None = None
    ) -> VariantHealth:
        # End one period ahead: the current, still-filling minute is part of "recent".
        end = (now or datetime.now(UTC)) + timedelta(minutes=1)
        start = end - timedelta(minutes=minutes)
        dimensions = [
            {"Name": "EndpointName", "Value": endpoint},
            {"Name": "VariantName", "Value": variant},
        ]
        queries: list[tuple[str, str, str]] = [
            ("invocations", "Invocations", "Sum"),
            ("errors", "Invocation5XXErrors", "Sum"),
            ("latavg", "ModelLatency", "Average"),
            ("latmax", "ModelLatency", "Maximum"),
        ]
        with aws_call("cloudwatch:GetMetricData", where=f"endpoint {endpoint}/{variant}"):
            metric_queries: list[Any] = [
                {
                    "Id": query_id,
                    "MetricStat": {
                        "Metric": {
                            "Namespace": NAMESPACE,
                            "MetricName": metric,
                            "Dimensions": dimensions,
                        },
                        "Period": 60,
                        "Stat": stat,
                    },
                    "ReturnData": True,
                }
                for query_id, metric, stat in queries
            ]
            response = self._cw.get_metric_data(
                StartTime=start, EndTime=end, MetricDataQueries=metric_queries
            )
        results = response["MetricDataResults"]
        values = {item["Id"]: list(item.get("Values", [])) for item in results}

        def total(key: str) -> float:
            return float(sum(values.get(key, [])))

        averages = values.get("latavg", [])
        maxima = values.get("latmax", [])
        return VariantHealth(
            window_minutes=minutes,
            invocations=total("invocations"),
            errors_5xx=total("errors"),
            model_latency_avg_ms=(sum(averages) / len(averages) / 1000.0) if averages else None,
            model_latency_max_ms=(max(maxima) / 1000.0) if maxima else None,
        )

    def model_calls(
        self,
        endpoint: str,
        models: Mapping[str, str],
        *,
        window_s: int = 3600,
        now: datetime | None = None,
    ) -> list[dict[str, Any]]:
        """Per logical model (`models`: name → its TargetModel) over the last `window_s`:
        calls, errors by class, bytes, p50/p99 latency in seconds; rows shaped as
        `deploy.local.http.metrics.per_model`'s, sorted by name."""
        if not models:
            return []
        return _per_model(self, endpoint, models, window_s, now)


# -- per-model calls (`Deploy/Models`, what the front door and the SDK publish) ----------

# GetMetricData takes at most 500 queries a call.
_QUERIES_PER_CALL = 500
_MODEL_QUERIES: tuple[tuple[str, str, str], ...] = (
    ("calls", model_metrics.REQUESTS, "Sum"),
    ("p50", model_metrics.LATENCY, "p50"),
    ("p99", model_metrics.LATENCY, "p99"),
    ("client", model_metrics.CLIENT_ERRORS, "Sum"),
    ("model", model_metrics.MODEL_ERRORS, "Sum"),
    ("throttled", model_metrics.THROTTLES, "Sum"),
    ("sent", model_metrics.REQUEST_BYTES, "Sum"),
    ("answered", model_metrics.RESPONSE_BYTES, "Sum"),
)
# The error classes of a row, as `deploy status --local` names them (deploy.local.http.metrics).
ERROR_CLASSES = ("client", "model", "throttled")
_WINDOW = re.compile(r"^\s*(\d+)\s*([mhd])\s*$")
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400}
MAX_WINDOW_S = 15 * 86400  # one-minute data is kept 15 days


def parse_window(text: str) -> int:
    """`30m`, `1h`, `2d` as seconds; ValueError (saying what is taken) otherwise."""
    found = _WINDOW.match(text)
    seconds = int(found[1]) * _UNIT_SECONDS[found[2]] if found else 0
    if not 60 <= seconds <= MAX_WINDOW_S:
        raise ValueError(
            f"{text!r} is not a window: give minutes, hours or days from 1m to 15d, "
            "such as 30m, 1h or 2d"
        )
    return seconds


def _per_model(
    cw: CloudWatch, endpoint: str, models: Mapping[str, str], window_s: int, now: datetime | None
) -> list[dict[str, Any]]:
    # One period over the whole window, ending at the next whole minute (the current
    # minute is still filling), so each statistic comes back as one value.
    end = (now or datetime.now(UTC)).replace(second=0, microsecond=0) + timedelta(minutes=1)
    start = end - timedelta(seconds=window_s)
    names = sorted(models)
    queries: list[Any] = []
    for index, name in enumerate(names):
        dimensions = [
            {"Name": model_metrics.ENDPOINT, "Value": endpoint},
            {"Name": model_metrics.MODEL, "Value": name},
        ]
        queries += [
            {
                "Id": f"m{index}_{key}",
                "MetricStat": {
                    "Metric": {
                        "Namespace": model_metrics.NAMESPACE,
                        "MetricName": metric,
                        "Dimensions": dimensions,
                    },
                    "Period": window_s,
                    "Stat": stat,
                },
                "ReturnData": True,
            }
            for key, metric, stat in _MODEL_QUERIES
        ]
    values: dict[str, list[float]] = {}
    with aws_call("cloudwatch:GetMetricData", where=f"endpoint {endpoint} (per-model metrics)"):
        for first in range(0, len(queries), _QUERIES_PER_CALL):
            request: dict[str, Any] = {
                "StartTime": start,
                "EndTime": end,
                "MetricDataQueries": queries[first : first + _QUERIES_PER_CALL],
            }
            while True:
                response = cw._cw.get_metric_data(**request)
                for item in response["MetricDataResults"]:
                    values.setdefault(item["Id"], []).extend(item.get("Values", []))
                token = response.get("NextToken")
                if not token:
                    break
                request["NextToken"] = token
    rows = []
    for index, name in enumerate(names):

        def total(key: str, index: int = index) -> int:
            return round(sum(values.get(f"m{index}_{key}", [])))

        def seconds(key: str, index: int = index) -> float | None:
            # More than one value only when CloudWatch split the window: the largest
            # is an upper bound of the window's percentile.
            found = values.get(f"m{index}_{key}", [])
            return max(found) / 1000.0 if found else None

        rows.append(
            {
                "model": name,
                "target_model": models[name],
                "calls": total("calls"),
                "errors": {kind: total(kind) for kind in ERROR_CLASSES},
                "request_bytes": total("sent"),
                "response_bytes": total("answered"),
                "p50_seconds": seconds("p50"),
                "p99_seconds": seconds("p99"),
            }
        )
    return rows
