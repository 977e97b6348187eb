"""CloudWatch: recent errors and latency of an endpoint variant (`AWS/SageMaker`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from deploy.aws.session import AwsSession, aws_call

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
