"""CloudFormation stacks: create/update, change-set previews, status, events, deletion.

Stacks are deployed with CreateStack/UpdateStack; change sets are used to
preview an update (`--dry-run`) and are deleted afterwards. (Executing change
sets would work on AWS too, but the moto server does not publish a stack's
exports when it executes one, and cross-stack references need them.)
Templates travel as `TemplateBody` (minified JSON, 51,200 bytes at most).
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
    "(`npx cdk bootstrap aws://ACCOUNT/REGION`); otherwise fix what it names and re-run"
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


@dataclass(frozen=True)
class ResourceChange:
    action: str  # Add | Modify | Remove
    logical_id: str
    resource_type: str
    replacement: str  # True | False | Conditional | ''


@dataclass(frozen=True)
class ChangeSet:
    stack: str
    change_set_id: str | None
    kind: str  # CREATE | UPDATE
    changes: tuple[ResourceChange, ...]

    @property
    def empty(self) -> bool:
        return self.change_set_id is None


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

    def create_change_set(
        self,
        name: str,
        template: dict[str, Any],
        *,
        parameters: dict[str, str] | None = None,
        tags: dict[str, str] | None = None,
        template_url: str | None = None,
        wait_timeout_s: float = 300.0,
    ) -> ChangeSet:
        """Create (and wait for) a change set; an empty one is deleted and reported empty."""
        current = self.describe(name)
        if current is not None and current.status == "ROLLBACK_COMPLETE":
            # A stack whose creation failed cannot be updated; it holds no resources.
            self.delete(name)
            self.wait_deleted(name, timeout_s=wait_timeout_s)
            current = None
        kind = "CREATE" if current is None else "UPDATE"
        body = template_body(template)
        source: dict[str, Any]
        if template_url is not None:
            source = {"TemplateURL": template_url}
        elif len(body.encode()) <= TEMPLATE_BODY_LIMIT:
            source = {"TemplateBody": body}
        else:
            raise AwsError(
                f"template is {len(body.encode())} bytes, over CloudFormation's "
                f"{TEMPLATE_BODY_LIMIT}-byte TemplateBody limit",
                where=f"stack {name}",
                fix="upload the template to S3 and pass its URL",
            )
        change_set_name = f"deploy-{int(time.time() * 1000)}"
        with aws_call("cloudformation:CreateChangeSet", where=f"stack {name}"):
            response = self._cfn.create_change_set(
                StackName=name,
                ChangeSetName=change_set_name,
                ChangeSetType=kind,  # type: ignore[arg-type]
                Capabilities=CAPABILITIES,  # type: ignore[arg-type]
                Parameters=[
                    {"ParameterKey": key, "ParameterValue": value}
                    for key, value in (parameters or {}).items()
                ],
                Tags=[{"Key": key, "Value": value} for key, value in (tags or {}).items()],
                **source,
            )
        change_set_id = response["Id"]
        described = self._wait_change_set(name, change_set_id, wait_timeout_s)
        if described["Status"] == "FAILED":
            reason = described.get("StatusReason", "")
            self._delete_change_set(name, change_set_id)
            if any(marker in reason for marker in _NO_CHANGES):
                return ChangeSet(stack=name, change_set_id=None, kind=kind, changes=())
            raise AwsError(
                f"CloudFormation rejected the change: {reason}",
                where=f"stack {name}",
                fix="nothing was changed; correct the template or parameters and re-run",
            )
        changes = tuple(
            ResourceChange(
                action=str(item["ResourceChange"].get("Action", "")),
                logical_id=str(item["ResourceChange"].get("LogicalResourceId", "")),
                resource_type=str(item["ResourceChange"].get("ResourceType", "")),
                replacement=str(item["ResourceChange"].get("Replacement", "")),
            )
            for item in described.get("Changes", [])
            if "ResourceChange" in item
        )
        if kind == "UPDATE" and not changes:
            self._delete_change_set(name, change_set_id)
            return ChangeSet(stack=name, change_set_id=None, kind=kind, changes=())
        return ChangeSet(stack=name, change_set_id=change_set_id, kind=kind, changes=changes)

    def _wait_change_set(self, name: str, change_set_id: str, timeout_s: float) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            with aws_call("cloudformation:DescribeChangeSet", where=f"stack {name}"):
                described = self._cfn.describe_change_set(
                    ChangeSetName=change_set_id, StackName=name
                )
            if described["Status"] in {"CREATE_COMPLETE", "FAILED"}:
                return described
            if time.monotonic() > deadline:
                raise AwsError(
                    f"change set still {described['Status']} after {timeout_s:.0f} s",
                    where=f"stack {name}",
                    fix="check the CloudFormation console and re-run",
                )
            self._sleep(2.0)

    def _delete_change_set(self, name: str, change_set_id: str) -> None:
        with aws_call("cloudformation:DeleteChangeSet", where=f"stack {name}"):
            self._cfn.delete_change_set(ChangeSetName=change_set_id, StackName=name)

    def discard(self, change_set: ChangeSet) -> None:
        """Delete an unexecuted change set (dry runs). A CREATE leaves a
        REVIEW_IN_PROGRESS stack behind, which is removed too."""
        if change_set.change_set_id is None:
            return
        self._delete_change_set(change_set.stack, change_set.change_set_id)
        state = self.describe(change_set.stack)
        if change_set.kind == "CREATE" and state and state.status == "REVIEW_IN_PROGRESS":
            self.delete(change_set.stack)

    def execute(self, change_set: ChangeSet) -> None:
        if change_set.change_set_id is None:
            return
        with aws_call("cloudformation:ExecuteChangeSet", where=f"stack {change_set.stack}"):
            self._cfn.execute_change_set(
                ChangeSetName=change_set.change_set_id, StackName=change_set.stack
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
