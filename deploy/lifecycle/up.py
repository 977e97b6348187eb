"""`deploy up`: the stages chained, for any provider and any hosting mode.

    validate -> package -> plan -> apply: [tools] -> upload -> provision -> wait -> smoke -> publish

The plan's actions (`Plan.actions`) are what `on_plan` prints and all that
`deploy.lifecycle.apply.apply` changes; waiting and the smoke test only read.
What differs between hosting modes (multi-model, single-model, async,
serverless, components) is the `deploy.hosting.HostingMode` the stages are
given; hosting components adds one action per inference component (created and
updated after the stacks, deleted after publishing).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deploy.config import DeploySettings
from deploy.errors import ConfigError, DeployError
from deploy.hosting import HostingMode, StagePackage, mode_for
from deploy.hosting.component_sizing import Component
from deploy.lifecycle import stages
from deploy.lifecycle.actions import Action
from deploy.lifecycle.actions import to_dict as action_dict
from deploy.lifecycle.apply import Run, apply
from deploy.lifecycle.components import ComponentChange
from deploy.lifecycle.plan import InfraSpec, Plan, diff_infra
from deploy.lifecycle.provider import (
    EndpointView,
    InfraPlan,
    Provider,
    Reporter,
    UploadOutcome,
)
from deploy.lifecycle.smoke import SmokeResult


@dataclass(frozen=True)
class UpOptions:
    dry_run: bool = False
    skip_package: bool = False  # use the package directory as it is
    skip_smoke: bool = False
    timeout_s: float = 3600.0
    smoke_timeout_s: float = 120.0
    canary: float | None = None  # --canary: percent for every changed model (multi-model)


@dataclass
class UpResult:
    plan: Plan
    dry_run: bool
    uploads: list[UploadOutcome] = field(default_factory=list)
    endpoint: EndpointView | None = None
    smoke: list[SmokeResult] = field(default_factory=list)
    published: bool = False
    applied: list[Action] = field(default_factory=list)  # the plan's actions, as executed
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "plan": self.plan.to_dict(),
            "uploads": [u.to_dict() for u in self.uploads],
            "endpoint": self.endpoint.to_dict() if self.endpoint else None,
            "smoke": [s.to_dict() for s in self.smoke],
            "manifest_published": self.published,
            "applied": [action_dict(action) for action in self.applied],
            "seconds": round(self.seconds, 2),
        }


def up(
    settings: DeploySettings,
    provider: Provider,
    *,
    repository: Path,
    package_dir: Path,
    options: UpOptions,
    reporter: Reporter,
    on_plan: Callable[[Plan], None] | None = None,
    mode: HostingMode | None = None,
) -> UpResult:
    """Run the stages; `on_plan` sees the plan before anything changes.

    `mode` is the stage's hosting mode (default: `deploy.hosting.mode_for(settings)`);
    the chain is the same for every mode. The local endpoint runs on this machine:
    the instance type applies to AWS only. A dry run without AWS credentials plans
    offline: the models, archives, instance and price, with `Plan.needs_credentials`
    naming what it could not compare.
    """
    started = time.monotonic()
    on_aws = provider.name == "aws"
    mode = mode or mode_for(settings)
    _require_hosting(provider, mode)
    from deploy.lifecycle.canary import requested

    canaries = requested(settings, options.canary, mode)
    # A package deployed as it is was validated when it was written.
    target = f" for {settings.instance_type}" if on_aws else ""
    reporter.stage("validate", f"{repository}{target} ({mode.name})")
    stages.validate(
        settings, repository, models=not options.skip_package, instance=on_aws, mode=mode
    )
    offline = provider.unavailable()
    if offline is not None and not options.dry_run:
        raise DeployError(
            offline,
            where=f"stage {settings.stage}",
            fix="configure AWS credentials (--profile, AWS_PROFILE, AWS_ACCESS_KEY_ID or an "
            "OIDC role); `deploy up --dry-run` shows the offline part of the plan without them",
        )
    planner: Provider = provider if offline is None else _Offline(provider)
    folder = mode.package_dir(package_dir)
    if options.skip_package:
        reporter.stage("package", f"using {folder} as it is")
        package = stages.read_package(mode, package_dir)
    else:
        reporter.stage("package", f"{repository} -> {folder} ({mode.layout.describe()})")
        package = stages.package(
            mode,
            repository,
            package_dir,
            progress=reporter.package_progress,
            triton_version=settings.infra.triton_version,
        )
    desired = stages.desired_infra(settings, mode)
    _planning(reporter, provider)
    the_plan, _ = stages.plan(
        settings, planner, mode, package, desired, canaries, repository=repository
    )
    if offline is not None:
        the_plan = the_plan.offline(offline)
    result = UpResult(plan=the_plan, dry_run=options.dry_run)
    if on_plan is not None:
        on_plan(the_plan)
    if not options.dry_run:
        _apply(the_plan, settings, provider, mode, package, options, result, reporter)
    result.seconds = time.monotonic() - started
    return result


def _apply(
    the_plan: Plan,
    settings: DeploySettings,
    provider: Provider,
    mode: HostingMode,
    package: StagePackage,
    options: UpOptions,
    result: UpResult,
    reporter: Reporter,
) -> None:
    """The plan's actions (upload -> provision -> [wait -> smoke] -> publish), recorded
    in `result`."""

    def verify(run: Run) -> None:
        # Read-only: the endpoint in service, then the changed models answering.
        run.package = stages.bind_to_store(settings, provider, mode, run.package)
        reporter.stage("wait", f"for endpoint {settings.endpoint_name} to be in service")
        result.endpoint = stages.wait(provider, timeout_s=options.timeout_s, reporter=reporter)
        if not options.skip_smoke:
            count = len(stages.smoke_changes(the_plan, mode))
            reporter.stage("smoke", mode.layout.describe_smoke(count))
            result.smoke = stages.smoke(
                the_plan,
                mode,
                run.package,
                provider,
                timeout_s=options.smoke_timeout_s,
                repository=settings.repository,
            )

    from deploy.lifecycle.canary import published_document

    def manifest(package: StagePackage) -> bytes:
        # Canaried models: the live version stays, the new one named as its canary.
        return published_document(mode.layout.published_document(package), the_plan.canaries)

    run = Run(provider, reporter, package, manifest=manifest)
    try:
        apply(the_plan, run, verify=verify)
    finally:
        result.uploads = run.uploads
        result.published = run.published
        result.applied = list(run.executed)


def _require_hosting(provider: Provider, mode: HostingMode) -> None:
    if mode.name in provider.hostings:
        return
    raise ConfigError(
        f"the {provider.name} provider does not host {mode.name} endpoints "
        f"(it hosts: {', '.join(provider.hostings)})",
        where="hosting (--hosting)",
        fix=f"run the {mode.name} layout on this machine with "
        f"`deploy serve --hosting {mode.name} REPO`"
        if provider.name == "local"
        else f"use --hosting {provider.hostings[0]}",
    )


class _Offline:
    """A provider seen without credentials: nothing published, stored or deployed known.

    Only for planning; `Plan.offline` then marks what this could not know.
    """

    def __init__(self, provider: Provider) -> None:
        self._provider = provider

    def __getattr__(self, name: str) -> Any:
        return getattr(self._provider, name)

    def published_manifest(self) -> dict[str, Any] | None:
        return None

    def stored_sha256(self, target_models: Iterable[str]) -> dict[str, str | None]:
        return dict.fromkeys(target_models)

    def plan_infra(self, desired: InfraSpec) -> InfraPlan:
        return InfraPlan(action="create", current=None, changes=diff_infra(None, desired))

    def plan_components(self, desired: Sequence[Component]) -> tuple[ComponentChange, ...]:
        return ()  # an offline plan compares nothing


def _planning(reporter: Reporter, provider: Provider) -> None:
    against = {
        "aws": "the published manifest, the model store and the stacks",
        "local": "the local endpoint's published manifest and store",
    }
    reporter.stage("plan", f"comparing with {against.get(provider.name, provider.name)}")
