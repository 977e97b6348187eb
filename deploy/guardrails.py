"""How an endpoint update shifts traffic: the `[stages.X.rollout]` settings and the policy.

SageMaker's deployment guardrails update an endpoint blue/green: a new fleet
starts, traffic moves to it all at once, in a canary and then the rest, or in
linear steps, with a wait (baking) after each, and the whole update rolls back
when one of the named CloudWatch alarms fires. `RolloutSettings` is what a
stage asks for; `policy_for` is what SageMaker will actually run, which is not
always the same: on ml.inf1 SageMaker ignores the routing and shifts all at
once without baking, and a serverless endpoint has no instance fleet to count a
canary or a step in. The CDK app writes the policy into the endpoint's
`DeploymentConfig`; the plan prints `describe()`, so neither pretends.

Bounds are SageMaker's (botocore's SageMaker model: TrafficRoutingConfig,
CapacitySize, BlueGreenUpdatePolicy, AutoRollbackConfig).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    from deploy.config import DeploySettings

Traffic = Literal["all-at-once", "canary", "linear"]
# The stage's own alarms that roll an update back (deploy_infra's EndpointAlarms
# creates them as `<endpoint_name>-<alarm>`).
STAGE_ROLLBACK_ALARMS = ("Invocation5XXErrors", "ModelLatencyP99")
MAX_ROLLBACK_ALARMS = 10  # AutoRollbackConfig.Alarms: 1-10
CANARY_MAX_PERCENT = 50  # CanarySize: at most half the fleet
LINEAR_PERCENT = (10, 50)  # LinearStepSize: 10-50% of the fleet
_PERCENT = re.compile(r"^\s*(\d+)\s*%\s*$")

# Families SageMaker runs no deployment guardrails on: it shifts all at once without
# baking (AWS, "Deployment guardrails: Exclusions").
NO_GUARDRAIL_FAMILIES = ("inf1",)

PERCENT = "CAPACITY_PERCENT"
INSTANCES = "INSTANCE_COUNT"


def _size(value: str | int, *, what: str, low: int, high: int) -> tuple[str, int]:
    """`"10%"` → (CAPACITY_PERCENT, 10); `2` → (INSTANCE_COUNT, 2); ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f'{what} is a percentage ("10%") or an instance count (2), not {value}')
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f'{what} {value} is not an instance count: use 1 or more, or "N%"')
        return INSTANCES, value
    match = _PERCENT.match(value)
    if match is None:
        raise ValueError(
            f"{what} {value!r} is neither a percentage nor an instance count: write "
            f'"{low}%" (of the fleet) or an integer number of instances'
        )
    percent = int(match.group(1))
    if not low <= percent <= high:
        raise ValueError(
            f"{what} {percent}% is outside SageMaker's {low}-{high}% of the fleet: use a "
            f"percentage in that range or an instance count"
        )
    return PERCENT, percent


class RolloutSettings(BaseModel):
    """`[stages.X.rollout]`: how an update of the endpoint shifts traffic."""

    model_config = ConfigDict(extra="forbid")

    traffic: Traffic = Field(
        "linear",
        description="all-at-once, canary (canary_size first, then the rest) or linear "
        "(linear_step at a time); each step waits wait_interval_s.",
    )
    canary_size: str | int = Field(
        "10%", description='traffic = canary: "N%" of the fleet (1-50%) or a number of instances.'
    )
    linear_step: str | int = Field(
        "50%",
        description='traffic = linear: "N%" of the fleet (10-50%) or a number of instances.',
    )
    wait_interval_s: int = Field(
        300, ge=0, le=3600, description="Baking time after each shift, watching the alarms."
    )
    termination_wait_s: int = Field(
        300, ge=0, le=3600, description="How long the old fleet stays after the last shift."
    )
    maximum_execution_s: int = Field(
        3600, ge=600, le=28800, description="The whole update's limit (600-28800 s)."
    )
    alarms: list[str] = Field(
        default_factory=list,
        description="CloudWatch alarms that roll an update back, besides the stage's own "
        "(Invocation5XXErrors, ModelLatencyP99).",
    )

    # A multi-model endpoint's per-model canary (deploy.lifecycle.canary_alarms): rolled
    # back when its error rate or p99 latency is over these over one window.
    canary_max_error_rate: float = Field(
        0.05,
        gt=0,
        le=1,
        description="A model canary's largest error rate (ModelErrors / Requests) over "
        "canary_window_s before it is rolled back (0.05: 5%).",
    )
    canary_max_p99_ms: float = Field(
        1000.0,
        gt=0,
        description="A model canary's largest p99 latency (ms) over canary_window_s before "
        "it is rolled back.",
    )
    canary_window_s: int = Field(
        300,
        ge=60,
        le=86400,
        multiple_of=60,
        description="The window a model canary's alarms judge (a multiple of 60 s).",
    )

    @field_validator("canary_size")
    @classmethod
    def _canary(cls, value: str | int) -> str | int:
        _size(value, what="canary_size", low=1, high=CANARY_MAX_PERCENT)
        return value

    @field_validator("linear_step")
    @classmethod
    def _step(cls, value: str | int) -> str | int:
        _size(value, what="linear_step", low=LINEAR_PERCENT[0], high=LINEAR_PERCENT[1])
        return value

    @field_validator("alarms")
    @classmethod
    def _alarm_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name.strip() or len(name) > 255:
                raise ValueError(f"alarm name {name!r} must be 1-255 characters, not blank")
        room = MAX_ROLLBACK_ALARMS - len(STAGE_ROLLBACK_ALARMS)
        if len(value) > room:
            raise ValueError(
                f"{len(value)} alarms named; SageMaker watches at most {MAX_ROLLBACK_ALARMS} "
                f"and the stage's own {len(STAGE_ROLLBACK_ALARMS)} are always among them: "
                f"name at most {room}"
            )
        if len(set(value)) != len(value):
            raise ValueError("an alarm is named twice: name each once")
        return value

    @model_validator(mode="after")
    def _timeout_covers_waits(self) -> RolloutSettings:
        waiting = self.waits * self.wait_interval_s + self.termination_wait_s
        if self.maximum_execution_s <= waiting:
            raise ValueError(
                f"maximum_execution_s ({self.maximum_execution_s}) must exceed the update's "
                f"waits ({self.waits} x wait_interval_s {self.wait_interval_s} + "
                f"termination_wait_s {self.termination_wait_s} = {waiting} s): raise "
                "maximum_execution_s or shorten the waits"
            )
        return self

    @property
    def waits(self) -> int:
        """Baking waits the update makes: one per step (an instance-count step: at least one)."""
        if self.traffic == "linear":
            kind, value = _size(self.linear_step, what="linear_step", low=10, high=50)
            return max(1, math.ceil(100 / value)) if kind == PERCENT else 1
        return 2 if self.traffic == "canary" else 1


