"""The model store's `manifest.json` (see docs/architecture.md, "The model store").

`read_manifest` is the one parser other components use; `write_manifest`
replaces the file atomically so readers never see half of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from deploy.errors import PackagingError
from deploy.packaging.atomic import atomic_write_bytes

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1


class TensorEntry(BaseModel):
    """A declared tensor. `optional` (an input a request may omit) is written only
    when true, so manifests of models without optional inputs stay as they were."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    datatype: str
    shape: list[int]
    optional: bool = False

    @model_serializer(mode="wrap")
    def _omit_default_optional(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        document: dict[str, Any] = handler(self)
        if not self.optional:
            document.pop("optional", None)
        return document


class ManifestEntry(BaseModel):
    """One deployable model: its archive, what it holds and its signature."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str
    target_model: str = Field(description="archive path relative to the store: the TargetModel")
    sha256: str
    bytes: int
    source_digest: str
    kind: Literal["model", "ensemble", "bls"]
    backend: str
    platform: str
    max_batch_size: int
    inputs: list[TensorEntry]
    outputs: list[TensorEntry]
    contains: list[str]


class Manifest(BaseModel):
    model_config = ConfigDict(extra="allow")

    format: int = MANIFEST_FORMAT
    hosting: Literal["multi-model", "single-model"] = "multi-model"
    models: dict[str, ManifestEntry] = Field(default_factory=dict)

    def to_json(self) -> bytes:
        document = self.model_dump(mode="json")
        return (json.dumps(document, indent=2) + "\n").encode("utf-8")


def manifest_path(path_or_dir: Path) -> Path:
    return path_or_dir / MANIFEST_NAME if path_or_dir.is_dir() else path_or_dir


def read_manifest(path_or_dir: Path | str) -> Manifest:
    """Parse `manifest.json` (or `DIR/manifest.json`); PackagingError if missing or invalid."""
    path = manifest_path(Path(path_or_dir))
    try:
        manifest = Manifest.model_validate_json(path.read_bytes())
    except FileNotFoundError as exc:
        raise PackagingError(
            "no manifest here", where=str(path), fix="run `deploy package REPO --out DIR`"
        ) from exc
    except (OSError, ValidationError) as exc:
        raise PackagingError(
            f"invalid manifest: {exc}",
            where=str(path),
            fix="re-run `deploy package REPO --out DIR` to rewrite it",
        ) from exc
    if manifest.format != MANIFEST_FORMAT:
        raise PackagingError(
            f"manifest format {manifest.format} is not supported (expected {MANIFEST_FORMAT})",
            where=str(path),
            fix="re-run `deploy package` with this version of deploy",
        )
    return manifest


def write_manifest(directory: Path, manifest: Manifest) -> Path:
    path = directory / MANIFEST_NAME
    atomic_write_bytes(path, manifest.to_json())
    return path
