"""Rollout outcomes seen by the wait loop, with the AWS boundary faked.

On AWS a failed rollout is asynchronous: UpdateStack succeeds, the stack
later settles in UPDATE_ROLLBACK_COMPLETE and the reason sits in its events.
The moto server cannot produce that sequence, so these tests feed it in through
the clients the provider is built with.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from deploy.aws.cloudformation import StackEvent, StackState
from deploy.aws.sagemaker import EndpointState, Variant
from deploy.aws.session import AwsSession
from deploy.config import DeploySettings, load_settings
from deploy.errors import AwsError
from deploy.lifecycle.aws_clients import AwsClients
from deploy.lifecycle.aws_provider import AwsProvider, RolloutFailedError, failure_reason
from deploy.lifecycle.progress import SilentReporter
from deploy.lifecycle.provider import InfraPlan
from deploy.lifecycle.stages import desired_infra

STACK = "deploy-triton-dev-endpoint"


def event(status: str, reason: str = "", logical: str = "Endpoint") -> StackEvent:
    return StackEvent(
        timestamp=datetime.now(UTC),
        logical_id=logical,
        resource_type="AWS::SageMaker::Endpoint",
        status=status,
        reason=reason,
        event_id=f"{logical}-{status}",
    )


@dataclass
class FakeStacks:
    statuses: list[str]
    history: list[StackEvent] = field(default_factory=list)
    deployed: list[str] = field(default_factory=list)

    def template(self, name: str) -> dict[str, Any] | None:
        return {"old": True} if name == STACK else None

    def describe(self, name: str) -> StackState | None:
        return StackState(name, "id", self.statuses[0], "stack reason")

    def deploy(self, name: str, template: dict[str, Any], **_: Any) -> str:
        self.deployed.append(name)
        return "updated"

    def events(self, name: str, *, limit: int = 50) -> list[StackEvent]:
        # The wait loop reads events once per poll: time moves on here.
        current = list(self.history)
        if len(self.statuses) > 1:
            self.statuses.pop(0)
        return current

    def physical_ids(self, name: str, resource_type: str) -> list[str]:
        return ["arn:aws:sagemaker:us-east-1:1:endpoint/ep"]


class FakeSageMaker:
    def endpoint(self, name: str) -> EndpointState:
        return EndpointState(
            name, "InService", "cfg-old", "", (Variant("AllTraffic", "ml.m5.xlarge", 1, 1),)
        )


def fake_synthesizer(settings: DeploySettings, outdir: Path) -> dict[str, Path]:
    """The stage's one template, as the CDK app would write it."""
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / f"{STACK}.template.json"
    path.write_text(json.dumps({"new": True}))
    return {STACK: path}


def provider(
    stacks: FakeStacks, tmp_path: Path, sleep: Callable[[float], None] = lambda _s: None
) -> AwsProvider:
    settings = load_settings(instance_type="ml.g5.xlarge", infra={"account": "123456789012"})
    clients = AwsClients(
        session=AwsSession("us-east-1"),
        stacks=cast(Any, stacks),
        sagemaker=cast(Any, FakeSageMaker()),
        autoscaling=cast(Any, None),
        cloudwatch=cast(Any, None),
        quotas=cast(Any, None),
        store=lambda bucket: pytest.fail(f"no store expected here, got {bucket}"),
        parameter=lambda name: pytest.fail(f"no parameter expected here, got {name}"),
        lookup_context=lambda account: {},
    )
    return AwsProvider(
        settings,
        clients=clients,
        synthesize=fake_synthesizer,
        template_cache=tmp_path / "templates",
        poll_s=0.0,
        sleep=sleep,
    )


def test_failed_rollout_names_the_reason_and_what_still_serves(tmp_path: Path) -> None:
    stacks = FakeStacks(
        ["UPDATE_IN_PROGRESS", "UPDATE_ROLLBACK_IN_PROGRESS", "UPDATE_ROLLBACK_COMPLETE"],
        history=[
            event("UPDATE_ROLLBACK_COMPLETE", logical=STACK),
            event("UPDATE_FAILED", "Resource handler returned message: insufficient capacity"),
            event("UPDATE_IN_PROGRESS"),
        ],
    )
    reporter = SilentReporter()
    aws = provider(stacks, tmp_path)
    with pytest.raises(RolloutFailedError) as caught:
        aws.provision(InfraPlan("update", None, ()), desired_infra(aws.settings), reporter)
    text = str(caught.value)
    assert "insufficient capacity" in text
    assert "endpoint ep still serves endpoint config cfg-old (ml.m5.xlarge x1)" in text
    assert "manifest was not switched" in text
    assert [update[1] for update in reporter.rollout_updates] == [
        "UPDATE_IN_PROGRESS",
        "UPDATE_ROLLBACK_IN_PROGRESS",
        "UPDATE_ROLLBACK_COMPLETE",
    ]


def test_successful_rollout_returns_after_the_stack_settles(tmp_path: Path) -> None:
    stacks = FakeStacks(["UPDATE_IN_PROGRESS", "UPDATE_COMPLETE"])
    aws = provider(stacks, tmp_path)
    aws.provision(InfraPlan("update", None, ()), desired_infra(aws.settings), SilentReporter())
    assert stacks.deployed == [STACK]


def test_timeout_says_cloudformation_carries_on(tmp_path: Path) -> None:
    aws = provider(FakeStacks(["UPDATE_IN_PROGRESS"]), tmp_path)
    with pytest.raises(AwsError, match="still UPDATE_IN_PROGRESS after 0 s") as caught:
        aws.rollout.wait_stack(STACK, SilentReporter(), since=0.0, before=None, timeout_s=0.0)
    assert "deploy status" in (caught.value.fix or "")


def test_ctrl_c_while_waiting_says_how_to_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupt(_seconds: float) -> None:
        raise KeyboardInterrupt

    aws = provider(FakeStacks(["UPDATE_IN_PROGRESS"]), tmp_path, sleep=interrupt)
    with pytest.raises(KeyboardInterrupt):
        aws.provision(InfraPlan("update", None, ()), desired_infra(aws.settings), SilentReporter())
    err = capsys.readouterr().err
    assert "CloudFormation carries on" in err and "deploy status --stage dev" in err


def test_failure_reason_picks_the_first_failure_recorded() -> None:
    events = [  # newest first, as CloudFormation lists them
        event("UPDATE_FAILED", "second"),
        event("UPDATE_FAILED", "first", logical="Config"),
        event("UPDATE_IN_PROGRESS"),
    ]
    assert failure_reason(events, "fallback").endswith("first")
    assert failure_reason([], "fallback") == "fallback"
