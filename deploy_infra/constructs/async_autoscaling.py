"""Autoscaling for an asynchronous endpoint: on its queue, optionally down to zero.

AWS's recipe (docs.aws.amazon.com/sagemaker/latest/dg/async-inference-autoscale.html):
target tracking on `ApproximateBacklogSizePerInstance` (queued requests per
instance). That metric has no value without instances, so an endpoint allowed
to scale to zero (`min_capacity = 0`) also gets a step-scaling policy on
`HasBacklogWithoutCapacity` that adds an instance when requests wait and none
runs.
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from constructs import Construct

from deploy_infra.constructs.autoscaling import SAGEMAKER_AUTOSCALING_ROLE
from deploy_infra.constructs.sagemaker_endpoint import VariantEndpoint

VARIANT_METRICS = "AWS/SageMaker"


def _endpoint_metric(name: str, endpoint_name: str) -> cloudwatch.Metric:
    # The asynchronous queue metrics are per endpoint (dimension EndpointName only).
    return cloudwatch.Metric(
        namespace=VARIANT_METRICS,
        metric_name=name,
        dimensions_map={"EndpointName": endpoint_name},
        statistic="Average",
        period=Duration.minutes(1),
    )


class AsyncAutoscaling(Construct):
    """Scalable target (min may be 0), backlog target tracking, scale-out from zero."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: VariantEndpoint,
        min_capacity: int,
        max_capacity: int,
        backlog_per_instance: float,
        scale_in_cooldown: Duration,
        scale_out_cooldown: Duration,
    ) -> None:
        super().__init__(scope, construct_id)
        if not 0 <= min_capacity <= max_capacity or max_capacity < 1:
            raise ValueError("need 0 <= min_capacity <= max_capacity and max_capacity >= 1")
        service_linked_role = iam.Role.from_role_arn(
            self,
            "ServiceLinkedRole",
            Stack.of(self).format_arn(
                service="iam", region="", resource="role", resource_name=SAGEMAKER_AUTOSCALING_ROLE
            ),
        )
        self.target = appscaling.ScalableTarget(
            self,
            "Target",
            role=service_linked_role,
            service_namespace=appscaling.ServiceNamespace.SAGEMAKER,
            resource_id=f"endpoint/{endpoint.endpoint_name}/variant/{endpoint.variant_name}",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=min_capacity,
            max_capacity=max_capacity,
        )
        self.target.node.add_dependency(endpoint.endpoint)
        self.target.scale_to_track_metric(
            "Backlog",
            target_value=backlog_per_instance,
            custom_metric=_endpoint_metric(
                "ApproximateBacklogSizePerInstance", endpoint.endpoint_name
            ),
            scale_in_cooldown=scale_in_cooldown,
            scale_out_cooldown=scale_out_cooldown,
        )
        self.scale_from_zero: appscaling.StepScalingPolicy | None = None
        if min_capacity == 0:
            self.scale_from_zero = self.target.scale_on_metric(
                "FromZero",
                metric=_endpoint_metric("HasBacklogWithoutCapacity", endpoint.endpoint_name),
                # 1 while requests wait and no instance runs: add one.
                scaling_steps=[
                    appscaling.ScalingInterval(upper=0, change=0),
                    appscaling.ScalingInterval(lower=0.5, change=1),
                ],
                adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
                cooldown=scale_out_cooldown,
                evaluation_periods=1,
                metric_aggregation_type=appscaling.MetricAggregationType.AVERAGE,
            )
