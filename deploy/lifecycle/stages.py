"""The stages of `deploy up`, each callable (and testable) on its own.

Nothing here changes the deployment: `plan` computes the changes
(`Plan.actions`) and `deploy.lifecycle.apply` executes them through the
provider. Each stage takes plain data and returns plain data. What differs
between hosting modes (packaging, the diff, store keys, what is smoke-tested,
the published manifest) is asked of the `HostingMode`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

from deploy._files import atomic_write_bytes
from deploy.client import manifest as contract
from deploy.config import DeploySettings, settings_file
from deploy.errors import ConfigError, DeployError, ValidationFailedError
from deploy.hosting import HostingMode, StagePackage, StoredFile, mode_for
from deploy.lifecycle.canary import CanaryChange, plan_canaries
from deploy.lifecycle.components import ComponentChange, rolling_notes
from deploy.lifecycle.plan import InfraSpec, ModelChange, Plan
from deploy.lifecycle.prices import estimate_for
from deploy.lifecycle.provider import EndpointView, InfraPlan, Provider, Reporter
from deploy.lifecycle.smoke import SmokeResult, raise_for_failures, smoke_test
from deploy.repository.golden import GoldenCase, load_cases


def desired_infra(settings: DeploySettings, mode: HostingMode | None = None) -> InfraSpec:
    """What the endpoint should run on, as the stage's hosting mode sizes it."""
    return (mode or mode_for(settings)).capacity(settings)


def validate(
    settings: DeploySettings,
    repository: Path,
    *,
    models: bool = True,
    instance: bool = True,
    mode: HostingMode | None = None,
) -> None:
    """Checks that need no AWS call: the hosting mode's rules for the settings (with
    `instance`: AWS) and (with `models`) the repository.

    For ml.inf1 the repository rules include NeuronCore planning for the size
    (ranges inside the instance's cores, no two models sharing one).
    """
    mode = mode or mode_for(settings)
    if instance:
        mode.check_settings(settings)
    if models:
        on = settings.instance_type if instance and mode.on_instances else None
        _validate_repository(repository, on, settings, mode)


def _validate_repository(
    repository: Path, instance_type: str | None, settings: DeploySettings, mode: HostingMode
) -> None:
    if not repository.is_dir():
        raise ConfigError(
            "model repository not found",
            where=str(repository),
            fix="pass the repository folder, or set `repository` in deploy.toml",
        )
    from deploy.validation import validate_repository

    where = str(settings_file())
    report = validate_repository(
        repository,
        instance_type=instance_type,
        triton_version=settings.infra.triton_version,
        extra_rules=[lambda loaded: mode.check_repository(settings, loaded, where)],
    )
    if report.errors:
        first = report.errors[0]
        more = f" (and {len(report.errors) - 1} more)" if len(report.errors) > 1 else ""
        raise ValidationFailedError(
            f"model {first.model!r}: {first.message}{more}",
            where=first.file + (f": {first.field}" if first.field else ""),
            fix=(first.fix or "correct the model") + "; `deploy validate` lists every problem",
        )


def package(
    mode: HostingMode,
    repository: Path,
    package_dir: Path,
    *,
    progress: bool = False,
    triton_version: str | None = None,
) -> StagePackage:
    """The mode's layout written to its folder under `package_dir` (incrementally).

    `triton_version` is the image the stage deploys (the Python of model environments).
    """
    return mode.layout.package(
        repository, mode.package_dir(package_dir), progress=progress, triton_version=triton_version
    )


def read_package(mode: HostingMode, package_dir: Path) -> StagePackage:
    """A package written before, as it is (`deploy up --skip-package`)."""
    return mode.layout.read_package(mode.package_dir(package_dir))


def bind_to_store(
    settings: DeploySettings, provider: Provider, mode: HostingMode, package: StagePackage
) -> StagePackage:
    """The package with the sections of its manifest that name the stage's resources
    (hosting async: the S3 prefixes), once the model store exists; other modes' as it is.

    The bound manifest is written next to the package's (`manifest.stage.json`): the
    smoke test reads it, and it is what is published. Hosting components' names each
    model's inference component (`HostingMode.bind_manifest`)."""
    if mode.bind_manifest is not None:
        path = package.manifest_path.with_name("manifest.stage.json")
        bound = mode.bind_manifest(settings, package.manifest)
        atomic_write_bytes(path, contract.dump(bound))
        return dataclasses.replace(
            package, manifest=bound, document=bound.to_document(), manifest_path=path
        )
    if mode.manifest_sections is None:
        return package
    bucket = provider.store_bucket()
    if bucket is None:
        raise DeployError(
            f"hosting {mode.name} needs the model-store bucket, and the {provider.name} "
            "provider has none",
            where="hosting (--hosting)",
            fix=f"deploy hosting {mode.name} to AWS",
        )
    path = package.manifest_path.with_name("manifest.stage.json")
    sections = mode.manifest_sections(settings, bucket)
    manifest = contract.parse({**package.document, **sections}, str(path))
    atomic_write_bytes(path, contract.dump(manifest))
    document = manifest.to_document()
    return dataclasses.replace(package, manifest=manifest, document=document, manifest_path=path)


