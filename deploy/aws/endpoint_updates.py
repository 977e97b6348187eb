"""An endpoint update in flight, as DescribeEndpoint tells it: one line for the rollout view.

During a blue/green update SageMaker reports the new fleet under
`PendingDeploymentSummary` (each variant's `VariantStatus`: Creating,
Updating, ActivatingTraffic, Baking, ...), the policy it runs under
`LastDeploymentConfig`, and, once an alarm has rolled the update back, the
endpoint is InService again with a `FailureReason`. Parsing only: the calls
are `deploy.aws.sagemaker`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def shift_policy(config: Mapping[str, Any] | None) -> str:
    """`LastDeploymentConfig` in words: "canary 20%", "linear 1 instance(s)", "all at once"."""
    routing = ((config or {}).get("BlueGreenUpdatePolicy") or {}).get(
        "TrafficRoutingConfiguration"
    ) or {}
    kind = str(routing.get("Type", ""))
    size = routing.get("CanarySize") or routing.get("LinearStepSize") or {}
    amount = ""
    if size:
        value = size.get("Value")
        amount = f" {value}%" if size.get("Type") == "CAPACITY_PERCENT" else f" {value} instance(s)"
    if kind == "CANARY":
        return f"canary{amount}"
    if kind == "LINEAR":
        return f"linear{amount} per step"
    return "all at once" if kind == "ALL_AT_ONCE" else ""


def shift_progress(response: Mapping[str, Any]) -> str:
    """Where the update stands ("" when none is pending and nothing rolls back)."""
    status = response.get("EndpointStatus", "")
    pending = response.get("PendingDeploymentSummary") or {}
    parts: list[str] = []
    for variant in pending.get("ProductionVariants", []):
        steps = [
            str(item.get("Status", ""))
            + (f" ({item['StatusMessage']})" if item.get("StatusMessage") else "")
            for item in variant.get("VariantStatus", [])
        ]
        counts = ""
        if "DesiredInstanceCount" in variant:
            counts = (
                f" {variant.get('CurrentInstanceCount', 0)}/"
                f"{variant['DesiredInstanceCount']} instance(s)"
            )
        parts.append(f"{variant.get('VariantName', '?')}{counts}: {', '.join(steps) or 'pending'}")
    if not parts and status != "RollingBack":
        return ""
    policy = shift_policy(response.get("LastDeploymentConfig"))
    target = pending.get("EndpointConfigName")
    head = " ".join(part for part in (policy, f"to {target}" if target else "") if part)
    line = f"{head}: {'; '.join(parts)}" if head and parts else head or "; ".join(parts)
    if status == "RollingBack":
        reason = response.get("FailureReason")
        return "rolling back" + (f" ({reason})" if reason else "") + (f"; {line}" if parts else "")
    return line
