"""Autoscaling for a SageMaker endpoint variant."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from constructs import Construct

from deploy_infra.constructs.sagemaker_endpoint import VariantEndpoint

SAGEMAKER_AUTOSCALING_ROLE = (
    "aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
    "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
)


class VariantAutoscaling(Construct):
    """Scalable target on the variant's instance count, with target-tracking policies.

    AWS recommends `SageMakerVariantInvocationsPerInstance` for multi-model
    endpoints; a GPU-utilisation policy can be added for GPU instances (the
    larger desired count of the two wins).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint: VariantEndpoint,
        min_capacity: int,
        max_capacity: int,
        invocations_per_instance: float,
        scale_in_cooldown: Duration,
        scale_out_cooldown: Duration,
        gpu_utilization_percent: float | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        # The service-linked role Application Auto Scaling uses for SageMaker; naming its
        # full ARN makes CloudFormation create it if the account has none yet (without
        # it, CDK would add an empty role of its own).
        service_linked_role = iam.Role.from_role_arn(
            self,
            "ServiceLinkedRole",
            Stack.of(self).format_arn(
                service="iam",
                region="",
                resource="role",
                resource_name=SAGEMAKER_AUTOSCALING_ROLE,
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
        # The variant must exist before Application Auto Scaling can register it.
        self.target.node.add_dependency(endpoint.endpoint)
        self.target.scale_to_track_metric(
            "Invocations",
            target_value=invocations_per_instance,
            predefined_metric=appscaling.PredefinedMetric.SAGEMAKER_VARIANT_INVOCATIONS_PER_INSTANCE,
            scale_in_cooldown=scale_in_cooldown,
            scale_out_cooldown=scale_out_cooldown,
        )
        if gpu_utilization_percent is not None:
            self.target.scale_to_track_metric(
                "GpuUtilization",
                target_value=gpu_utilization_percent,
                custom_metric=cloudwatch.Metric(
                    namespace="/aws/sagemaker/Endpoints",
                    metric_name="GPUUtilization",
                    dimensions_map={
                        "EndpointName": endpoint.endpoint_name,
                        "VariantName": endpoint.variant_name,
                    },
                    statistic="Average",
                    period=Duration.minutes(1),
                ),
                scale_in_cooldown=scale_in_cooldown,
                scale_out_cooldown=scale_out_cooldown,
            )
