"""`deploy up` on the moto server changes exactly what its printed plan lists.

Real CDK synth, real CloudFormation deployment (moto's), real S3 uploads. The
provider's session records every call botocore sends; the AWS calls that change
something (stacks created or updated, objects written) must be the plan's
actions, one for one: the first run creates the stage, a second run with nothing
changed prints no change and sends no such call, a third uploads and publishes
the one changed model and touches no stack.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from deploy.aws.session import AwsSession
from deploy.config import DeploySettings
from deploy.lifecycle.actions import (
    Action,
    CreateModelStore,
    Provision,
    PublishManifest,
    UploadArchive,
)
from deploy.lifecycle.aws_provider import AwsProvider
from deploy.lifecycle.progress import SilentReporter
from deploy.lifecycle.render import render_action, render_plan
from deploy.lifecycle.up import UpOptions, UpResult, up
from tests.functional.test_lifecycle_aws import PART, Package, aws_environment, settings_for

pytestmark = [
    pytest.mark.moto,
    pytest.mark.cdk,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning"),
]

# botocore operations that change something (by name), and the ones that belong to
# writing one object (a multipart upload is several calls for one key).
MUTATING = re.compile(r"^(Create|Update|Delete|Put|Complete|Upload|Abort|Start|Stop|Tag|Untag)")
OBJECT_WRITES = {"PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"}


@dataclass
class RecordingSession(AwsSession):
    """An AwsSession whose clients record each call (service, operation, parameters)."""

    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    _hooked: set[int] = field(default_factory=set)

    def client(self, service: str, *, max_attempts: int = 5) -> Any:
        made = super().client(service, max_attempts=max_attempts)
        if id(made) not in self._hooked:
            self._hooked.add(id(made))
            made.meta.events.register("before-parameter-build", self._record)
        return made

    def _record(self, *, model: Any, params: dict[str, Any], **_: Any) -> None:
        self.calls.append((model.service_model.service_name, model.name, dict(params)))

    def changes(self, store_prefix: str) -> Counter[tuple[str, str]]:
        """What the recorded mutating calls changed: ("stack", name) per CreateStack or
        UpdateStack, ("object", key under the store prefix) per object written; anything
        else as ("other", "service:Operation")."""
        changed: Counter[tuple[str, str]] = Counter()
        for service, operation, params in self.calls:
            if not MUTATING.match(operation):
                continue
            if operation in ("CreateStack", "UpdateStack"):
                changed[("stack", params["StackName"])] += 1
            elif operation in OBJECT_WRITES and params["Key"].startswith(store_prefix):
                if operation in ("PutObject", "CreateMultipartUpload"):
                    changed[("object", params["Key"][len(store_prefix) :])] += 1
            elif operation in OBJECT_WRITES and params["Bucket"].startswith("cdk-"):
                changed[("asset", params["Bucket"])] += 1  # a stack's file asset
            else:
                changed[("other", f"{service}:{operation}")] += 1
        return changed


def expected(actions: tuple[Action, ...] | list[Action]) -> Counter[tuple[str, str]]:
    """What each action changes on AWS, once each."""
    changed: Counter[tuple[str, str]] = Counter()
    for action in actions:
        if isinstance(action, CreateModelStore):
            changed[("stack", action.stack)] += 1
        elif isinstance(action, Provision):
            changed[("stack", action.name)] += 1
        elif isinstance(action, UploadArchive):
            changed[("object", action.key)] += 1
        elif isinstance(action, PublishManifest):
            changed[("object", "manifest.json")] += 1
    return changed


@dataclass
class Deployed:
    result: UpResult
    printed: str
    changed: Counter[tuple[str, str]]

    @property
    def printed_changes(self) -> list[str]:
        return [
            match.group(1)
            for line in self.printed.splitlines()
            if (match := re.fullmatch(r"  \d+\. (.*)", line.rstrip()))
        ]


def deploy_up(settings: DeploySettings, cache: Path) -> Deployed:
    session = RecordingSession(settings.region)
    provider = AwsProvider(
        settings, session=session, template_cache=cache, poll_s=0.05, part_size=PART
    )
    buffer = io.StringIO()
    console = Console(file=buffer, width=400, color_system=None)
    result = up(
        settings,
        provider,
        repository=settings.repository,
        package_dir=settings.package_dir,
        options=UpOptions(skip_package=True, skip_smoke=True, timeout_s=60),
        reporter=SilentReporter(),
        on_plan=lambda plan: render_plan(plan, console),
    )
    location = provider.store_location()
    assert location is not None
    changed = session.changes(location.prefix)
    assets = sum(count for (kind, _), count in changed.items() if kind == "asset")
    if assets:
        # File assets go up only as part of a stack the plan creates or updates.
        assert any(isinstance(a, (CreateModelStore, Provision)) for a in result.applied)
        changed = Counter({key: n for key, n in changed.items() if key[0] != "asset"})
    return Deployed(result, buffer.getvalue(), changed)


@pytest.fixture(scope="module")
def moto_env(moto_server: str) -> Any:
    with aws_environment(moto_server):
        yield moto_server


def test_up_changes_exactly_what_its_printed_plan_lists(moto_env: str, tmp_path: Path) -> None:
    cache = tmp_path / "templates"
    package = Package(tmp_path / "package")
    package.put("alpha", b"alpha v1" * 1000)
    package.put("beta", b"beta v1" * 1000)
    settings = settings_for(tmp_path, "planned", "ml.m5.xlarge")

    # GIVEN nothing deployed, WHEN up runs
    first = deploy_up(settings, cache)
    actions = first.result.plan.actions
    # THEN exactly the plan's actions were sent to AWS, executed and printed
    assert first.changed == expected(actions), first.changed
    assert first.result.applied == list(actions)
    assert first.printed_changes == [render_action(a) for a in actions]
    # AND they create the store, upload both archives, create the other stacks, publish
    assert [type(a).__name__ for a in actions] == [
        "CreateModelStore",
        "UploadArchive",
        "UploadArchive",
        "Provision",
        "Provision",
        "PublishManifest",
    ]

    # WHEN it runs again with nothing changed
    again = deploy_up(settings, cache)
    # THEN the plan is empty, says so, and nothing is executed or changed on AWS
    assert again.result.plan.actions == () and again.result.applied == []
    assert again.printed_changes == [] and "changes: none" in again.printed
    assert again.changed == Counter(), again.changed
    assert again.result.endpoint is not None and again.result.endpoint.status == "InService"

    # WHEN one model changes
    new_alpha = package.put("alpha", b"alpha v2" * 1000)
    third = deploy_up(settings, cache)
    # THEN its archive goes up and the manifest is published: no stack is touched
    assert third.result.plan.actions == (
        UploadArchive(new_alpha, 8000, package.models["alpha"]["sha256"], ("alpha",), "changed"),
        PublishManifest(("alpha changed",)),
    )
    assert third.result.applied == list(third.result.plan.actions)
    assert third.printed_changes == [render_action(a) for a in third.result.plan.actions]
    assert third.changed == expected(third.result.plan.actions), third.changed
