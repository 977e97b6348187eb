"""What a layout hands the stages: the package as read, and the files the store must hold.

A layout turns a repository into stored objects: one archive per model
(`per_model.PerModelLayout`, multi-model endpoints) or one archive holding
every model plus the router (`router.RouterLayout`, single-model, async and
serverless endpoints). The stages only see `StagePackage` and `StoredFile`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from deploy.client.manifest import MANIFEST_NAME, ArchiveRef, Manifest
from deploy.hosting.changes import ArchiveChange, ModelChange


@dataclass(frozen=True)
class StoredFile:
    """One object the model store must hold: `key` is relative to the store's prefix."""

    key: str
    path: Path
    sha256: str
    bytes: int


@dataclass(frozen=True)
class StagePackage:
    """A package folder as the stages read it, whatever the layout."""

    manifest: Manifest
    document: dict[str, Any]  # the manifest as decoded (what smoke tests read)
    manifest_path: Path
    files: tuple[StoredFile, ...]  # what the store must hold, keyed under its prefix
    archive: StoredFile | None = None  # router layouts: the one archive (also in `files`)


@dataclass(frozen=True)
class Diff:
    """The plan's view of the store: per model, and the one archive of a router layout."""

    models: tuple[ModelChange, ...]
    archive: ArchiveChange | None = None


class Layout(Protocol):
    """How a hosting mode lays models out in the package folder and the model store."""

    @property
    def name(self) -> str:
        """ "per-model" or "router"."""
        ...

    @property
    def folder(self) -> str:
        """Under the model-store prefix, where the archives and the published manifest
        live ("" or "<folder>/"); under the package directory, the same folder."""
        ...

    @property
    def manifest_key(self) -> str:
        """The published manifest's key under the model-store prefix."""
        ...

    def describe(self) -> str:
        """A few words for the package stage (e.g. "one archive + router")."""
        ...

    def describe_smoke(self, count: int) -> str:
        """A few words for the smoke stage about the `count` models it calls."""
        ...

    def package(
        self,
        repository: Path,
        out: Path,
        *,
        progress: bool = False,
        triton_version: str | None = None,
    ) -> StagePackage:
        """Write the package into `out` (incrementally where the layout can).

        `triton_version` is the stage's SageMaker Triton image: it picks the Python
        that models' `requirements.txt` environments are built for.
        """
        ...

    def read_package(self, out: Path) -> StagePackage:
        """A package written before (PackagingError naming what is missing)."""
        ...

    def diff(
        self,
        package: StagePackage,
        published: dict[str, Any] | None,
        stored_sha256: dict[str, str | None],
    ) -> Diff:
        """Models new/changed/unchanged/removed, and what the store lacks."""
        ...

    def smoke_changes(
        self, models: Sequence[ModelChange], *, deployed: bool
    ) -> tuple[ModelChange, ...]:
        """The models to smoke-test once `deployed` (anything changed) is known."""
        ...

    def published_document(self, package: StagePackage) -> bytes:
        """The manifest as published to the store."""
        ...

    def referenced_keys(self, published: dict[str, Any] | None) -> set[str]:
        """Keys under the prefix the published manifest references (`deploy prune` keeps)."""
        ...

    def served_models(self, published: dict[str, Any] | None) -> dict[str, str]:
        """Logical name → what a client sends, as the published manifest says."""
        ...

    def archive_key(self, published: dict[str, Any] | None) -> str | None:
        """Router layouts: the published archive's key under the prefix (None otherwise)."""
        ...


def folder_manifest_key(folder: str) -> str:
    return folder + MANIFEST_NAME


def archive_ref(document: dict[str, Any] | None) -> ArchiveRef | None:
    archive = (document or {}).get("archive") or {}
    key, sha256, size = archive.get("key"), archive.get("sha256"), archive.get("bytes")
    if not isinstance(key, str) or not isinstance(sha256, str) or not isinstance(size, int):
        return None
    return ArchiveRef(key, sha256, size)