@dataclass(frozen=True)
class TrafficPolicy:
    """What SageMaker runs for an endpoint update (`BlueGreenUpdatePolicy` + rollback)."""

    routing: str  # ALL_AT_ONCE | CANARY | LINEAR
    size: tuple[str, int] | None  # (CAPACITY_PERCENT | INSTANCE_COUNT, value) for CANARY/LINEAR
    wait_interval_s: int
    termination_wait_s: int
    maximum_execution_s: int
    own_alarms: tuple[str, ...]  # the stage's own (STAGE_ROLLBACK_ALARMS)
    extra_alarms: tuple[str, ...]  # those `rollout.alarms` names
    asked: Traffic  # what the stage asked for
    fallback: str = ""  # why SageMaker runs something else than asked ("" = it runs it)

    @property
    def alarms(self) -> tuple[str, ...]:
        return (*self.own_alarms, *self.extra_alarms)

    def describe(self) -> str:
        """One line for the plan."""
        if self.routing == "CANARY" and self.size:
            shift = f"canary {_amount(self.size)}, then the rest"
        elif self.routing == "LINEAR" and self.size:
            shift = f"linear, {_amount(self.size)} per step"
        else:
            shift = "all at once"
        text = (
            f"endpoint updates shift traffic {shift}"
            + (f", baking {self.wait_interval_s} s after each" if self.wait_interval_s else "")
            + f"; the old fleet stays {self.termination_wait_s} s; at most "
            f"{self.maximum_execution_s} s in all; "
            + (
                f"rolled back when any of these alarms fires: {', '.join(self.alarms)}"
                if self.wait_interval_s
                else "no baking, so no alarm can roll it back"
            )
        )
        return f"{text}. {self.fallback}" if self.fallback else text


def _family(instance_type: str) -> str:
    from deploy.catalogue.instances import describe

    try:
        return describe(instance_type).family
    except ValueError:
        return ""


def _amount(size: tuple[str, int]) -> str:
    kind, value = size
    return f"{value}% of the fleet" if kind == PERCENT else f"{value} instance(s)"


def rollback_alarms(settings: DeploySettings) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The alarms that roll the stage's updates back: its own, and `rollout.alarms`'."""
    own = tuple(f"{settings.endpoint_name}-{alarm}" for alarm in STAGE_ROLLBACK_ALARMS)
    return own, tuple(a for a in settings.rollout.alarms if a not in own)


def policy_for(settings: DeploySettings, *, on_instances: bool = True) -> TrafficPolicy:
    """What SageMaker will run for the stage's endpoint updates.

    `on_instances`: the hosting mode runs on an instance fleet (a serverless
    endpoint does not: `HostingMode.on_instances`).
    """
    rollout = settings.rollout
    asked = rollout.traffic
    own, extra = rollback_alarms(settings)
    if not on_instances:
        return TrafficPolicy(
            "ALL_AT_ONCE",
            None,
            0,
            rollout.termination_wait_s,
            rollout.maximum_execution_s,
            own,
            extra,
            asked,
            fallback=(
                f"rollout.traffic = {asked!r} does not apply: a serverless endpoint has no "
                "instance fleet to shift in steps, so SageMaker switches it all at once"
                if asked != "all-at-once"
                else ""
            ),
        )
    if _family(settings.instance_type) in NO_GUARDRAIL_FAMILIES:
        return TrafficPolicy(
            "ALL_AT_ONCE",
            None,
            0,
            rollout.termination_wait_s,
            rollout.maximum_execution_s,
            own,
            extra,
            asked,
            fallback=(
                f"SageMaker runs no deployment guardrails on ml.inf1 ({settings.instance_type}): "
                f"it falls back to all at once without baking, whatever rollout.traffic "
                f"({asked!r}) says"
            ),
        )
    if asked == "canary":
        size: tuple[str, int] | None = _size(
            rollout.canary_size, what="canary_size", low=1, high=CANARY_MAX_PERCENT
        )
        routing = "CANARY"
    elif asked == "linear":
        size = _size(rollout.linear_step, what="linear_step", low=10, high=50)
        routing = "LINEAR"
    else:
        size, routing = None, "ALL_AT_ONCE"
    return TrafficPolicy(
        routing,
        size,
        rollout.wait_interval_s,
        rollout.termination_wait_s,
        rollout.maximum_execution_s,
        own,
        extra,
        asked,
    )


def rollout_notes(settings: DeploySettings, *, on_instances: bool) -> tuple[str, ...]:
    """The plan's line about how the endpoint's updates shift traffic."""
    return ("rollout: " + policy_for(settings, on_instances=on_instances).describe(),)
