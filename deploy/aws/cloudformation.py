"""CloudFormation stacks: create/update, status, templates, events, deletion.

Stacks are deployed with CreateStack/UpdateStack, not change sets: the moto
server does not publish a stack's exports when it executes a change set, and
cross-stack references need them. `deploy up --dry-run` compares the
deployed templates with the synthesized ones instead of previewing a change
set. Templates travel as `TemplateBody` (minified JSON, 51,200 bytes at most).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from deploy.aws.session import AwsCallError, AwsSession, aws_call
from deploy.errors import AwsError

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient

TEMPLATE_BODY_LIMIT = 51_200
CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]
_BOOTSTRAP = (
    "if the message names /cdk-bootstrap/, bootstrap the account and region once "
    "(`deploy cdk bootstrap aws://ACCOUNT/REGION`); otherwise fix what it names and re-run"
)
_NO_CHANGES = ("didn't contain changes", "No updates are to be performed")

TERMINAL_OK = {"CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE"}
TERMINAL_FAILED = {
    "CREATE_FAILED",
    "ROLLBACK_COMPLETE",
    "ROLLBACK_FAILED",
    "UPDATE_ROLLBACK_COMPLETE",
    "UPDATE_ROLLBACK_FAILED",
    "DELETE_FAILED",
    "UPDATE_FAILED",
}


@dataclass(frozen=True)
class StackState:
    name: str
    stack_id: str
    status: str
    reason: str
    outputs: dict[str, str] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)

    @property
    def in_progress(self) -> bool:
        return self.status.endswith("_IN_PROGRESS")

    @property
    def failed(self) -> bool:
        return self.status in TERMINAL_FAILED


@dataclass(frozen=True)
class StackEvent:
    timestamp: datetime
    logical_id: str
    resource_type: str
    status: str
    reason: str
    event_id: str


def template_body(template: dict[str, Any]) -> str:
    return json.dumps(template, separators=(",", ":"), sort_keys=True)


class Stacks:
    def __init__(self, session: AwsSession, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self._session = session
        self._sleep = sleep

    @property
    def _cfn(self) -> CloudFormationClient:
        client: CloudFormationClient = self._session.client("cloudformation")
        return client

    def describe(self, name: str) -> StackState | None:
        try:
            with aws_call("cloudformation:DescribeStacks", where=f"stack {name}"):
                stacks = self._cfn.describe_stacks(StackName=name)["Stacks"]
        except AwsCallError as exc:
            if exc.code == "ValidationError" and "does not exist" in exc.message:
                return None
            raise
        if not stacks or stacks[0]["StackStatus"] == "DELETE_COMPLETE":
            return None
        stack = stacks[0]
        return StackState(
            name=name,
            stack_id=stack["StackId"],
            status=stack["StackStatus"],
            reason=stack.get("StackStatusReason", ""),
            outputs={o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])},
            parameters={
                p["ParameterKey"]: p.get("ParameterValue", "") for p in stack.get("Parameters", [])
            },
        )

    def deploy(
        self,
        name: str,
        template: dict[str, Any],
        *,
        parameters: dict[str, str] | None = None,
        tags: dict[str, str] | None = None,
    ) -> str:
        """Create or update a stack without waiting; returns created|updated|unchanged."""
        current = self.describe(name)
        if current is not None and current.status == "ROLLBACK_COMPLETE":
            # A stack whose creation failed cannot be updated; it holds no resources.
            self.delete(name)
            self.wait_deleted(name, timeout_s=600.0)
            current = None
        if current is not None and current.in_progress:
            raise AwsError(
                f"stack is {current.status}: another deployment is running",
                where=f"stack {name}",
                fix="wait for it to finish (`deploy status`), then re-run `deploy up`",
            )
        body = template_body(template)
        if len(body.encode()) > TEMPLATE_BODY_LIMIT:
            raise AwsError(
                f"template is {len(body.encode())} bytes, over CloudFormation's "
                f"{TEMPLATE_BODY_LIMIT}-byte TemplateBody limit",
                where=f"stack {name}",
                fix="split the stack or reduce its resources",
            )
        request: dict[str, Any] = {
            "StackName": name,
            "TemplateBody": body,
            "Capabilities": CAPABILITIES,
            "Parameters": [
                {"ParameterKey": key, "ParameterValue": value}
                for key, value in (parameters or {}).items()
            ],
            "Tags": [{"Key": key, "Value": value} for key, value in (tags or {}).items()],
        }
        if current is None:
            with aws_call("cloudformation:CreateStack", where=f"stack {name}", fix=_BOOTSTRAP):
                self._cfn.create_stack(**request, OnFailure="ROLLBACK")
            return "created"
        try:
            with aws_call("cloudformation:UpdateStack", where=f"stack {name}", fix=_BOOTSTRAP):
                self._cfn.update_stack(**request)
        except AwsCallError as exc:
            if any(marker in exc.message for marker in _NO_CHANGES):
                return "unchanged"
            raise
        return "updated"

    def template(self, name: str) -> dict[str, Any] | None:
        """The stack's current template (None: no stack)."""
        if self.describe(name) is None:
            return None
        with aws_call("cloudformation:GetTemplate", where=f"stack {name}"):
            body: Any = self._cfn.get_template(StackName=name)["TemplateBody"]
        if isinstance(body, str):
            try:
                body = json.loads(body)
            except ValueError:
                return {"_unparsed": body}
        return dict(body)

    def physical_ids(self, name: str, resource_type: str) -> list[str]:
        """Physical ids of the stack's resources of one type (names, or ARNs)."""
        found: list[str] = []
        with aws_call("cloudformation:ListStackResources", where=f"stack {name}"):
            paginator = self._cfn.get_paginator("list_stack_resources")
            for page in paginator.paginate(StackName=name):
                for item in page["StackResourceSummaries"]:
                    if item["ResourceType"] == resource_type and item.get("PhysicalResourceId"):
                        found.append(item["PhysicalResourceId"])
        return found

    def events(self, name: str, *, limit: int = 50) -> list[StackEvent]:
        """Most recent events first."""
        try:
            with aws_call("cloudformation:DescribeStackEvents", where=f"stack {name}"):
                raw = self._cfn.describe_stack_events(StackName=name)["StackEvents"]
        except AwsCallError as exc:
            if exc.code == "ValidationError" and "does not exist" in exc.message:
                return []
            raise
        return [
            StackEvent(
                timestamp=item["Timestamp"],
                logical_id=item.get("LogicalResourceId", ""),
                resource_type=item.get("ResourceType", ""),
                status=item.get("ResourceStatus", ""),
                reason=item.get("ResourceStatusReason", ""),
                event_id=item["EventId"],
            )
            for item in raw[:limit]
        ]

    def delete(self, name: str) -> None:
        with aws_call("cloudformation:DeleteStack", where=f"stack {name}"):
            self._cfn.delete_stack(StackName=name)

    def wait_deleted(self, name: str, *, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while (state := self.describe(name)) is not None:
            if state.status == "DELETE_FAILED":
                raise AwsError(
                    f"stack deletion failed: {state.reason}",
                    where=f"stack {name}",
                    fix="remove the resource named in the reason, then re-run `deploy down`",
                )
            if time.monotonic() > deadline:
                raise AwsError(
                    f"stack still {state.status} after {timeout_s:.0f} s",
                    where=f"stack {name}",
                    fix="re-run `deploy down` to keep waiting",
                )
            self._sleep(2.0)
