"""Rolling a stage's stacks out with CloudFormation, and watching until they settle.

`Rollout.deploy_stack` publishes a stack's file assets, creates or updates
it and follows its events until it settles; a failure becomes a
`RolloutFailedError` that says what still serves (CloudFormation rolls a
failed update back by itself). `wait_endpoint` waits for the endpoint to be
InService. Ctrl-C leaves CloudFormation running and says how to resume.

While an update shifts traffic (the stage's `[rollout]`, deploy.guardrails),
each poll shows where the shift stands (DescribeEndpoint's pending
deployment); when SageMaker rolls the update back on an alarm, the error leads
with SageMaker's reason rather than CloudFormation's.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from deploy.aws.cloudformation import StackEvent, template_body
from deploy.aws.sagemaker import EndpointState
from deploy.aws.session import AwsCallError
from deploy.errors import AwsError, DeployError
from deploy.lifecycle.aws_stage import AwsStage
from deploy.lifecycle.provider import EndpointView, Reporter


class RolloutFailedError(AwsError):
    """A stack update failed; the previous configuration keeps serving."""


class Rollout:
    def __init__(
        self,
        stage: AwsStage,
        *,
        publish_assets: Callable[[str], object],
        poll_s: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.stage = stage
        self._publish_assets = publish_assets  # a stack's file assets, before it deploys
        self.poll_s = poll_s
        self.sleep = sleep

    @contextlib.contextmanager
    def rolling_out(self, reporter: Reporter) -> Iterator[None]:
        """The rollout view around a stack update; a note if interrupted."""
        try:
            yield
        except KeyboardInterrupt:
            say(
                "interrupted: CloudFormation carries on with the running update (and rolls "
                "it back by itself if it fails); the manifest was not switched. Follow it "
                f"with `deploy status --stage {self.stage.settings.stage}` and re-run "
                "`deploy up` to resume"
            )
            raise
        finally:
            reporter.rollout_finished()

    def up_to_date(self, name: str, template: dict[str, Any]) -> bool:
        """The stack runs `template` and has settled (not in progress, not failed)."""
        stacks = self.stage.clients.stacks
        current = stacks.template(name)
        if current is None or template_body(current) != template_body(template):
            return False
        state = stacks.describe(name)
        return state is not None and not state.in_progress and not state.failed

    def deploy_stack(
        self,
        name: str,
        template: dict[str, Any],
        reporter: Reporter,
        *,
        before: EndpointState | None = None,
    ) -> None:
        if self.up_to_date(name, template):
            return
        self._publish_assets(name)
        started = time.time()
        try:
            outcome = self.stage.clients.stacks.deploy(
                name, template, tags={"deploy:stage": self.stage.settings.stage}
            )
        except AwsCallError as exc:
            raise self.failed(name, exc.message, before) from exc
        if outcome == "unchanged":
            return
        self.wait_stack(name, reporter, since=started, before=before)

    def wait_stack(
        self,
        name: str,
        reporter: Reporter,
        *,
        since: float,
        before: EndpointState | None,
        timeout_s: float = 3600.0,
    ) -> None:
        stacks = self.stage.clients.stacks
        deadline = time.monotonic() + timeout_s
        while True:
            state = stacks.describe(name)
            events = [e for e in stacks.events(name) if e.timestamp.timestamp() >= since - 1]
            endpoint = self.stage.endpoint_state() if name == self.stage.stack("endpoint") else None
            reporter.rollout(
                name,
                state.status if state else "DELETED",
                endpoint_line(endpoint),
                [event_line(e) for e in events],
            )
            if state is None:
                raise AwsError(
                    "the stack disappeared while deploying",
                    where=f"stack {name}",
                    fix="re-run `deploy up`",
                )
            if not state.in_progress:
                if state.failed:
                    raise self.failed(name, failure_reason(events, state.reason), before)
                return
            if time.monotonic() > deadline:
                raise AwsError(
                    f"still {state.status} after {timeout_s:.0f} s",
                    where=f"stack {name}",
                    fix="CloudFormation carries on; follow it with `deploy status` and re-run "
                    "`deploy up` once it settles",
                )
            self.sleep(self.poll_s)

    def failed(self, stack: str, reason: str, before: EndpointState | None) -> RolloutFailedError:
        """The error for a failed rollout of `stack`, naming what still serves."""
        now = None
        try:
            now = self.stage.endpoint_state()
        except DeployError:
            now = None
        serving = now or before
        if serving is not None:
            variant = serving.variants[0] if serving.variants else None
            detail = (
                f"endpoint {serving.name} still serves endpoint config {serving.config_name}"
                + (f" ({variant.instance_type} x{variant.current_count})" if variant else "")
                + f", status {serving.status}"
            )
        else:
            detail = "no endpoint was serving before this rollout"
        if len(reason) > 500:
            reason = reason[:500] + "…"
        rolled_back = rolled_back_reason(now, before)
        if rolled_back:
            # SageMaker's deployment guardrails undid the update (an alarm fired while
            # traffic shifted): its reason first, CloudFormation's after.
            return RolloutFailedError(
                f"SageMaker rolled the endpoint update back: {rolled_back}. {detail}; "
                f"the manifest was not switched (CloudFormation: {reason})",
                where=f"stack {stack}",
                fix="the new version tripped a rollback alarm while traffic shifted: look at "
                "its errors and latency (`deploy status`, the alarm's metric), fix the models "
                "or the alarm and re-run `deploy up`",
            )
        return RolloutFailedError(
            f"rollout failed: {reason}. {detail}; the manifest was not switched",
            where=f"stack {stack}",
            fix="correct the setting the reason names (e.g. --instance) and re-run `deploy up`",
        )

    def wait_endpoint(self, *, timeout_s: float, reporter: Reporter) -> EndpointView:
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.stage.endpoint_state()
            if state is None:
                raise AwsError(
                    "the endpoint stack holds no endpoint",
                    where=f"stack {self.stage.stack('endpoint')}",
                    fix="re-run `deploy up`",
                )
            if state.status in ("Failed", "UpdateRollbackFailed"):
                raise RolloutFailedError(
                    f"endpoint failed: {state.failure_reason}",
                    where=f"endpoint {state.name}",
                    fix="fix the reason above and re-run `deploy up`",
                )
            if state.in_service:
                variant = state.variants[0] if state.variants else None
                return EndpointView(
                    name=state.name,
                    status=state.status,
                    config_name=state.config_name,
                    instance_type=variant.instance_type if variant else "",
                    instance_count=variant.current_count if variant else 0,
                )
            if time.monotonic() > deadline:
                raise AwsError(
                    f"endpoint still {state.status} after {timeout_s:.0f} s",
                    where=f"endpoint {state.name}",
                    fix="SageMaker carries on; re-run `deploy up` (or `deploy status`) later",
                )
            reporter.rollout(
                self.stage.stack("endpoint"), "UPDATE_COMPLETE", endpoint_line(state), []
            )
            self.sleep(self.poll_s)


def endpoint_line(endpoint: EndpointState | None) -> str:
    """The endpoint's status and, while an update shifts traffic, where it stands."""
    if endpoint is None:
        return ""
    return f"{endpoint.status}: {endpoint.shift}" if endpoint.shift else endpoint.status


def rolled_back_reason(now: EndpointState | None, before: EndpointState | None) -> str:
    """SageMaker's reason for rolling this update back ("" if it did not).

    After a rollback the endpoint serves the old config again and DescribeEndpoint
    keeps a FailureReason; one already there before the rollout is an old one.
    """
    if now is None or not now.failure_reason or now.status == "Failed":
        return ""
    if before is not None and before.failure_reason == now.failure_reason:
        return ""
    return now.failure_reason


def failure_reason(events: Sequence[StackEvent], fallback: str) -> str:
    """The first failure CloudFormation recorded (events arrive newest first)."""
    for event in reversed(list(events)):
        if event.status.endswith("_FAILED") and event.reason:
            return f"{event.logical_id} ({event.resource_type}): {event.reason}"
    return fallback or "no reason recorded"


def event_line(event: StackEvent) -> str:
    reason = f" - {event.reason}" if event.reason else ""
    return f"{event.timestamp:%H:%M:%S} {event.logical_id} {event.status}{reason}"


def say(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
