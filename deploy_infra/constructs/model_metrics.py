"""Per-model observability of an endpoint: Triton's metrics on, SageMaker's detailed
observability, and a dashboard section per logical model.

- `TRITON_METRICS_ENV` lets the SageMaker Triton image's `serve` script start
  Triton with its metrics (it passes `--allow-metrics=false` unless
  `SAGEMAKER_TRITON_ALLOW_METRICS=true`). The inf1 Neuron image's own `serve`
  (deploy_infra/neuron/serve) keeps them off, so it does not get the variable.
- `metrics_config()` is the EndpointConfig's `MetricsConfig` with
  `EnableDetailedObservability` (container-level inference metrics, per-GPU and
  per-instance host metrics), setting `infra.detailed_observability`.
  `ContainerMetricsConfig` (SageMaker scraping a Prometheus path) exists only on
  inference components, and its path is served on the container's port 8080,
  where Triton's SageMaker frontend answers no `/metrics` (Triton serves them on
  its own metrics port): it is left out.
- `model_rows()`: the dashboard widgets for each logical model of the manifest,
  read from the per-model metrics the front door and the SDK publish
  (`deploy.client.model_metrics`, namespace `Deploy/Models`), since SageMaker
  publishes none per model on a multi-model endpoint.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from deploy.catalogue import images
from deploy.client import model_metrics
from deploy.config import DeploySettings
from deploy.lifecycle.packaged_models import MODELS_CONTEXT, models_from_context, packaged_models
from deploy_infra.errors import InfraConfigError

TRITON_METRICS_ENV = images.TRITON_METRICS_ENV
_MINUTE = Duration.minutes(1)


def metrics_config(enabled: bool) -> sagemaker.CfnEndpointConfig.MetricsConfigProperty | None:
    """The EndpointConfig's MetricsConfig (None: SageMaker's defaults)."""
    if not enabled:
        return None
    return sagemaker.CfnEndpointConfig.MetricsConfigProperty(enable_detailed_observability=True)


def dashboard_models(scope: Construct, settings: DeploySettings) -> list[str]:
    """The logical models the dashboard shows: the `deploy:models` context `deploy up`
    passes, else the stage's packaged manifest."""
    try:
        given = models_from_context(scope.node.try_get_context(MODELS_CONTEXT))
    except ValueError as exc:
        raise InfraConfigError(
            str(exc), where=f"-c {MODELS_CONTEXT}", fix='pass a JSON list: ["a", "b"]'
        ) from exc
    return given if given is not None else packaged_models(settings)


def _metric(endpoint_name: str, model: str, name: str, statistic: str) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=model_metrics.NAMESPACE,
        metric_name=name,
        dimensions_map={model_metrics.ENDPOINT: endpoint_name, model_metrics.MODEL: model},
        statistic=statistic,
        period=_MINUTE,
        label=f"{name} {statistic}" if statistic != "Sum" else name,
    )


def model_rows(endpoint_name: str, models: Sequence[str]) -> list[list[cloudwatch.IWidget]]:
    """Per model: a title, then requests, latency p50/p99 and errors by class."""
    rows: list[list[cloudwatch.IWidget]] = []
    for model in models:

        def metric(name: str, statistic: str, model: str = model) -> cloudwatch.Metric:
            return _metric(endpoint_name, model, name, statistic)

        rows.append([cloudwatch.TextWidget(markdown=f"### Model `{model}`", width=24, height=1)])
        rows.append(
            [
                cloudwatch.GraphWidget(
                    title=f"{model}: requests",
                    left=[metric(model_metrics.REQUESTS, "Sum")],
                    width=8,
                ),
                cloudwatch.GraphWidget(
                    title=f"{model}: latency (ms)",
                    left=[
                        metric(model_metrics.LATENCY, "p50"),
                        metric(model_metrics.LATENCY, "p99"),
                    ],
                    width=8,
                ),
                cloudwatch.GraphWidget(
                    title=f"{model}: errors",
                    left=[metric(name, "Sum") for name in model_metrics.ERROR_METRICS],
                    width=8,
                ),
            ]
        )
    return rows
