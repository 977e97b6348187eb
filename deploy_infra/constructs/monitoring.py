"""Alarms, their SNS topic and a dashboard for a SageMaker endpoint.

Latency metrics (`ModelLatency`, `ModelLoadingWaitTime`, ...) are reported in
microseconds; thresholds are configured in milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from deploy.guardrails import STAGE_ROLLBACK_ALARMS
from deploy_infra.constructs.model_metrics import model_rows

if TYPE_CHECKING:
    from deploy.config import InfraSettings

VARIANT_METRICS = "AWS/SageMaker"
# Every alarm an endpoint may have (GPU memory only on GPU instances, the last two
# only on serverless endpoints); each is
# named `<endpoint_name>-<alarm>`, so grants can name them exactly.
ALARMS = (
    "Invocation5XXErrors",
    "ModelLatencyP99",
    "ModelLoadingWaitTime",
    "MemoryUtilization",
    "DiskUtilization",
    "GPUMemoryUtilization",
    # serverless endpoints (deploy_infra.constructs.serverless_monitoring)
    "ModelSetupTime",
    "ConcurrentExecutionsUtilization",
)
INSTANCE_METRICS = "/aws/sagemaker/Endpoints"
_MINUTE = Duration.minutes(1)


@dataclass(frozen=True)
class AlarmThresholds:
    errors_5xx: int
    latency_p99_ms: float
    loading_wait_ms: float
    memory_percent: float
    gpu_memory_percent: float
    disk_percent: float

    @classmethod
    def from_settings(cls, infra: InfraSettings) -> AlarmThresholds:
        return cls(
            errors_5xx=infra.alarm_5xx_errors,
            latency_p99_ms=infra.alarm_model_latency_p99_ms,
            loading_wait_ms=infra.alarm_model_loading_wait_ms,
            memory_percent=infra.alarm_memory_percent,
            gpu_memory_percent=infra.alarm_gpu_memory_percent,
            disk_percent=infra.alarm_disk_percent,
        )


def alarm_arns(scope: Construct, *, endpoint_name: str) -> list[str]:
    """The ARNs of `endpoint_name`'s alarms: exact, so another stage's never match."""
    return [
        Stack.of(scope).format_arn(
            service="cloudwatch",
            resource="alarm",
            resource_name=f"{endpoint_name}-{alarm}",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        for alarm in ALARMS
    ]


def alarm_topic(
    scope: Construct,
    construct_id: str,
    *,
    endpoint_name: str,
    key: kms.IKey,
    existing_topic_arn: str | None = None,
    email: str | None = None,
) -> sns.ITopic:
    """The SNS topic the endpoint's alarms publish to, with `email` subscribed if given.

    `existing_topic_arn` names a topic managed elsewhere; otherwise a topic encrypted
    with `key` is created, TLS-only. Built in `scope` itself (a function, not a
    construct) so the topic keeps the construct id, and logical id, `construct_id`.
    """
    if existing_topic_arn is not None:
        topic: sns.ITopic = sns.Topic.from_topic_arn(scope, construct_id, existing_topic_arn)
    else:
        topic = sns.Topic(
            scope,
            construct_id,
            display_name=f"{endpoint_name} alarms",
            master_key=key,
            enforce_ssl=True,
        )
        # The TLS-only topic policy replaces SNS's default one, so CloudWatch needs
        # its own grant: this endpoint's alarms only, named exactly (a pattern such
        # as `<endpoint>-*` would match another stage's `<endpoint>-staging-*`).
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EndpointAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={
                    "ArnEquals": {"aws:SourceArn": alarm_arns(scope, endpoint_name=endpoint_name)},
                    "StringEquals": {"aws:SourceAccount": Stack.of(scope).account},
                },
            )
        )
    if email is not None:
        topic.add_subscription(subscriptions.EmailSubscription(email))
    return topic


def _metric(
    namespace: str, name: str, endpoint_name: str, variant_name: str, statistic: str
) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=name,
        dimensions_map={"EndpointName": endpoint_name, "VariantName": variant_name},
        statistic=statistic,
        period=_MINUTE,
    )


class EndpointAlarms(Construct):
    """Alarms routed to `topic`; `rollback_alarms` also drive blue/green auto-rollback.

    Alarm names are fixed strings derived from the endpoint name, so the endpoint's
    deployment config can name them without a dependency cycle.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        variant_name: str,
        thresholds: AlarmThresholds,
        topic: sns.ITopic,
        has_gpu: bool,
    ) -> None:
        super().__init__(scope, construct_id)

        def metric(namespace: str, name: str, statistic: str) -> cloudwatch.Metric:
            return _metric(namespace, name, endpoint_name, variant_name, statistic)

        specs: list[tuple[str, cloudwatch.Metric, float, int, str]] = [
            (
                "Invocation5XXErrors",
                metric(VARIANT_METRICS, "Invocation5XXErrors", "Sum"),
                thresholds.errors_5xx,
                1,
                "the endpoint answered 5XX errors",
            ),
            (
                "ModelLatencyP99",
                metric(VARIANT_METRICS, "ModelLatency", "p99"),
                thresholds.latency_p99_ms * 1000,
                3,
                "p99 model latency is above the threshold",
            ),
            (
                "ModelLoadingWaitTime",
                metric(VARIANT_METRICS, "ModelLoadingWaitTime", "Average"),
                thresholds.loading_wait_ms * 1000,
                3,
                "requests wait for models to load (cache too small or cold)",
            ),
            (
                "MemoryUtilization",
                metric(INSTANCE_METRICS, "MemoryUtilization", "Maximum"),
                thresholds.memory_percent,
                5,
                "host memory is nearly full",
            ),
            (
                "DiskUtilization",
                metric(INSTANCE_METRICS, "DiskUtilization", "Maximum"),
                thresholds.disk_percent,
                5,
                "the model cache disk is nearly full",
            ),
        ]
        if has_gpu:
            specs.append(
                (
                    "GPUMemoryUtilization",
                    metric(INSTANCE_METRICS, "GPUMemoryUtilization", "Maximum"),
                    thresholds.gpu_memory_percent,
                    5,
                    "GPU memory is nearly full",
                )
            )
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

    @property
    def rollback_alarm_names(self) -> list[str]:
        return [self.alarms[n].alarm_name for n in STAGE_ROLLBACK_ALARMS]


