"""`deploy up`: the stages chained, for any provider.

ml.inf1 stages take the single-model chain (`deploy.lifecycle.single_model`):
the same stages, with one archive for every model and the router.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deploy.config import DeploySettings
from deploy.lifecycle import stages
from deploy.lifecycle.plan import Plan
from deploy.lifecycle.provider import EndpointView, Provider, Reporter, UploadOutcome
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
    """Run the stages; `on_plan` sees the plan before anything changes."""
    from deploy.neuron.instances import is_inferentia

    started = time.monotonic()
    # A package deployed as it is was validated when it was written.
    stages.validate(settings, repository, models=not options.skip_package)
    chain = _single_model if is_inferentia(settings.instance_type) else _multi_model
    the_plan, apply = chain(
        settings, provider, repository=repository, package_dir=package_dir, options=options
    )
    result = UpResult(plan=the_plan, dry_run=options.dry_run)
    if on_plan is not None:
        on_plan(the_plan)
    if not options.dry_run:
        apply(result, reporter)
    result.seconds = time.monotonic() - started
    return result


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
) -> tuple[Plan, _Apply]:
    """Package and plan; the rest of the chain as `_Apply`."""
    if options.skip_package:
        manifest, manifest_path = stages.read_package(package_dir)
    else:
        manifest, manifest_path = stages.package(repository, package_dir)
    desired = stages.desired_infra(settings)
    the_plan, infra = stages.plan(settings, provider, manifest, desired)

    def apply(result: UpResult, reporter: Reporter) -> None:
        result.uploads = stages.upload(the_plan, provider, package_dir, reporter)
        stages.provision(infra, provider, desired, reporter)
        result.endpoint = stages.wait(provider, timeout_s=options.timeout_s, reporter=reporter)
        if not options.skip_smoke:
            result.smoke = stages.smoke(
                the_plan, manifest, manifest_path, provider, timeout_s=options.smoke_timeout_s
            )
        result.published = stages.publish(the_plan, provider, manifest_path)

    return the_plan, apply


def _single_model(
    settings: DeploySettings,
    provider: Provider,
    *,
    repository: Path,
    package_dir: Path,
    options: UpOptions,
) -> tuple[Plan, _Apply]:
    """The inf1 chain: package, plan; then [tools], upload, provision, wait, smoke, publish."""
    from deploy.lifecycle import single_model

    target = single_model.require_provider(provider)
    # Its own folder (as in the model store), apart from the multi-model archives.
    folder = package_dir / single_model.PACKAGE_FOLDER
    if options.skip_package:
        the_package = single_model.read_package(folder)
    else:
        the_package = single_model.package(repository, folder)
    desired = stages.desired_infra(settings)
    the_plan, infra = single_model.plan(settings, target, the_package, desired)

    def apply(result: UpResult, reporter: Reporter) -> None:
        # Docker (for the Neuron image) and the CDK CLI, before anything is uploaded.
        target.require_provisioning_tools(infra)
        result.uploads = single_model.upload(the_plan, target, the_package, reporter)
        stages.provision(infra, target, desired, reporter)
        result.endpoint = stages.wait(target, timeout_s=options.timeout_s, reporter=reporter)
        if not options.skip_smoke:
            result.smoke = single_model.smoke(
                the_plan, the_package, target, timeout_s=options.smoke_timeout_s
            )
        result.published = single_model.publish(the_plan, target, the_package)

    return the_plan, apply
