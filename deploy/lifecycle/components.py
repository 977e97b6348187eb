"""The plan's per-component changes (hosting components), compared without calling AWS.

`deploy up` makes inference components itself (the reasons are in
`deploy.hosting.components`): each model's component as it should be
(`deploy.hosting.component_sizing.Component`) is compared with the one on the
endpoint (`deploy.aws.inference_components.Deployed`):

    a model without a component        -> create
    its archive, image, environment or
    requirements differ, or it failed  -> update (UpdateInferenceComponent, rolling)
    its copy bounds differ             -> update (autoscaling only)
    a component without a model        -> delete (after the manifest is published)
    nothing differs                    -> no change

Each change is one action of the plan (`deploy.lifecycle.actions`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from deploy.aws.inference_components import Deployed, Requested
from deploy.hosting.component_sizing import Component

ComponentAction = Literal["create", "update", "delete"]


@dataclass(frozen=True)
class ComponentChange:
    """One component the plan creates, updates or deletes, and why."""

    name: str  # the InferenceComponentName
    model: str
    action: ComponentAction
    reasons: tuple[str, ...]
    component: Component | None = None  # what it becomes (None: deleted)
    respec: bool = False  # a new Specification (UpdateInferenceComponent)
    rescale: bool = False  # new copy bounds (autoscaling)

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "name": self.name,
            "model": self.model,
            "action": self.action,
            "why": ", ".join(self.reasons),
        }
        if self.component is not None:
            needs = self.component.spec.requirements
            document |= {
                "accelerators": needs.accelerators,
                "cpus": needs.cpus,
                "memory_mb": needs.memory_mb,
                "min_copies": self.component.spec.min_copies,
                "max_copies": self.component.spec.max_copies,
            }
        return document


def requested(component: Component, *, image: str, artifact_url: str) -> Requested:
    """The component as SageMaker's requests carry it."""
    spec = component.spec
    return Requested(
        name=component.name,
        image=image,
        artifact_url=artifact_url,
        environment=component.environment,
        accelerators=spec.requirements.accelerators,
        cpus=spec.requirements.cpus,
        memory_mb=spec.requirements.memory_mb,
        min_copies=spec.min_copies,
        max_copies=spec.max_copies,
    )


def plan_components(
    desired: Sequence[Component],
    deployed: Mapping[str, Deployed],
    *,
    image: str,
    artifact_url: Callable[[str], str],
) -> tuple[ComponentChange, ...]:
    """Creates and updates in model order, then deletes; an unchanged component has none."""
    changes: list[ComponentChange] = []
    wanted = {component.name for component in desired}
    for component in sorted(desired, key=lambda c: c.model):
        now = deployed.get(component.name)
        if now is None:
            changes.append(
                ComponentChange(
                    component.name, component.model, "create", ("new", *_size(component)), component
                )
            )
            continue
        goal = requested(component, image=image, artifact_url=artifact_url(component.archive_key))
        respec = _respec_reasons(goal, now)
        rescale = (now.min_copies, now.max_copies) != (goal.min_copies, goal.max_copies)
        reasons = list(respec)
        if rescale:
            was = f"{now.min_copies}-{now.max_copies}" if now.min_copies is not None else "none"
            reasons.append(f"copies {goal.min_copies}-{goal.max_copies} (was {was})")
        if reasons:
            changes.append(
                ComponentChange(
                    component.name,
                    component.model,
                    "update",
                    tuple(reasons),
                    component,
                    respec=bool(respec),
                    rescale=rescale,
                )
            )
    for name in sorted(set(deployed) - wanted):
        model = deployed[name].environment.get("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME", name)
        changes.append(
            ComponentChange(name, model, "delete", ("its model is no longer in the repository",))
        )
    return tuple(changes)


def _size(component: Component) -> tuple[str, ...]:
    needs = component.spec.requirements
    return (
        f"{needs.accelerators} GPU(s), {needs.cpus:g} vCPU(s), {needs.memory_mb} MB per copy, "
        f"{component.spec.min_copies}-{component.spec.max_copies} copies",
    )


def _respec_reasons(goal: Requested, now: Deployed) -> list[str]:
    reasons = []
    if now.status == "Failed":
        reasons.append(f"its last rollout failed ({now.failure_reason or 'no reason given'})")
    if now.artifact_url != goal.artifact_url:
        key, was = (url.rsplit("/", 1)[-1] for url in (goal.artifact_url, now.artifact_url))
        reasons.append(f"archive {key} (was {was})")
    if now.image != goal.image:
        reasons.append(f"image {goal.image} (was {now.image})")
    if dict(now.environment) != dict(goal.environment):
        reasons.append("environment")
    before = (now.accelerators, now.cpus, now.memory_mb)
    after = (goal.accelerators, goal.cpus, goal.memory_mb)
    if before[0] != after[0] or not math.isclose(before[1], after[1]) or before[2] != after[2]:
        reasons.append(
            f"requirements {after[0]} GPU(s), {after[1]:g} vCPU(s), {after[2]} MB "
            f"(were {before[0]}, {before[1]:g}, {before[2]})"
        )
    return reasons


def rolling_notes(changes: Sequence[ComponentChange]) -> tuple[str, ...]:
    """The plan's line on how the updated components roll out (their DeploymentConfig)."""
    updated = [c for c in changes if c.respec and c.component is not None]
    if not updated or updated[0].component is None:
        return ()
    config = updated[0].component.deployment
    policy = config.get("RollingUpdatePolicy", {})
    batch = policy.get("MaximumBatchSize", {})
    size = (
        f"{batch.get('Value')}% of the copies"
        if batch.get("Type") == "CAPACITY_PERCENT"
        else f"{batch.get('Value')} copies"
    )
    alarms = [a["AlarmName"] for a in config.get("AutoRollbackConfiguration", {}).get("Alarms", [])]
    return (
        f"component updates ({', '.join(c.model for c in updated)}) replace {size} at a "
        f"time, waiting {policy.get('WaitIntervalInSeconds')} s after each, at most "
        f"{policy.get('MaximumExecutionTimeoutInSeconds')} s in all; "
        + (
            f"rolled back when any of these alarms fires: {', '.join(alarms)}"
            if alarms
            else "no alarm rolls it back (rollout.alarms names none)"
        ),
    )
