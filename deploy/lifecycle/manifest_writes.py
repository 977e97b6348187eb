"""Conditional manifest publishes: two pipelines cannot overwrite each other silently.

Every publish of a stage's manifest (`deploy up`, `deploy promote`, `deploy
rollback`, the canary-rollback function) is based on the manifest it read. On
S3 the write names that read: `If-Match: <ETag read>` when it replaces the
manifest, `If-None-Match: *` when none was published. S3 refuses a write whose
basis is stale (412 PreconditionFailed, or 409 ConditionalRequestConflict when
two such writes race), so the loser changes nothing and gets
`ManifestConflictError`. A local endpoint's manifest is a file: the same check
compares the file's digest with the one read, under a lock.

`ManifestBasis` is what a publish is based on: the first read since the last
publish (a `deploy up` plans against that one), or, with none, a read made then.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from deploy._files import atomic_write_bytes
from deploy.cache_lock import locked
from deploy.errors import AwsError, DeployError

CONFLICT = "the manifest changed since it was read (another deploy published it): re-run"
CONFLICT_FIX = (
    "re-run the command: it reads the manifest published now and plans against it; "
    "this run published nothing"
)


class ManifestConflictError(AwsError):
    """A conditional manifest write lost to another publish."""


@dataclass(frozen=True)
class ManifestBasis:
    """The version of the manifest a publish replaces: its S3 ETag, or a local file's
    SHA-256; None when no manifest was published (the publish must create it)."""

    version: str | None


def conflict(where: str) -> ManifestConflictError:
    return ManifestConflictError(CONFLICT, where=where, fix=CONFLICT_FIX)


def file_version(path: Path) -> str | None:
    """A local manifest's version: the SHA-256 of its bytes (None: absent)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def publish_file(path: Path, document: bytes, basis: ManifestBasis, lock: Path) -> ManifestBasis:
    """Write a local manifest if it is still the version `basis` read (holding `lock`,
    a file outside the served store); the version written is the next basis."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(lock, DeployError):
        if file_version(path) != basis.version:
            raise conflict(str(path))
        atomic_write_bytes(path, document)
    return ManifestBasis(hashlib.sha256(document).hexdigest())
