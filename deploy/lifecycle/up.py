"""`deploy up`: the stages chained, for any provider.

ml.inf1 stages take the single-model chain (`deploy.lifecycle.single_model`):
the same stages, with one archive for every model and the router.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deploy.config import DeploySettings
from deploy.errors import DeployError
from deploy.lifecycle import stages
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


@dataclass
class UpResult:
    plan: Plan
    dry_run: bool
    uploads: list[UploadOutcome] = field(default_factory=list)
    endpoint: EndpointView | None = None
    smoke: list[SmokeResult] = field(default_factory=list)
    published: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "plan": self.plan.to_dict(),
            "uploads": [u.to_dict() for u in self.uploads],
            "endpoint": self.endpoint.to_dict() if self.endpoint else None,
            "smoke": [s.to_dict() for s in self.smoke],
            "manifest_published": self.published,
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
) -> UpResult:
    """Run the stages; `on_plan` sees the plan before anything changes.

    The local endpoint runs on this machine: the instance type applies to AWS
    only (its checks, and the ml.inf1 single-model chain). A dry run without
    AWS credentials plans offline: the models, archives, instance and price,
    with `Plan.needs_credentials` naming what it could not compare.
    """
    from deploy.neuron.instances import is_inferentia

    started = time.monotonic()
    on_aws = provider.name == "aws"
    # A package deployed as it is was validated when it was written.
    target = f" for {settings.instance_type}" if on_aws else ""
    reporter.stage("validate", f"{repository}{target}")
    stages.validate(settings, repository, models=not options.skip_package, instance=on_aws)
    offline = provider.unavailable()
    if offline is not None and not options.dry_run:
        raise DeployError(
            offline,
            where=f"stage {settings.stage}",
            fix="configure AWS credentials (--profile, AWS_PROFILE, AWS_ACCESS_KEY_ID or an "
            "OIDC role); `deploy up --dry-run` shows the offline part of the plan without them",
        )
    single = on_aws and is_inferentia(settings.instance_type)
    chain = _single_model if single else _multi_model
    planner: Provider = provider if offline is None else _Offline(provider)
    the_plan, apply = chain(
        settings,
        planner,
        repository=repository,
        package_dir=package_dir,
        options=options,
        reporter=reporter,
    )
    if offline is not None:
        the_plan = the_plan.offline(offline)
    result = UpResult(plan=the_plan, dry_run=options.dry_run)
    if on_plan is not None:
        on_plan(the_plan)
    if not options.dry_run:
        apply(result, reporter)
    result.seconds = time.monotonic() - started
    return result


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


def _planning(reporter: Reporter, provider: Provider) -> None:
    against = {
        "aws": "the published manifest, the model store and the stacks",
        "local": "the local endpoint's published manifest and store",
    }
    reporter.stage("plan", f"comparing with {against.get(provider.name, provider.name)}")


def _uploading(reporter: Reporter, changes: int, nbytes: int) -> None:
    from deploy.lifecycle.render import size

    reporter.stage(
        "upload", f"{changes} archive(s), {size(nbytes)}" if changes else "nothing to upload"
    )


# What a chain does once the plan is out: upload -> provision -> wait -> smoke -> publish,
# recorded in the result.
_Apply = Callable[[UpResult, Reporter], None]


def _multi_model(
    settings: DeploySettings,
    provider: Provider,
    *,
    repository: Path,
    package_dir: Path,
    options: UpOptions,
    reporter: Reporter,
) -> tuple[Plan, _Apply]:
    """Package and plan; the rest of the chain as `_Apply`."""
    if options.skip_package:
        reporter.stage("package", f"using {package_dir} as it is")
        manifest, manifest_path = stages.read_package(package_dir)
    else:
        reporter.stage("package", f"{repository} -> {package_dir}")
        manifest, manifest_path = stages.package(
            repository, package_dir, progress=reporter.package_progress
        )
    desired = stages.desired_infra(settings)
    _planning(reporter, provider)
    the_plan, infra = stages.plan(settings, provider, manifest, desired)

    def apply(result: UpResult, reporter: Reporter) -> None:
        _uploading(reporter, len(the_plan.uploads), sum(m.bytes for m in the_plan.uploads))
        result.uploads = stages.upload(the_plan, provider, package_dir, reporter)
        reporter.stage("provision", _provisioning(infra.action, provider))
        stages.provision(infra, provider, desired, reporter)
        reporter.stage("wait", f"for endpoint {settings.endpoint_name} to be in service")
        result.endpoint = stages.wait(provider, timeout_s=options.timeout_s, reporter=reporter)
        if not options.skip_smoke:
            reporter.stage("smoke", f"{len(the_plan.changed_models)} new or changed model(s)")
            result.smoke = stages.smoke(
                the_plan, manifest, manifest_path, provider, timeout_s=options.smoke_timeout_s
            )
        reporter.stage("publish", "the manifest" if the_plan.manifest_changes else "no change")
        result.published = stages.publish(the_plan, provider, manifest_path)

    return the_plan, apply


def _provisioning(action: str, provider: Provider) -> str:
    if action == "none":
        return "nothing to change"
    if provider.name == "local":
        return "starting the local endpoint"
    return f"{action} stacks"


def _single_model(
    settings: DeploySettings,
    provider: Provider,
    *,
    repository: Path,
    package_dir: Path,
    options: UpOptions,
    reporter: Reporter,
) -> tuple[Plan, _Apply]:
    """The inf1 chain: package, plan; then [tools], upload, provision, wait, smoke, publish."""
    from deploy.lifecycle import single_model

    target = single_model.require_provider(provider)
    # Its own folder (as in the model store), apart from the multi-model archives.
    folder = package_dir / single_model.PACKAGE_FOLDER
    if options.skip_package:
        reporter.stage("package", f"using {folder} as it is")
        the_package = single_model.read_package(folder)
    else:
        reporter.stage("package", f"{repository} -> {folder} (one archive + router)")
        the_package = single_model.package(repository, folder)
    desired = stages.desired_infra(settings)
    _planning(reporter, provider)
    the_plan, infra = single_model.plan(settings, target, the_package, desired)

    def apply(result: UpResult, reporter: Reporter) -> None:
        # Docker (for the Neuron image) and the CDK CLI, before anything is uploaded.
        target.require_provisioning_tools(infra)
        archive = the_plan.archive
        pending = archive is not None and archive.upload
        _uploading(reporter, int(pending), archive.bytes if archive and pending else 0)
        result.uploads = single_model.upload(the_plan, target, the_package, reporter)
        reporter.stage("provision", _provisioning(infra.action, provider))
        stages.provision(infra, target, desired, reporter)
        reporter.stage("wait", f"for endpoint {settings.endpoint_name} to be in service")
        result.endpoint = stages.wait(target, timeout_s=options.timeout_s, reporter=reporter)
        if not options.skip_smoke:
            reporter.stage("smoke", f"{len(the_plan.models)} model(s) through the router")
            result.smoke = single_model.smoke(
                the_plan, the_package, target, timeout_s=options.smoke_timeout_s
            )
        reporter.stage("publish", "the manifest" if the_plan.manifest_changes else "no change")
        result.published = single_model.publish(the_plan, target, the_package)

    return the_plan, apply
