"""The package folder's `manifest.json` (the contract: `deploy.client.manifest`).

`read_manifest` reads a per-model package (every model carries its own
archive's `sha256`, `bytes` and `source_digest`); `write_manifest` replaces
the file atomically so readers never see half of it.
"""

from __future__ import annotations

from pathlib import Path

from deploy.client import manifest as contract
from deploy.client.manifest import MANIFEST_FORMAT, MANIFEST_NAME, Manifest, ModelInfo, TensorSpec
from deploy.errors import PackagingError
from deploy.packaging.atomic import atomic_write_bytes

# The packaging names of the contract's types.
ManifestEntry = ModelInfo
TensorEntry = TensorSpec

__all__ = [
    "MANIFEST_FORMAT",
    "MANIFEST_NAME",
    "Manifest",
    "ManifestEntry",
    "TensorEntry",
    "manifest_path",
    "read_manifest",
    "write_manifest",
]

_ARCHIVE_FIELDS = ("sha256", "bytes", "source_digest")


def manifest_path(path_or_dir: Path) -> Path:
    return path_or_dir / MANIFEST_NAME if path_or_dir.is_dir() else path_or_dir


def read_manifest(path_or_dir: Path | str) -> Manifest:
    """Parse `manifest.json` (or `DIR/manifest.json`); PackagingError if missing or invalid."""
    path = manifest_path(Path(path_or_dir))
    if not path.is_file():
        raise PackagingError(
            "no manifest here", where=str(path), fix="run `deploy package REPO --out DIR`"
        )
    try:
        manifest = contract.read(path)
    except contract.ManifestFormatError as exc:
        raise PackagingError(
            f"invalid manifest: {exc}",
            where=str(path),
            fix="re-run `deploy package REPO --out DIR` to rewrite it",
        ) from exc
    for name, entry in manifest.models.items():
        missing = [key for key in _ARCHIVE_FIELDS if getattr(entry, key) is None]
        if missing:
            raise PackagingError(
                f"model {name!r} lacks {', '.join(missing)} (a per-model package names each "
                "model's archive)",
                where=f"{path}: models.{name}",
                fix="re-run `deploy package REPO --out DIR` to rewrite it",
            )
    return manifest


def write_manifest(directory: Path, manifest: Manifest) -> Path:
    path = directory / MANIFEST_NAME
    atomic_write_bytes(path, contract.dump(manifest))
    return path
