"""Deterministic, incremental per-model archives and the store's manifest.

from deploy.packaging import package_repository, read_manifest
result = package_repository(Path("model_packages/examples"), Path("build/models"))
manifest = read_manifest(Path("build/models"))
manifest.models["addsub"].target_model  # 'addsub-<16 hex>.tar.gz'
"""

from __future__ import annotations

from deploy.packaging.manifest import (
    MANIFEST_NAME,
    Manifest,
    ManifestEntry,
    TensorEntry,
    read_manifest,
)
from deploy.packaging.packager import PackagedModel, PackageResult, package_repository

__all__ = [
    "MANIFEST_NAME",
    "Manifest",
    "ManifestEntry",
    "PackageResult",
    "PackagedModel",
    "TensorEntry",
    "package_repository",
    "read_manifest",
]
