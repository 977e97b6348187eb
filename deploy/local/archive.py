"""Safe extraction of a model archive, verifying its sha256 on the way.

An archive is extracted into a temporary sibling folder and renamed into
place only when every member passed the checks and the digest matched, so a
refused archive leaves nothing behind. The checks are tarfile's `data`
filter (no absolute paths, no `..`, no links leaving the folder, no devices)
plus a limit on the extracted size. The digest is computed over the
compressed bytes while they are read, so verification costs no second pass.
"""

from __future__ import annotations

import hashlib
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import IO, Any

from isal import igzip

from deploy.errors import LocalEndpointError

DEFAULT_MAX_EXTRACTED_BYTES = 20 * 1024**3


class _HashingReader:
    """A read-only file object that feeds every byte read into a digest."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self.digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self.digest.update(data)
        return data

    def readinto(self, buffer: Any) -> int:
        count = self._raw.readinto(buffer)  # type: ignore[attr-defined]
        self.digest.update(memoryview(buffer)[:count])
        return int(count)

    def drain(self) -> None:
        while self.read(1 << 20):
            pass


def extract_archive(
    archive: Path,
    destination: Path,
    *,
    expected_sha256: str | None = None,
    max_bytes: int = DEFAULT_MAX_EXTRACTED_BYTES,
    name: str | None = None,
) -> int:
    """Extract a `.tar.gz` archive to `destination` (which must not exist).

    Returns the number of bytes extracted. Raises `LocalEndpointError` naming
    the archive and the offending member when a check fails.
    """
    where = name or archive.name
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
    total = 0

    def checked(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        nonlocal total
        try:
            if member.name.startswith(("/", "\\")):
                # data_filter would strip the slash; an absolute name is refused outright.
                raise tarfile.AbsolutePathError(member)
            accepted = tarfile.data_filter(member, path)
        except tarfile.FilterError as exc:
            raise LocalEndpointError(
                f"archive member {member.name!r} is refused: {exc}",
                where=where,
                fix="rebuild the archive with `deploy package`; archives may only hold "
                "regular files, folders and links that stay inside the model folder",
            ) from exc
        total += accepted.size
        if total > max_bytes:
            raise LocalEndpointError(
                f"archive extracts to more than {max_bytes} bytes",
                where=where,
                fix="raise the extraction limit (--max-archive-bytes) or shrink the model",
            )
        return accepted

    try:
        with archive.open("rb") as raw:
            reader = _HashingReader(raw)
            try:
                with (
                    igzip.open(reader, "rb") as unzipped,  # type: ignore[no-untyped-call]
                    tarfile.open(fileobj=unzipped, mode="r|") as tar,
                ):
                    tar.extractall(staging, filter=checked)
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise LocalEndpointError(
                    f"archive cannot be read: {exc}",
                    where=where,
                    fix="re-create it with `deploy package`",
                ) from exc
            reader.drain()
        if expected_sha256 is not None and reader.digest.hexdigest() != expected_sha256:
            raise LocalEndpointError(
                f"sha256 {reader.digest.hexdigest()} does not match the manifest's "
                f"{expected_sha256}",
                where=where,
                fix="the store is inconsistent: re-run `deploy package` (and re-upload)",
            )
        staging.replace(destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return total
