"""One archive per model (SageMaker multi-model endpoints): `deploy package`'s layout.

Each model's archive is stored under its TargetModel (`<name>-<hash>.tar.gz`)
directly under the model-store prefix, next to `manifest.json`; a model is
uploaded when the store lacks its bytes, and smoke-tested when it is new or
changed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.client import manifest as contract
from deploy.errors import PackagingError
from deploy.hosting.changes import ModelAction, ModelChange
from deploy.hosting.layout import Diff, StagePackage, StoredFile, folder_manifest_key


@dataclass(frozen=True)
class ArchiveEntry:
    """One model of a per-model manifest (the fields the lifecycle needs)."""

    name: str
    target_model: str
    sha256: str
    bytes: int


def manifest_entries(manifest: dict[str, Any] | None, *, where: str) -> dict[str, ArchiveEntry]:
    """The models of a per-model manifest, checked: each names its archive's bytes."""
    if manifest is None:
        return {}
    try:
        parsed = contract.parse(manifest, where)
    except contract.ManifestFormatError as exc:
        raise PackagingError(
            f"not a format-{contract.MANIFEST_FORMAT} manifest: {exc.message}",
            where=exc.where or where,
            fix="re-run `deploy package` with this version of deploy",
        ) from exc
    entries: dict[str, ArchiveEntry] = {}
    for name, model in parsed.models.items():
        if model.sha256 is None or model.bytes is None:
            missing = "sha256" if model.sha256 is None else "bytes"
            raise PackagingError(
                f"model {name!r} lacks {missing!r}",
                where=f"{where}: models.{name}",
                fix="re-run `deploy package`",
            )
        entries[name] = ArchiveEntry(
            name=model.name,
            target_model=model.target_model,
            sha256=model.sha256,
            bytes=model.bytes,
        )
    return entries


def canary_keys(manifest: dict[str, Any] | None) -> set[str]:
    """The TargetModels of the canaries a per-model manifest names (format 1.2 on)."""
    if manifest is None:
        return set()
    parsed = contract.parse(manifest, "published manifest")
    return {info.canary.target_model for info in parsed.models.values() if info.canary}


def diff_models(
    local: dict[str, ArchiveEntry],
    published: dict[str, ArchiveEntry],
    stored_sha256: dict[str, str | None],
) -> tuple[ModelChange, ...]:
    """Compare the packaged models with the published manifest and the store.

    `stored_sha256[target_model]` is what the store holds under that key
    (None: nothing). An archive is uploaded when the store lacks those bytes,
    whatever the manifest says (a previous run may have stopped half-way).
    """
    changes: list[ModelChange] = []
    for name in sorted(local):
        entry = local[name]
        before = published.get(name)
        if before is None:
            action: ModelAction = "new"
        elif before.target_model != entry.target_model or before.sha256 != entry.sha256:
            action = "changed"
        else:
            action = "unchanged"
        changes.append(
            ModelChange(
                name=name,
                action=action,
                target_model=entry.target_model,
                previous_target_model=before.target_model if before else None,
                bytes=entry.bytes,
                sha256=entry.sha256,
                upload=stored_sha256.get(entry.target_model) != entry.sha256,
            )
        )
    for name in sorted(set(published) - set(local)):
        gone = published[name]
        changes.append(
            ModelChange(
                name=name,
                action="removed",
                target_model=gone.target_model,
                previous_target_model=gone.target_model,
                bytes=gone.bytes,
                sha256=gone.sha256,
                upload=False,
            )
        )
    return tuple(changes)


class PerModelLayout:
    """`deploy package` output: one archive per model, stored under its TargetModel."""

    name = "per-model"
    folder = ""

    @property
    def manifest_key(self) -> str:
        return folder_manifest_key(self.folder)

    def describe(self) -> str:
        return "one archive per model"

    def describe_smoke(self, count: int) -> str:
        return f"{count} new or changed model(s)"

    def package(
        self,
        repository: Path,
        out: Path,
        *,
        progress: bool = False,
        triton_version: str | None = None,
    ) -> StagePackage:
        """Incremental packaging (unchanged models keep their archives)."""
        from deploy.packaging import package_repository

        package_repository(repository, out, progress=progress, triton_version=triton_version)
        return self.read_package(out)

    def read_package(self, out: Path) -> StagePackage:
        path = out / contract.MANIFEST_NAME
        try:
            raw = path.read_bytes()
            document: dict[str, Any] = json.loads(raw)
        except (OSError, ValueError) as exc:
            raise PackagingError(
                f"cannot read the manifest: {exc}", where=str(path), fix="run `deploy package`"
            ) from exc
        entries = manifest_entries(document, where=str(path))
        files = []
        for entry in entries.values():
            archive = out / entry.target_model
            if not archive.is_file() or archive.stat().st_size != entry.bytes:
                raise PackagingError(
                    f"archive of model {entry.name!r} is missing or has the wrong size",
                    where=str(archive),
                    fix="re-run `deploy package`",
                )
            files.append(StoredFile(entry.target_model, archive, entry.sha256, entry.bytes))
        return StagePackage(contract.parse(document, str(path)), document, path, tuple(files))

    def diff(
        self,
        package: StagePackage,
        published: dict[str, Any] | None,
        stored_sha256: dict[str, str | None],
    ) -> Diff:
        local = manifest_entries(package.document, where=str(package.manifest_path))
        before = manifest_entries(published, where="published manifest")
        return Diff(diff_models(local, before, stored_sha256))

    def smoke_changes(
        self, models: Sequence[ModelChange], *, deployed: bool
    ) -> tuple[ModelChange, ...]:
        """New or changed models: each has its own archive, the others did not move."""
        return tuple(m for m in models if m.action in {"new", "changed"})

    def published_document(self, package: StagePackage) -> bytes:
        return package.manifest_path.read_bytes()

    def referenced_keys(self, published: dict[str, Any] | None) -> set[str]:
        # A canary's archive is referenced while the manifest names it: calls reach it.
        return {
            entry.target_model
            for entry in manifest_entries(published, where="published manifest").values()
        } | canary_keys(published)

    def served_models(self, published: dict[str, Any] | None) -> dict[str, str]:
        return {
            name: entry.target_model
            for name, entry in manifest_entries(published, where="published manifest").items()
        }

    def archive_key(self, published: dict[str, Any] | None) -> str | None:
        return None
