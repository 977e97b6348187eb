"""The stages of `deploy up` for ml.inf1: one single-model endpoint behind the router.

SageMaker runs no multi-model endpoints on inf1 (aws-neuron/aws-neuron-sdk#154),
so an inf1 stage serves one archive holding every model plus the generated
router (`deploy.neuron.package`). The chain is the multi-model one with these
stages in place of package, plan, upload, smoke and publish:

    validate (NeuronCores for the size) -> package (<package_dir>/inf1/: model.tar.gz
    + manifest)
    -> plan -> [CDK CLI and Docker checked] -> upload the archive -> provision
    (CDK CLI) -> wait -> smoke every model through the router -> publish

The archive is uploaded as `inf1/model-<first 16 hex of its sha256>.tar.gz`
under the model-store prefix: new bytes, new key, new SageMaker Model (the
endpoint template names the key). The manifest (`"hosting": "single-model"`)
is published last, to `inf1/manifest.json` next to the archives, where the
SDK finds it from the endpoint's ModelDataUrl.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from deploy.config import DeploySettings
from deploy.errors import ConfigError, PackagingError
from deploy.lifecycle import stages
from deploy.lifecycle.plan import (
    ArchiveChange,
    InfraSpec,
    ModelAction,
    ModelChange,
    Plan,
)
from deploy.lifecycle.prices import estimate
from deploy.lifecycle.provider import InfraPlan, Provider, Reporter, UploadOutcome
from deploy.lifecycle.smoke import SmokeResult

MANIFEST = "manifest.json"
ARCHIVE_FOLDER = "inf1/"
PACKAGE_FOLDER = "inf1"  # under the package directory
HOSTING = "single-model"


class SingleModelProvider(Provider, Protocol):
    """What the inf1 stages need from a provider besides the `Provider` surface
    (the AWS one offers it)."""

    single_model: bool

    def use_model_archive(self, key: str) -> None: ...
    def require_provisioning_tools(self, infra: InfraPlan) -> None: ...
    def upload_archive(
        self, path: Path, key: str, sha256: str, reporter: Reporter
    ) -> UploadOutcome: ...


def require_provider(provider: Any) -> SingleModelProvider:
    if not getattr(provider, "single_model", False):
        raise ConfigError(
            f"the {getattr(provider, 'name', 'chosen')} provider does not host ml.inf1 "
            "single-model endpoints",
            where="instance_type (--instance)",
            fix="run the inf1 layout locally with `deploy serve --mode single-model REPO`; "
            "`deploy up --local` serves the multi-model layout",
        )
    return provider  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Package:
    """`deploy neuron package` output as the stages read it."""

    manifest: dict[str, Any]
    manifest_path: Path
    archive_path: Path
    sha256: str
    bytes: int

    @property
    def key(self) -> str:
        """The archive's key under the model-store prefix (content-derived)."""
        return archive_key(self.sha256)


def archive_key(sha256: str) -> str:
    return f"{ARCHIVE_FOLDER}model-{sha256[:16]}.tar.gz"


def package(repository: Path, package_dir: Path) -> Package:
    """One reproducible model.tar.gz (every model + the router) and its manifest."""
    from deploy.neuron.package import package_single_model

    package_single_model(repository, package_dir)
    return read_package(package_dir)


