"""The stages of `deploy up`, each callable (and testable) on its own.

Only `upload`, `provision` and `publish` change anything, and only through
the provider. Each stage takes plain data and returns plain data.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deploy.config import DeploySettings
from deploy.errors import ConfigError, PackagingError, ValidationFailedError
from deploy.instance_types import require_instance_type
from deploy.lifecycle.plan import (
    InfraSpec,
    ModelChange,
    Plan,
    diff_models,
    manifest_entries,
)
from deploy.lifecycle.prices import estimate
from deploy.lifecycle.provider import (
    EndpointView,
    InfraPlan,
    Provider,
    Reporter,
    UploadOutcome,
)
from deploy.lifecycle.smoke import SmokeResult, raise_for_failures, smoke_test
from deploy.neuron.instances import is_inferentia, neuron_cores

MANIFEST = "manifest.json"
# Families SageMaker multi-model endpoints do not run on (aws-neuron/aws-neuron-sdk#154).
_NO_MME_FAMILIES = ("inf1", "inf2", "trn1", "trn2")


def desired_infra(settings: DeploySettings) -> InfraSpec:
    return InfraSpec(
        instance_type=settings.instance_type,
        initial_instance_count=settings.infra.initial_instance_count,
        min_instance_count=settings.infra.min_instance_count,
        max_instance_count=settings.infra.max_instance_count,
    )


def validate(
    settings: DeploySettings, repository: Path, *, models: bool = True, instance: bool = True
) -> None:
    """Checks that need no AWS call: the instance type (with `instance`: AWS) and
    (with `models`) the repository.

    For ml.inf1 the repository rules include NeuronCore planning for the size
    (ranges inside the instance's cores, no two models sharing one).
    """
    if instance:
        _validate_instance(settings)
    if models:
        _validate_repository(repository, settings.instance_type if instance else None)


def _validate_instance(settings: DeploySettings) -> None:
    # SageMaker's own list (with "did you mean"): every entry is ml.<family>.<size>.
    require_instance_type(settings.instance_type, where="instance_type (--instance)")
    parts = settings.instance_type.split(".")
    if is_inferentia(settings.instance_type):
        # A single-model endpoint (deploy.lifecycle.single_model); an unknown size fails here.
        neuron_cores(settings.instance_type)
    elif parts[1] in _NO_MME_FAMILIES:
        raise ConfigError(
            f"{settings.instance_type} cannot host a multi-model endpoint",
            where="instance_type (--instance)",
            fix="use a GPU (ml.g5.xlarge) or CPU (ml.m5.xlarge) instance, "
            "or ml.inf1 (a single-model endpoint)",
        )


def _validate_repository(repository: Path, instance_type: str | None) -> None:
    if not repository.is_dir():
        raise ConfigError(
            "model repository not found",
            where=str(repository),
            fix="pass the repository folder, or set `repository` in deploy.toml",
        )
    from deploy.validation import validate_repository

    report = validate_repository(repository, instance_type=instance_type)
    if report.errors:
        first = report.errors[0]
        more = f" (and {len(report.errors) - 1} more)" if len(report.errors) > 1 else ""
        raise ValidationFailedError(
            f"model {first.model!r}: {first.message}{more}",
            where=first.file + (f": {first.field}" if first.field else ""),
            fix=(first.fix or "correct the model") + "; `deploy validate` lists every problem",
        )


def package(
    repository: Path, package_dir: Path, *, progress: bool = False
) -> tuple[dict[str, Any], Path]:
    """Incremental packaging (unchanged models keep their archives); returns the manifest."""
    from deploy.packaging import package_repository

    package_repository(repository, package_dir, progress=progress)
    return read_package(package_dir)


def read_package(package_dir: Path) -> tuple[dict[str, Any], Path]:
    path = package_dir / MANIFEST
    try:
        document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PackagingError(
            f"cannot read the manifest: {exc}", where=str(path), fix="run `deploy package`"
        ) from exc
    for entry in manifest_entries(document, where=str(path)).values():
        archive = package_dir / entry.target_model
        if not archive.is_file() or archive.stat().st_size != entry.bytes:
            raise PackagingError(
                f"archive of model {entry.name!r} is missing or has the wrong size",
                where=str(archive),
                fix="re-run `deploy package`",
            )
    return document, path


def plan(
    settings: DeploySettings,
    provider: Provider,
    manifest: dict[str, Any],
    desired: InfraSpec,
) -> tuple[Plan, InfraPlan]:
    """Describe calls only: what would change, and what it costs per hour."""
    local = manifest_entries(manifest, where=MANIFEST)
    published = manifest_entries(provider.published_manifest(), where="published manifest")
    stored = provider.stored_sha256(entry.target_model for entry in local.values())
    models = diff_models(local, published, stored)
    infra = provider.plan_infra(desired)
    cost = (
        estimate(
            settings.region,
            desired.instance_type,
            min_instances=desired.min_instance_count,
            max_instances=desired.max_instance_count,
        )
        if provider.name == "aws"
        else None
    )
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
            region=settings.region if provider.name == "aws" else None,
            region_source=provider.region_source,
        ),
        infra,
    )


def upload(
    the_plan: Plan, provider: Provider, package_dir: Path, reporter: Reporter
) -> list[UploadOutcome]:
    """Send the archives the store lacks (and only those)."""
    todo: list[ModelChange] = list(the_plan.uploads)
    if not todo:
        return []
    return provider.upload(package_dir, todo, reporter)


def provision(infra: InfraPlan, provider: Provider, desired: InfraSpec, reporter: Reporter) -> None:
    if infra.action != "none":
        provider.provision(infra, desired, reporter)


def wait(provider: Provider, *, timeout_s: float, reporter: Reporter) -> EndpointView:
    return provider.wait(timeout_s=timeout_s, reporter=reporter)


def smoke(
    the_plan: Plan,
    manifest: dict[str, Any],
    manifest_path: Path,
    provider: Provider,
    *,
    timeout_s: float = 120.0,
    changes: Sequence[ModelChange] | None = None,
) -> list[SmokeResult]:
    """Smoke-test `changes` (by default every new or changed model); raises naming each
    failing one."""
    target = provider.data_plane()
    results = smoke_test(
        the_plan.changed_models if changes is None else changes,
        manifest,
        manifest_path,
        target,
        timeout_s=timeout_s,
    )
    raise_for_failures(results, endpoint=target.endpoint_name)
    return results


def publish(the_plan: Plan, provider: Provider, manifest_path: Path) -> bool:
    """Switch clients to the new manifest (last, after the smoke test)."""
    if not the_plan.manifest_changes and provider.published_manifest() is not None:
        return False
    provider.publish_manifest(manifest_path.read_bytes())
    return True
