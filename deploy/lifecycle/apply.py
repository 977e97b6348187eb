"""`apply(plan)`: run the plan's actions, each through its one executor, and nothing else.

The printed plan is `Plan.actions` rendered (deploy.lifecycle.render); this
module executes the same tuple, phase by phase (upload, provision, publish).
Consecutive actions of one kind go to their executor together (uploads run in
parallel, stacks roll out in one pass), and each is recorded in
`Run.executed` once its executor returned. Between provisioning (stacks, then
inference components) and publishing, `verify` runs the read-only checks (wait
for the endpoint, smoke test): the manifest switches clients only after they
passed. Components of removed models are deleted last, once no published
manifest names them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from deploy.errors import DeployError
from deploy.hosting import StagePackage
from deploy.lifecycle.actions import (
    PHASES,
    Action,
    CreateComponent,
    CreateModelStore,
    DeleteComponent,
    Phase,
    Provision,
    PublishManifest,
    UpdateComponent,
    UploadArchive,
)
from deploy.lifecycle.plan import Plan
from deploy.lifecycle.provider import Provider, Reporter, UploadOutcome

__all__ = ["EXECUTORS", "Run", "apply"]


@dataclass
class Run:
    """What executors act through, and what they record."""

    provider: Provider
    reporter: Reporter
    package: StagePackage  # `verify` may replace it (bound to the store's names)
    manifest: Callable[[StagePackage], bytes]  # the document to publish for a package
    uploads: list[UploadOutcome] = field(default_factory=list)
    published: bool = False
    executed: list[Action] = field(default_factory=list)


def _create_model_store(batch: Sequence[CreateModelStore], run: Run) -> None:
    run.provider.provision_resources([action.stack for action in batch], run.reporter)


def _upload(batch: Sequence[UploadArchive], run: Run) -> None:
    files = {file.key: file for file in run.package.files}
    missing = [action.key for action in batch if action.key not in files]
    if missing:
        raise DeployError(
            f"the plan uploads {', '.join(missing)}, which the package does not hold",
            where=str(run.package.manifest_path.parent),
            fix="re-run `deploy up` (it packages again); with --skip-package, package first",
        )
    run.uploads.extend(run.provider.upload([files[a.key] for a in batch], run.reporter))


def _provision(batch: Sequence[Provision], run: Run) -> None:
    run.provider.provision_resources([action.name for action in batch], run.reporter)


def _components(batch: Sequence[CreateComponent | UpdateComponent], run: Run) -> None:
    run.provider.apply_components(batch, run.reporter)


def _delete_components(batch: Sequence[DeleteComponent], run: Run) -> None:
    run.provider.delete_components([action.name for action in batch], run.reporter)


def _publish(batch: Sequence[PublishManifest], run: Run) -> None:
    run.provider.publish_manifest(run.manifest(run.package))
    run.published = True


# One executor per action kind (a test holds this to deploy.lifecycle.actions.ACTION_KINDS).
EXECUTORS: dict[type[Any], Callable[[Sequence[Any], Run], None]] = {
    CreateModelStore: _create_model_store,
    UploadArchive: _upload,
    Provision: _provision,
    CreateComponent: _components,
    UpdateComponent: _components,
    PublishManifest: _publish,
    DeleteComponent: _delete_components,
}


def apply(plan: Plan, run: Run, *, verify: Callable[[Run], None]) -> None:
    """Execute `plan.actions` in order; `verify` runs after provisioning, before publishing.

    Tools provisioning needs besides the provider's API (e.g. Docker for an image
    asset) are checked before the first action.
    """
    actions = plan.actions
    run.provider.require_provisioning_tools(
        [a.stack for a in actions if isinstance(a, CreateModelStore)]
        + [a.name for a in actions if isinstance(a, Provision)]
    )
    for phase in PHASES:
        if phase == "publish":
            verify(run)
        todo = [action for action in actions if action.phase == phase]
        if todo or phase not in _QUIET:
            run.reporter.stage(phase, _describe(phase, todo, run))
        # Creating and updating components is one batch: they roll out side by side.
        for _, group in itertools.groupby(todo, key=_executor):
            batch = list(group)
            kind = type(batch[0])
            EXECUTORS[kind](batch, run)
            run.executed.extend(batch)


# Phases only hosting components has: not reported when they have nothing to do.
_QUIET = ("models", "retire")


def _executor(action: Action) -> Callable[[Sequence[Any], Run], None]:
    return EXECUTORS[type(action)]


def _describe(phase: Phase, todo: Sequence[Action], run: Run) -> str:
    """The stage line's detail for `phase` (reporter.stage)."""
    from deploy.lifecycle.render import size

    if phase == "upload":
        uploads = [action for action in todo if isinstance(action, UploadArchive)]
        if not uploads:
            return "nothing to upload"
        store = "the model store, then " if len(uploads) < len(todo) else ""
        return f"{store}{len(uploads)} archive(s), {size(sum(a.bytes for a in uploads))}"
    if phase == "provision":
        if not todo:
            return "nothing to change"
        if run.provider.name == "local":
            return "starting the local endpoint"
        return ", ".join(f"{a.change} {a.name}" for a in todo if isinstance(a, Provision))
    if phase == "models":
        return ", ".join(
            f"{'create' if isinstance(a, CreateComponent) else 'update'} {a.name}"
            for a in todo
            if isinstance(a, CreateComponent | UpdateComponent)
        )
    if phase == "retire":
        return "delete " + ", ".join(a.name for a in todo if isinstance(a, DeleteComponent))
    return "the manifest" if todo else "no change"
