"""The endpoint's `DeploymentConfig` from the stage's traffic policy (deploy.guardrails).

SageMaker updates the endpoint blue/green as the policy says (all at once,
canary then the rest, or linear steps, each followed by a baking wait) and
rolls the update back when one of the named alarms fires: the stage's own
(passed in, as the alarm constructs name them) and those `rollout.alarms` names.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_sagemaker as sagemaker

from deploy.guardrails import TrafficPolicy


def deployment_config(
    policy: TrafficPolicy, *, stage_alarm_names: Sequence[str]
) -> sagemaker.CfnEndpoint.DeploymentConfigProperty:
    """`BlueGreenUpdatePolicy` + `AutoRollbackConfiguration` for `policy`."""
    size = (
        sagemaker.CfnEndpoint.CapacitySizeProperty(type=policy.size[0], value=policy.size[1])
        if policy.size is not None
        else None
    )
    routing = sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
        type=policy.routing,
        wait_interval_in_seconds=policy.wait_interval_s,
        canary_size=size if policy.routing == "CANARY" else None,
        linear_step_size=size if policy.routing == "LINEAR" else None,
    )
    names = [*stage_alarm_names, *policy.extra_alarms]
    return sagemaker.CfnEndpoint.DeploymentConfigProperty(
        blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
            traffic_routing_configuration=routing,
            termination_wait_in_seconds=policy.termination_wait_s,
            maximum_execution_timeout_in_seconds=policy.maximum_execution_s,
        ),
        auto_rollback_configuration=(
            sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
                alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=n) for n in names]
            )
            if names
            else None
        ),
    )
