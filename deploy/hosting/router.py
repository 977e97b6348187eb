"""One archive holding every model plus the generated router (single-model endpoints).

SageMaker single-model, asynchronous and serverless endpoints load one
archive into /opt/ml/model and serve one default model: the router
(`deploy.hosting.router_model`), which forwards each request to the model named by
the request parameter `target_model`. The package folder holds
`model.tar.gz` and a manifest whose `archive` names it; each model entry
carries a digest of its folder (`source_digest`), so the plan can say which
models changed although only the archive is uploaded.

In the store the archive is `<folder>model-<first 16 hex of its sha256>.tar.gz`
(new bytes, new key, new SageMaker Model) and the manifest is published last,
to `<folder>manifest.json` next to it, where the SDK finds it from the
endpoint's ModelDataUrl.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.client import manifest as contract
from deploy.errors import PackagingError
from deploy.hosting.changes import ArchiveChange, ModelAction, ModelChange
from deploy.hosting.layout import Diff, StagePackage, StoredFile, archive_ref, folder_manifest_key

ARCHIVE_NAME = "model.tar.gz"


def archive_key(folder: str, sha256: str) -> str:
    """The archive's content-derived key under the model-store prefix."""
    return f"{folder}model-{sha256[:16]}.tar.gz"


def diff_models(local: dict[str, Any], published: dict[str, Any] | None) -> tuple[ModelChange, ...]:
    """Models new/changed/unchanged/removed by their folder digests (`source_digest`).

    Nothing is uploaded per model (the archive is), so `upload` is always False.
    """
    before = _models(published, where="published manifest")
    models = _models(local, where="package manifest")
    changes: list[ModelChange] = []
    for name in sorted(models):
        entry = models[name]
        digest = entry.source_digest or ""
        old = before.get(name)
        if old is None:
            action: ModelAction = "new"
        elif not digest or old.source_digest != digest:
            action = "changed"
        else:
            action = "unchanged"
        changes.append(
            ModelChange(
                name=name,
                action=action,
                target_model=entry.target_model,
                previous_target_model=old.target_model if old else None,
                bytes=entry.bytes or 0,
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
                target_model=gone.target_model,
                previous_target_model=gone.target_model,
                bytes=gone.bytes or 0,
                sha256=gone.source_digest or "",
                upload=False,
            )
        )
    return tuple(changes)


def _models(document: dict[str, Any] | None, *, where: str) -> Mapping[str, contract.ModelInfo]:
    """The models of a router-layout manifest as decoded (none for None), parsed."""
    if document is None:
        return {}
    try:
        return contract.parse(document, where).models
    except contract.ManifestFormatError as exc:
        raise PackagingError(
            f"not a format-{contract.MANIFEST_FORMAT} manifest: {exc.message}",
            where=exc.where or where,
            fix="re-run `deploy package` with this version of deploy",
        ) from exc


@dataclass(frozen=True)
class RouterLayout:
    """Every model plus the router in one archive, kept under `folder` in the store."""

    folder: str  # e.g. "inf1/": the store folder, and the package directory's subfolder
    name: str = "router"
    hosting: str = contract.SINGLE_MODEL  # the manifest's hosting (how the SDK's limits apply)

    @property
    def manifest_key(self) -> str:
        return folder_manifest_key(self.folder)

    def describe(self) -> str:
        return "one archive + router"

    def describe_smoke(self, count: int) -> str:
        return f"{count} model(s) through the router"

    def package(
        self,
        repository: Path,
        out: Path,
        *,
        progress: bool = False,
        triton_version: str | None = None,
    ) -> StagePackage:
        """One reproducible model.tar.gz (every model + the router) and its manifest;
        python models' `requirements.txt` environments built for `triton_version`'s Python.
        """
        from deploy.hosting.router_archive import package_single_model

        package_single_model(repository, out, hosting=self.hosting, triton_version=triton_version)
        return self.read_package(out)

    def read_package(self, out: Path) -> StagePackage:
        path = out / contract.MANIFEST_NAME
        fix = (
            f"run `deploy package --hosting {self.hosting} REPO --out DIR` (or `deploy up` "
            "without skipping packaging)"
        )
        try:
            raw = path.read_bytes()
            document: dict[str, Any] = json.loads(raw)
            manifest = contract.parse(document, str(path))
        except (OSError, ValueError) as exc:  # ManifestFormatError is a ValueError
            raise PackagingError(f"not a router package: {exc}", where=str(path), fix=fix) from exc
        if manifest.archive is None or contract.ADDRESSING[manifest.hosting] != contract.ROUTER:
            raise PackagingError(
                f"the manifest's hosting is {manifest.hosting!r} and it names "
                f"{'an' if manifest.archive else 'no'} archive: not a router package",
                where=str(path),
                fix=fix,
            )
        archive_path = out / manifest.archive.key
        if not archive_path.is_file() or archive_path.stat().st_size != manifest.archive.bytes:
            raise PackagingError(
                "the archive is missing or has the wrong size", where=str(archive_path), fix=fix
            )
        stored = StoredFile(
            archive_key(self.folder, manifest.archive.sha256),
            archive_path,
            manifest.archive.sha256,
            manifest.archive.bytes,
        )
        return StagePackage(manifest, document, path, (stored,), archive=stored)

    def diff(
        self,
        package: StagePackage,
        published: dict[str, Any] | None,
        stored_sha256: dict[str, str | None],
    ) -> Diff:
        archive = package.archive
        assert archive is not None  # read_package refuses a package without one
        change = ArchiveChange(
            key=archive.key,
            previous_key=self.archive_key(published),
            sha256=archive.sha256,
            bytes=archive.bytes,
            upload=stored_sha256.get(archive.key) != archive.sha256,
        )
        return Diff(diff_models(package.document, published), change)

    def smoke_changes(
        self, models: Sequence[ModelChange], *, deployed: bool
    ) -> tuple[ModelChange, ...]:
        """Every served model once anything was deployed: a new archive reloads them all."""
        if not deployed:
            return ()
        return tuple(m for m in models if m.action != "removed")

    def published_document(self, package: StagePackage) -> bytes:
        """The manifest as published: its archive key is the uploaded (content-named) one."""
        archive = package.archive
        assert archive is not None
        key = archive.key.removeprefix(self.folder)
        return contract.dump(contract.with_archive_key(package.manifest, key))

    def referenced_keys(self, published: dict[str, Any] | None) -> set[str]:
        key = self.archive_key(published)
        return {key} if key else set()

    def served_models(self, published: dict[str, Any] | None) -> dict[str, str]:
        return {
            name: model.target_model
            for name, model in _models(published, where="published manifest").items()
        }

    def archive_key(self, published: dict[str, Any] | None) -> str | None:
        archive = archive_ref(published)
        return f"{self.folder}{archive.key}" if archive else None