class EndpointDashboard(Construct):
    """Invocations, latency, errors, instance count and the MME cache metrics, then a
    section per logical model in `models` (deploy_infra.constructs.model_metrics)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        variant_name: str,
        has_gpu: bool,
        models: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, construct_id)

        def metric(
            name: str, statistic: str, namespace: str = VARIANT_METRICS
        ) -> cloudwatch.Metric:
            return _metric(namespace, name, endpoint_name, variant_name, statistic)

        def graph(title: str, *metrics: cloudwatch.Metric) -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(title=title, left=list(metrics), width=8)

        utilisation = [
            metric("CPUUtilization", "Average", INSTANCE_METRICS),
            metric("MemoryUtilization", "Average", INSTANCE_METRICS),
            metric("DiskUtilization", "Average", INSTANCE_METRICS),
        ]
        if has_gpu:
            utilisation += [
                metric("GPUUtilization", "Average", INSTANCE_METRICS),
                metric("GPUMemoryUtilization", "Average", INSTANCE_METRICS),
            ]
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"{endpoint_name}-triton-mme",
            widgets=[
                [
                    graph("Invocations", metric("Invocations", "Sum")),
                    graph(
                        "Model latency (µs)",
                        metric("ModelLatency", "p50"),
                        metric("ModelLatency", "p99"),
                    ),
                    graph(
                        "Errors",
                        metric("Invocation4XXErrors", "Sum"),
                        metric("Invocation5XXErrors", "Sum"),
                    ),
                ],
                [
                    graph("Instances", metric("CPUUtilization", "SampleCount", INSTANCE_METRICS)),
                    graph("Loaded models", metric("LoadedModelCount", "Maximum")),
                    graph("Model cache hit", metric("ModelCacheHit", "Average")),
                ],
                [
                    graph(
                        "Model loading (µs)",
                        metric("ModelLoadingTime", "Average"),
                        metric("ModelLoadingWaitTime", "Average"),
                        metric("ModelDownloadingTime", "Average"),
                    ),
                    graph("Utilisation (%)", *utilisation),
                ],
                *model_rows(endpoint_name, models),
            ],
        )
