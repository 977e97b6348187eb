"""CloudWatch alarms that roll a model's canary back, with no process left running.

A canary on a multi-model endpoint (a second TargetModel taking a share of a
model's calls) gets two alarms on the per-model metrics (`deploy.client.model_metrics`):

- error rate: `ModelErrors / Requests` (metric math) over `canary_window_s`,
  above `canary_max_error_rate`;
- latency: p99 of `Latency` over `canary_window_s`, above `canary_max_p99_ms`.

Both judge one period the length of the window (the rate and the p99 of the
whole window), and treat missing data as not breaching: a canary nobody
calls stays. Their names start with `alarm_prefix(endpoint)`, which the endpoint
stack's EventBridge rule matches: on ALARM it runs the canary-rollback function
(deploy_handlers/canary_rollback), which removes that canary from the manifest.
`deploy up`, `deploy promote` and `deploy rollback` call `sync` after they
publish: it puts the alarms of every canary the manifest names and deletes
those of canaries it no longer names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deploy.aws.session import AwsSession, aws_call
from deploy.client import model_metrics as metrics
from deploy.client.manifest import Manifest
from deploy.guardrails import RolloutSettings

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient

ALARM_PREFIX = "deploy-canary-"
ERROR_RATE = "error-rate"
P99_LATENCY = "p99-latency"
KINDS = (ERROR_RATE, P99_LATENCY)  # the alarms each canary gets
MAX_ALARM_NAME = 255


def alarm_prefix(endpoint: str) -> str:
    """What every canary alarm of `endpoint` is named with first (the rule matches it)."""
    return f"{ALARM_PREFIX}{endpoint}/"


def alarm_name(endpoint: str, model: str, target_model: str, kind: str) -> str:
    """`deploy-canary-<endpoint>/<model>/<target model>/<kind>`; a name over CloudWatch's
    255 characters keeps the prefix and a digest of the rest."""
    name = f"{alarm_prefix(endpoint)}{model}/{target_model}/{kind}"
    if len(name) <= MAX_ALARM_NAME:
        return name
    digest = hashlib.sha256(f"{model}/{target_model}".encode()).hexdigest()[:32]
    return f"{alarm_prefix(endpoint)}{digest}/{kind}"


@dataclass(frozen=True)
class CanaryThresholds:
    """`[stages.X.rollout]`'s canary_max_error_rate, canary_max_p99_ms, canary_window_s."""

    max_error_rate: float
    max_p99_ms: float
    window_s: int

    @classmethod
    def of(cls, rollout: RolloutSettings) -> CanaryThresholds:
        return cls(
            rollout.canary_max_error_rate, rollout.canary_max_p99_ms, rollout.canary_window_s
        )


def _metric(endpoint: str, model: str, target_model: str, name: str) -> dict[str, Any]:
    return {
        "Namespace": metrics.NAMESPACE,
        "MetricName": name,
        "Dimensions": [
            {"Name": metrics.ENDPOINT, "Value": endpoint},
            {"Name": metrics.MODEL, "Value": model},
            {"Name": metrics.TARGET_MODEL, "Value": target_model},
        ],
    }