def read_package(package_dir: Path) -> Package:
    path = package_dir / MANIFEST
    fix = "run `deploy neuron package REPO --out DIR` (or `deploy up` without skipping packaging)"
    try:
        document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        archive = document["archive"]
        sha256, size = str(archive["sha256"]), int(archive["bytes"])
        archive_path = package_dir / str(archive["key"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PackagingError(
            f"not a single-model package: {exc}", where=str(path), fix=fix
        ) from exc
    if document.get("hosting") != HOSTING or not isinstance(document.get("models"), dict):
        raise PackagingError(
            f"the manifest's hosting is {document.get('hosting')!r}, not {HOSTING!r}",
            where=str(path),
            fix=fix,
        )
    if not archive_path.is_file() or archive_path.stat().st_size != size:
        raise PackagingError(
            "the archive is missing or has the wrong size", where=str(archive_path), fix=fix
        )
    return Package(document, path, archive_path, sha256, size)


def diff_models(local: dict[str, Any], published: dict[str, Any] | None) -> tuple[ModelChange, ...]:
    """Models new/changed/unchanged/removed by their folder digests (`source_digest`).

    Nothing is uploaded per model (the archive is), so `upload` is always False.
    """
    before = (published or {}).get("models") or {}
    models = local.get("models") or {}
    changes: list[ModelChange] = []
    for name in sorted(models):
        entry = models[name]
        digest = str(entry.get("source_digest", ""))
        old = before.get(name)
        if old is None:
            action: ModelAction = "new"
        elif not digest or old.get("source_digest") != digest:
            action = "changed"
        else:
            action = "unchanged"
        changes.append(
            ModelChange(
                name=name,
                action=action,
                target_model=str(entry.get("target_model", name)),
                previous_target_model=str(old.get("target_model", name)) if old else None,
                bytes=int(entry.get("bytes", 0)),
                sha256=digest,
                upload=False,
            )
        )
    for name in sorted(set(before) - set(models)):
        gone = before[name]
        changes.append(
            ModelChange(
                name=name,
                action="removed",
                target_model=str(gone.get("target_model", name)),
                previous_target_model=str(gone.get("target_model", name)),
                bytes=int(gone.get("bytes", 0)),
                sha256=str(gone.get("source_digest", "")),
                upload=False,
            )
        )
    return tuple(changes)


def published_key(published: dict[str, Any] | None) -> str | None:
    archive = (published or {}).get("archive") or {}
    key = archive.get("key")
    return f"{ARCHIVE_FOLDER}{key}" if key else None


def plan(
    settings: DeploySettings,
    provider: SingleModelProvider,
    the_package: Package,
    desired: InfraSpec,
) -> tuple[Plan, InfraPlan]:
    """Describe calls only: models, the archive, the single-model endpoint, the cost."""
    provider.use_model_archive(the_package.key)
    published = provider.published_manifest()
    stored = provider.stored_sha256([the_package.key])
    archive = ArchiveChange(
        key=the_package.key,
        previous_key=published_key(published),
        sha256=the_package.sha256,
        bytes=the_package.bytes,
        upload=stored.get(the_package.key) != the_package.sha256,
    )
    infra = provider.plan_infra(desired)
    cost = estimate(
        settings.region,
        desired.instance_type,
        min_instances=desired.min_instance_count,
        max_instances=desired.max_instance_count,
    )
    return (
        Plan(
            stage=settings.stage,
            provider=provider.name,
            endpoint=settings.endpoint_name,
            models=diff_models(the_package.manifest, published),
            infra_action=infra.action,
            infra=infra.changes,
            resources=infra.resources,
            cost=cost,
            hosting=HOSTING,
            archive=archive,
            region=settings.region,
            region_source=provider.region_source,
        ),
        infra,
    )


def upload(
    the_plan: Plan, provider: SingleModelProvider, the_package: Package, reporter: Reporter
) -> list[UploadOutcome]:
    """The archive, unless the store already holds these bytes under its key."""
    if the_plan.archive is None or not the_plan.archive.upload:
        return []
    return [
        provider.upload_archive(
            the_package.archive_path, the_plan.archive.key, the_package.sha256, reporter
        )
    ]


def smoke_changes(the_plan: Plan) -> tuple[ModelChange, ...]:
    """Every served model once anything was deployed: a new archive reloads them all."""
    if the_plan.empty:
        return ()
    return tuple(m for m in the_plan.models if m.action != "removed")


def smoke(
    the_plan: Plan,
    the_package: Package,
    provider: SingleModelProvider,
    *,
    timeout_s: float = 120.0,
) -> list[SmokeResult]:
    """Call every model through the router (the SDK reads the single-model manifest)."""
    return stages.smoke(
        the_plan,
        the_package.manifest,
        the_package.manifest_path,
        provider,
        timeout_s=timeout_s,
        changes=smoke_changes(the_plan),
    )


def published_document(the_package: Package) -> bytes:
    """The manifest as published: its archive key is the uploaded (content-named) one."""
    document = dict(the_package.manifest)
    document["archive"] = {
        **dict(document["archive"]),
        "key": the_package.key.removeprefix(ARCHIVE_FOLDER),
    }
    return (json.dumps(document, indent=2) + "\n").encode()


def publish(the_plan: Plan, provider: SingleModelProvider, the_package: Package) -> bool:
    """Switch clients to the new manifest (last, after the smoke test)."""
    if not the_plan.manifest_changes and provider.published_manifest() is not None:
        return False
    provider.publish_manifest(published_document(the_package))
    return True
