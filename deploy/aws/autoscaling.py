"""Application Auto Scaling: the bounds of an endpoint variant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from deploy.aws.session import AwsSession, aws_call

if TYPE_CHECKING:
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient


@dataclass(frozen=True)
class ScalingBounds:
    resource_id: str
    min_capacity: int
    max_capacity: int
    policies: tuple[str, ...]


def variant_resource_id(endpoint: str, variant: str) -> str:
    return f"endpoint/{endpoint}/variant/{variant}"


class AutoScaling:
    def __init__(self, session: AwsSession) -> None:
        self._session = session

    @property
    def _aas(self) -> ApplicationAutoScalingClient:
        client: ApplicationAutoScalingClient = self._session.client("application-autoscaling")
        return client

    def bounds(self, endpoint: str, variant: str) -> ScalingBounds | None:
        resource_id = variant_resource_id(endpoint, variant)
        with aws_call("application-autoscaling:DescribeScalableTargets", where=resource_id):
            targets = self._aas.describe_scalable_targets(
                ServiceNamespace="sagemaker", ResourceIds=[resource_id]
            )["ScalableTargets"]
            if not targets:
                return None
            policies = self._aas.describe_scaling_policies(
                ServiceNamespace="sagemaker", ResourceId=resource_id
            )["ScalingPolicies"]
        target = targets[0]
        return ScalingBounds(
            resource_id=resource_id,
            min_capacity=int(target["MinCapacity"]),
            max_capacity=int(target["MaxCapacity"]),
            policies=tuple(policy["PolicyName"] for policy in policies),
        )