def alarm_definitions(
    endpoint: str, model: str, target_model: str, thresholds: CanaryThresholds
) -> list[dict[str, Any]]:
    """The PutMetricAlarm requests of one canary's two alarms."""
    window = thresholds.window_s
    common: dict[str, Any] = {
        "ComparisonOperator": "GreaterThanThreshold",
        "EvaluationPeriods": 1,
        "DatapointsToAlarm": 1,
        "TreatMissingData": "notBreaching",
        "ActionsEnabled": True,
    }
    what = f"model {model}'s canary {target_model} on endpoint {endpoint}"
    error_rate = {
        **common,
        "AlarmName": alarm_name(endpoint, model, target_model, ERROR_RATE),
        "AlarmDescription": (
            f"Rolls back {what} (deploy): ModelErrors / Requests over {window} s above "
            f"{thresholds.max_error_rate}."
        ),
        "Threshold": thresholds.max_error_rate,
        "Metrics": [
            {
                "Id": "errors",
                "MetricStat": {
                    "Metric": _metric(endpoint, model, target_model, metrics.MODEL_ERRORS),
                    "Period": window,
                    "Stat": "Sum",
                },
                "ReturnData": False,
            },
            {
                "Id": "requests",
                "MetricStat": {
                    "Metric": _metric(endpoint, model, target_model, metrics.REQUESTS),
                    "Period": window,
                    "Stat": "Sum",
                },
                "ReturnData": False,
            },
            {
                # No error datapoint in a window with requests is no error; no requests: no
                # datapoint at all (missing, not breaching).
                "Id": "error_rate",
                "Expression": "FILL(errors, 0) / requests",
                "Label": f"{model} canary error rate",
                "ReturnData": True,
            },
        ],
    }
    latency = {
        **common,
        "AlarmName": alarm_name(endpoint, model, target_model, P99_LATENCY),
        "AlarmDescription": (
            f"Rolls back {what} (deploy): p99 Latency over {window} s above "
            f"{thresholds.max_p99_ms} ms."
        ),
        **_metric(endpoint, model, target_model, metrics.LATENCY),
        "ExtendedStatistic": "p99",
        "Period": window,
        "Threshold": thresholds.max_p99_ms,
    }
    return [error_rate, latency]


def wanted(
    endpoint: str, manifest: Manifest | None, thresholds: CanaryThresholds
) -> dict[str, dict[str, Any]]:
    """Alarm name → its PutMetricAlarm request, for every canary `manifest` names."""
    found: dict[str, dict[str, Any]] = {}
    for name, info in sorted((manifest.models if manifest is not None else {}).items()):
        if info.canary is None:
            continue
        for request in alarm_definitions(endpoint, name, info.canary.target_model, thresholds):
            found[request["AlarmName"]] = request
    return found


class CanaryAlarms:
    """An endpoint's canary alarms through the CloudWatch API."""

    def __init__(self, session: AwsSession, endpoint: str) -> None:
        self._session = session
        self.endpoint = endpoint

    @property
    def _cw(self) -> CloudWatchClient:
        client: CloudWatchClient = self._session.client("cloudwatch")
        return client

    def states(self) -> dict[str, str]:
        """Each canary alarm of the endpoint: its state (OK, ALARM, INSUFFICIENT_DATA)."""
        prefix = alarm_prefix(self.endpoint)
        found: dict[str, str] = {}
        with aws_call("cloudwatch:DescribeAlarms", where=f"alarms {prefix}*"):
            paginator = self._cw.get_paginator("describe_alarms")
            for page in paginator.paginate(AlarmNamePrefix=prefix, AlarmTypes=["MetricAlarm"]):
                for alarm in page.get("MetricAlarms", []):
                    found[alarm["AlarmName"]] = alarm.get("StateValue", "")
        return found

    def sync(self, manifest: Manifest | None, thresholds: CanaryThresholds) -> dict[str, Any]:
        """Put the alarms of every canary `manifest` names; delete the endpoint's others."""
        requests: Mapping[str, dict[str, Any]] = wanted(self.endpoint, manifest, thresholds)
        for name, request in requests.items():
            with aws_call("cloudwatch:PutMetricAlarm", where=f"alarm {name}"):
                self._cw.put_metric_alarm(**request)
        stale = sorted(set(self.states()) - set(requests))
        for start in range(0, len(stale), 100):  # DeleteAlarms takes at most 100 names
            batch = stale[start : start + 100]
            with aws_call("cloudwatch:DeleteAlarms", where=f"alarms {', '.join(batch)}"):
                self._cw.delete_alarms(AlarmNames=batch)
        return {"alarms": sorted(requests), "deleted": stale}
