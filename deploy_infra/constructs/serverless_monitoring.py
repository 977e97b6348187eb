"""Alarms and a dashboard for a SageMaker serverless endpoint.

A serverless endpoint publishes a smaller set of metrics than one on instances
(no disk, GPU or per-instance figures, no multi-model cache): the common
invocation metrics, `ModelSetupTime` (the cold start: download the model,
start the container, answer `/ping`; SageMaker gives up after 3 minutes),
`MemoryUtilization`, `ServerlessConcurrentExecutionsUtilization` (concurrent
executions over MaxConcurrency; past 1 requests are throttled) and, with
provisioned concurrency, the `ServerlessProvisionedConcurrency*` metrics.
docs.aws.amazon.com/sagemaker/latest/dg/serverless-endpoints-monitoring.html

Alarm names are `<endpoint_name>-<alarm>` and every one is listed in
`monitoring.ALARMS`, which the alarm topic's and the model-store key's grants name.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from deploy_infra.constructs.model_metrics import model_rows
from deploy_infra.constructs.monitoring import (
    ALARMS,
    INSTANCE_METRICS,
    VARIANT_METRICS,
    AlarmThresholds,
)

# SageMaker's start budget for a serverless copy (download + container start + /ping).
START_BUDGET_S = 180
# Cold starts at two thirds of the budget are a warning sign: the next larger
# archive (or a slower download) fails the start.
SETUP_ALARM_S = 120
# ServerlessConcurrentExecutionsUtilization is a ratio (executions / MaxConcurrency).
CONCURRENCY_ALARM_RATIO = 0.9
_MINUTE = Duration.minutes(1)


class _Metrics:
    """The endpoint variant's metrics, one minute apart."""

    def __init__(self, endpoint_name: str, variant_name: str) -> None:
        self._dimensions = {"EndpointName": endpoint_name, "VariantName": variant_name}

    def __call__(
        self, name: str, statistic: str, namespace: str = VARIANT_METRICS
    ) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=namespace,
            metric_name=name,
            dimensions_map=self._dimensions,
            statistic=statistic,
            period=_MINUTE,
        )


class ServerlessAlarms(Construct):
    """5XX errors, p99 latency, memory, cold-start time and concurrency, to `topic`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        variant_name: str,
        thresholds: AlarmThresholds,
        topic: sns.ITopic,
    ) -> None:
        super().__init__(scope, construct_id)
        metric = _Metrics(endpoint_name, variant_name)
        specs: list[tuple[str, cloudwatch.Metric, float, int, str]] = [
            (
                "Invocation5XXErrors",
                metric("Invocation5XXErrors", "Sum"),
                thresholds.errors_5xx,
                1,
                "the endpoint answered 5XX errors",
            ),
            (
                "ModelLatencyP99",
                metric("ModelLatency", "p99"),
                thresholds.latency_p99_ms * 1000,  # reported in microseconds
                3,
                "p99 model latency is above the threshold (calls end at 60 s)",
            ),
            (
                "MemoryUtilization",
                metric("MemoryUtilization", "Maximum", INSTANCE_METRICS),
                thresholds.memory_percent,
                5,
                "memory is nearly full: raise serverless_memory_mb",
            ),
            (
                "ModelSetupTime",
                metric("ModelSetupTime", "Maximum"),
                SETUP_ALARM_S * 1_000_000,  # microseconds
                1,
                f"a cold start took over {SETUP_ALARM_S} s of the {START_BUDGET_S} s SageMaker "
                "allows: shrink the archive or keep copies warm "
                "(serverless_provisioned_concurrency)",
            ),
            (
                "ConcurrentExecutionsUtilization",
                metric("ServerlessConcurrentExecutionsUtilization", "Maximum"),
                CONCURRENCY_ALARM_RATIO,
                5,
                "concurrent calls are close to serverless_max_concurrency; past it SageMaker "
                "throttles",
            ),
        ]
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        action = actions.SnsAction(topic)
        for name, alarm_metric, threshold, periods, why in specs:
            assert name in ALARMS  # grants name every alarm exactly
            alarm = cloudwatch.Alarm(
                self,
                name,
                alarm_name=f"{endpoint_name}-{name}",
                alarm_description=f"{endpoint_name}: {why}",
                metric=alarm_metric,
                threshold=threshold,
                evaluation_periods=periods,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
            self.alarms[name] = alarm


class ServerlessDashboard(Construct):
    """Invocations, latency, errors, cold starts, concurrency and memory, then a section
    per logical model in `models` (deploy_infra.constructs.model_metrics)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        variant_name: str,
        provisioned: bool,
        models: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        metric = _Metrics(endpoint_name, variant_name)

        def graph(title: str, *metrics: cloudwatch.Metric) -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(title=title, left=list(metrics), width=8)

        concurrency = [metric("ServerlessConcurrentExecutionsUtilization", "Maximum")]
        if provisioned:
            concurrency += [
                metric("ServerlessProvisionedConcurrencyUtilization", "Maximum"),
                metric("ServerlessProvisionedConcurrencySpilloverInvocations", "Sum"),
            ]
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"{endpoint_name}-triton-serverless",
            widgets=[
                [
                    graph("Invocations", metric("Invocations", "Sum")),
                    graph(
                        "Latency (µs)",
                        metric("ModelLatency", "p50"),
                        metric("ModelLatency", "p99"),
                        metric("OverheadLatency", "p99"),
                    ),
                    graph(
                        "Errors",
                        metric("Invocation4XXErrors", "Sum"),
                        metric("Invocation5XXErrors", "Sum"),
                    ),
                ],
                [
                    graph(
                        "Cold starts: model setup (µs)",
                        metric("ModelSetupTime", "Average"),
                        metric("ModelSetupTime", "Maximum"),
                    ),
                    graph("Concurrency", *concurrency),
                    graph("Memory (%)", metric("MemoryUtilization", "Maximum", INSTANCE_METRICS)),
                ],
                *model_rows(endpoint_name, models),
            ],
        )
