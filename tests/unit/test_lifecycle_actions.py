"""The plan's actions: each kind has one executor and one renderer, and what is printed
is what is applied.

GIVEN plans built from the planning data (models, archive, stacks, the local
endpoint), WHEN they are rendered and applied through a provider that records
each call, THEN the printed change lines, the executed actions and the calls
are the same list. The moto-server run of `deploy up` that checks the same at
the AWS API is tests/functional/test_lifecycle_plan_apply.py.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from rich.console import Console

from deploy.hosting import StagePackage, StoredFile
from deploy.lifecycle.actions import (
    ACTION_KINDS,
    PHASES,
    CreateModelStore,
    Provision,
    PublishManifest,
    UploadArchive,
)
from deploy.lifecycle.apply import EXECUTORS, Run, apply
from deploy.lifecycle.plan import ArchiveChange, ModelAction, ModelChange, Plan
from deploy.lifecycle.progress import SilentReporter
from deploy.lifecycle.provider import UploadOutcome
from deploy.lifecycle.render import RENDERERS, render_action, render_plan


def test_every_action_kind_has_exactly_one_executor_and_one_renderer() -> None:
    assert len(set(ACTION_KINDS)) == len(ACTION_KINDS) == 7
    assert set(EXECUTORS) == set(ACTION_KINDS)
    assert set(RENDERERS) == set(ACTION_KINDS)
    # Each kind runs in a phase apply() walks through.
    assert {kind.phase for kind in ACTION_KINDS} <= set(PHASES)


def change(
    name: str, action: ModelAction, *, upload: bool, previous: str | None = None
) -> ModelChange:
    return ModelChange(name, action, f"{name}-1111.tar.gz", previous, 2048, "ab" * 32, upload)


def aws_plan(**overrides: Any) -> Plan:
    fields: dict[str, Any] = {
        "stage": "prod",
        "provider": "aws",
        "endpoint": "ep",
        "models": (
            change("alpha", "new", upload=True),
            change("beta", "changed", upload=True, previous="beta-0000.tar.gz"),
            change("gamma", "unchanged", upload=False),
            change("delta", "unchanged", upload=True),  # the store lost its bytes
            change("old", "removed", upload=False),
        ),
        "infra_action": "create",
        "infra": (),
        "resources": (
            {"stack": "ep-prod-model-store", "action": "create"},
            {"stack": "ep-prod-network", "action": "unchanged"},
            {"stack": "ep-prod-endpoint", "action": "update"},
            {"stack": "ep-prod-api", "action": "create"},
        ),
        "cost": None,
        "store_stack": "ep-prod-model-store",
    }
    return Plan(**{**fields, **overrides})


def test_a_plan_lists_each_change_once_in_the_order_it_is_applied() -> None:
    assert aws_plan().actions == (
        CreateModelStore("ep-prod-model-store"),
        UploadArchive("alpha-1111.tar.gz", 2048, "ab" * 32, ("alpha",), "new"),
        UploadArchive("beta-1111.tar.gz", 2048, "ab" * 32, ("beta",), "changed"),
        UploadArchive("delta-1111.tar.gz", 2048, "ab" * 32, ("delta",), "missing from the store"),
        Provision("stack", "ep-prod-endpoint", "update"),
        Provision("stack", "ep-prod-api", "create"),
        PublishManifest(("alpha new", "beta changed", "old removed")),
    )


def test_an_existing_store_stack_is_updated_with_the_others() -> None:
    resources = ({"stack": "ep-prod-model-store", "action": "update"},)
    plan = aws_plan(models=(), resources=resources, infra_action="update")
    assert plan.actions == (Provision("stack", "ep-prod-model-store", "update"),)


def test_a_router_archive_is_one_upload_and_its_new_key_a_manifest_change() -> None:
    models = tuple(change(n, "unchanged", upload=False) for n in ("a", "b"))
    archive = ArchiveChange("router/model-abc.tar.gz", "router/model-old.tar.gz", "cd", 10, True)
    plan = aws_plan(models=models, archive=archive, resources=(), infra_action="none")
    assert plan.actions == (
        UploadArchive("router/model-abc.tar.gz", 10, "cd", ("a", "b"), "new"),
        PublishManifest(("archive router/model-abc.tar.gz (was router/model-old.tar.gz)",)),
    )


def test_an_unchanged_plan_has_no_action_and_an_offline_one_claims_none() -> None:
    quiet = tuple(change(n, "unchanged", upload=False) for n in ("a", "b"))
    unchanged = ({"stack": "ep-prod-model-store", "action": "unchanged"},)
    plan = aws_plan(models=quiet, resources=unchanged, infra_action="none")
    assert plan.actions == () and plan.empty
    assert aws_plan().offline("no credentials").actions == ()


def printed_changes(plan: Plan) -> list[str]:
    """The numbered change lines of the printed plan."""
    buffer = io.StringIO()
    render_plan(plan, Console(file=buffer, width=400, color_system=None))
    return [
        match.group(1)
        for line in buffer.getvalue().splitlines()
        if (match := re.fullmatch(r"  \d+\. (.*)", line.rstrip()))
    ]


class RecordingProvider:
    """A provider that records what each mutating call was asked to change."""

    name = "aws"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def require_provisioning_tools(self, resources: Sequence[str]) -> None:
        self.calls.append(("tools", ",".join(resources)))

    def provision_resources(self, resources: Sequence[str], reporter: Any) -> None:
        self.calls.extend(("provision", name) for name in resources)

    def upload(self, files: Sequence[StoredFile], reporter: Any) -> list[UploadOutcome]:
        self.calls.extend(("upload", file.key) for file in files)
        return [UploadOutcome(file.key, file.bytes, 1, 0, False) for file in files]

    def publish_manifest(self, document: bytes) -> None:
        self.calls.append(("publish", document.decode()))

    def apply_components(self, actions: Sequence[Any], reporter: Any) -> None:
        self.calls.extend((type(a).__name__, a.name) for a in actions)

    def delete_components(self, names: Sequence[str], reporter: Any) -> None:
        self.calls.extend(("DeleteComponent", name) for name in names)


def test_apply_executes_what_is_printed_and_calls_the_provider_for_nothing_else(
    tmp_path: Path,
) -> None:
    plan = aws_plan()
    files = tuple(
        StoredFile(key, tmp_path / key, "ab" * 32, 2048)
        for key in ("alpha-1111.tar.gz", "beta-1111.tar.gz", "delta-1111.tar.gz", "gamma.tar.gz")
    )
    package = StagePackage(
        files=files, manifest_path=tmp_path / "manifest.json", manifest=cast(Any, None), document={}
    )
    provider = RecordingProvider()
    checks: list[list[str]] = []
    run = Run(
        cast(Any, provider),
        SilentReporter(),
        package,
        manifest=lambda _package: b"{}",
    )
    apply(plan, run, verify=lambda done: checks.append([type(a).__name__ for a in done.executed]))

    # THEN each printed change was executed, in order, and nothing else
    assert printed_changes(plan) == [render_action(a) for a in run.executed]
    assert run.executed == list(plan.actions)
    assert provider.calls == [
        ("tools", "ep-prod-model-store,ep-prod-endpoint,ep-prod-api"),
        ("provision", "ep-prod-model-store"),
        ("upload", "alpha-1111.tar.gz"),
        ("upload", "beta-1111.tar.gz"),
        ("upload", "delta-1111.tar.gz"),
        ("provision", "ep-prod-endpoint"),
        ("provision", "ep-prod-api"),
        ("publish", "{}"),
    ]
    # AND the checks ran after provisioning, before the manifest switched clients
    assert checks == [["CreateModelStore", *["UploadArchive"] * 3, "Provision", "Provision"]]
    assert run.published and [u.target_model for u in run.uploads] == [
        "alpha-1111.tar.gz",
        "beta-1111.tar.gz",
        "delta-1111.tar.gz",
    ]


def test_an_empty_plan_prints_no_change_and_applies_nothing(tmp_path: Path) -> None:
    quiet = tuple(change(n, "unchanged", upload=False) for n in ("a", "b"))
    plan = aws_plan(models=quiet, resources=(), infra_action="none")
    buffer = io.StringIO()
    render_plan(plan, Console(file=buffer, width=200, color_system=None))
    assert "changes: none" in buffer.getvalue()
    provider = RecordingProvider()
    package = StagePackage(
        files=(), manifest_path=tmp_path / "m.json", manifest=cast(Any, None), document={}
    )
    run = Run(
        cast(Any, provider),
        SilentReporter(),
        package,
        manifest=lambda _package: pytest.fail("nothing to publish"),
    )
    apply(plan, run, verify=lambda _run: None)
    assert run.executed == [] and provider.calls == [("tools", "")] and not run.published


def test_components_print_and_apply_one_action_each_the_removed_one_after_publishing(
    tmp_path: Path,
) -> None:
    from deploy.hosting.component_sizing import Component, ComponentSpec, Requirements
    from deploy.lifecycle.components import ComponentChange

    def made(model: str) -> Component:
        return Component(
            f"ep-{model}",
            f"{model}-1111.tar.gz",
            ComponentSpec(model, Requirements(0, 1.0, 1024), 1, 4),
        )

    components = (
        ComponentChange("ep-alpha", "alpha", "create", ("new",), made("alpha")),
        ComponentChange("ep-beta", "beta", "update", ("archive",), made("beta"), respec=True),
        ComponentChange("ep-old", "old", "delete", ("its model is no longer in the repository",)),
    )
    plan = aws_plan(resources=(), infra_action="none", components=components)
    files = tuple(
        StoredFile(key, tmp_path / key, "ab" * 32, 2048)
        for key in ("alpha-1111.tar.gz", "beta-1111.tar.gz", "delta-1111.tar.gz")
    )
    package = StagePackage(
        files=files, manifest_path=tmp_path / "manifest.json", manifest=cast(Any, None), document={}
    )
    provider = RecordingProvider()
    checks: list[list[str]] = []
    run = Run(cast(Any, provider), SilentReporter(), package, manifest=lambda _package: b"{}")
    apply(plan, run, verify=lambda done: checks.append([type(a).__name__ for a in done.executed]))

    assert printed_changes(plan) == [render_action(a) for a in run.executed]
    assert run.executed == list(plan.actions)
    assert provider.calls[-4:] == [
        ("CreateComponent", "ep-alpha"),
        ("UpdateComponent", "ep-beta"),
        ("publish", "{}"),
        ("DeleteComponent", "ep-old"),
    ]
    # The components were in service-checked before publishing; the deletion came after.
    assert checks[0][-2:] == ["CreateComponent", "UpdateComponent"]