def plan(
    settings: DeploySettings,
    provider: Provider,
    mode: HostingMode,
    package: StagePackage,
    desired: InfraSpec,
    canaries: Mapping[str, float] | None = None,
    *,
    repository: Path | None = None,
) -> tuple[Plan, InfraPlan]:
    """Describe calls only: what would change, and what it costs per hour.

    `canaries` (multi-model): percent by model name ('*': every changed model), as
    `deploy.lifecycle.canary.requested` reads them. Hosting components also compares
    each model's inference component (`repository`, default the stage's, sizes them)."""
    if package.archive is not None:
        # The endpoint's Model reads this archive: its templates name the key.
        provider.use_model_archive(package.archive.key)
    from deploy.guardrails import rollout_notes
    from deploy.packaging.bundles import check_published_bundles

    published = provider.published_manifest()
    stored = provider.stored_sha256(file.key for file in package.files)
    diff = mode.layout.diff(package, published, stored)
    models = diff.models
    named: tuple[CanaryChange, ...] = ()
    canary_notes: tuple[str, ...] = ()
    if mode.model_canaries:
        models, named, canary_notes = plan_canaries(
            diff.models,
            package.document,
            published,
            canaries or {},
            stage=settings.stage,
            lane=settings.async_lane,
        )
    infra = provider.plan_infra(desired)
    # Bundled BLS models may not differ from those of the archives this publishes, nor,
    # while an endpoint runs (instances may hold them), from the published archives'.
    live = infra.action != "create" or infra.current is not None
    check_published_bundles(package.document, published if live else None)
    components: tuple[ComponentChange, ...] = ()
    if mode.components is not None:
        wanted = mode.components(settings, repository or settings.repository, package)
        components = provider.plan_components(wanted)
    on_aws = provider.name == "aws"
    # Instances are what is billed, however many components they hold.
    cost = estimate_for(settings.region, desired) if on_aws else None
    return (
        Plan(
            stage=settings.stage,
            provider=provider.name,
            endpoint=settings.endpoint_name,
            models=models,
            infra_action=infra.action,
            infra=infra.changes,
            resources=infra.resources,
            cost=cost,
            hosting=mode.name,
            archive=diff.archive,
            region=settings.region if on_aws else None,
            region_source=provider.region_source,
            notes=(
                *mode.check_package(settings, package),
                *(
                    rollout_notes(settings, on_instances=mode.on_instances)
                    if on_aws and infra.action != "none"
                    else ()
                ),
                *infra.notes,
                *canary_notes,
                # Copies roll in batches on SageMaker; the local endpoint swaps one copy.
                *(rolling_notes(components) if on_aws else ()),
            ),
            store_stack=infra.store_stack,
            canaries=named,
            components=components,
        ),
        infra,
    )


def pending_files(the_plan: Plan, package: StagePackage) -> list[StoredFile]:
    """The package's files the store lacks, as the plan found."""
    keys = the_plan.upload_keys
    return [file for file in package.files if file.key in keys]


def wait(provider: Provider, *, timeout_s: float, reporter: Reporter) -> EndpointView:
    return provider.wait(timeout_s=timeout_s, reporter=reporter)


def smoke(
    the_plan: Plan,
    mode: HostingMode,
    package: StagePackage,
    provider: Provider,
    *,
    timeout_s: float = 120.0,
    repository: Path | None = None,
) -> list[SmokeResult]:
    """Smoke-test what the mode says changed (per-model: each new or changed model; a
    router layout: every model once anything was deployed); raises naming each failing one.
    Requests are addressed as the manifest's hosting says (TargetModel or router).
    A changed model with golden cases in `repository` gets those instead."""
    target = provider.data_plane()
    changes = smoke_changes(the_plan, mode)
    golden = golden_cases(repository, [change.name for change in changes])
    results = smoke_test(
        changes,
        package.manifest,
        package.manifest_path,
        target,
        timeout_s=timeout_s,
        golden=golden,
    )
    raise_for_failures(results, endpoint=target.endpoint_name, endpoint_url=target.endpoint_url)
    return results


def smoke_changes(the_plan: Plan, mode: HostingMode) -> tuple[ModelChange, ...]:
    """The models the smoke test calls: those the mode's layout says changed; hosting
    components: each model whose component the plan creates or re-specifies (a new
    copy serves it), called by its InferenceComponentName as the manifest names it."""
    if mode.components is None:
        return mode.layout.smoke_changes(the_plan.models, deployed=not the_plan.empty)
    rolled = {c.model for c in the_plan.components if c.action == "create" or c.respec}
    return tuple(m for m in the_plan.models if m.name in rolled)


def golden_cases(repository: Path | None, models: Sequence[str]) -> dict[str, list[GoldenCase]]:
    """Each named model's golden cases (none without a repository or a model folder)."""
    if repository is None:
        return {}
    found: dict[str, list[GoldenCase]] = {}
    for name in models:
        folder = repository / name
        if folder.is_dir():
            cases = load_cases(folder)
            if cases:
                found[name] = cases
    return found
