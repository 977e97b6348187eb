"""Safe extraction of a model archive, after verifying its sha256.

The order is what makes it safe:

1. The archive's sha256 is checked before a single member is written: the
   open file is hashed, compared with the manifest, and only then rewound and
   extracted (the same open file, so a store file replaced meanwhile changes
   nothing). A tampered archive writes nothing at all.
2. Members are written by this module, not by `tarfile.extractall`: only
   folders and regular files are accepted, because `deploy package` writes
   nothing else. Symbolic links, hard links, devices and FIFOs are refused
   outright. With no link ever created, no path can lead outside the
   extraction folder, whatever the names (tarfile's own `data` filter
   resolves links with `os.path.realpath`, which a chain of links longer
   than PATH_MAX defeats: CVE-2025-4517). Names must be relative, without
   `..`, and files are opened with O_NOFOLLOW|O_EXCL.
3. The size limit counts bytes as they are written and stops at the limit
   (a member's declared size is checked first, so most oversized archives
   stop before writing it); the number of members is bounded too.
4. A full disk is reported as a full disk.

Extraction goes to a temporary sibling folder renamed into place only when
everything passed, so a refused archive leaves nothing behind.
"""

from __future__ import annotations

import errno
import hashlib
import os
import posixpath
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import IO

from isal import igzip

from deploy.errors import LocalEndpointError

DEFAULT_MAX_EXTRACTED_BYTES = 20 * 1024**3
MAX_MEMBERS = 100_000
_CHUNK = 1 << 20
_REBUILD = "rebuild the archive with `deploy package` (it writes only folders and regular files)"


class ArchiveRefusedError(LocalEndpointError):
    """The archive is not one `deploy package` could have written, or fails a limit."""


class DiskFullError(LocalEndpointError):
    """The disk filled up while extracting."""


def sha256_of(stream: IO[bytes]) -> str:
    digest = hashlib.sha256()
    while chunk := stream.read(_CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


def _member_path(member: tarfile.TarInfo, where: str) -> str:
    """The member's relative path, normalised; refused when it could leave the folder."""
    name = member.name
    parts = name.split("/")
    if not name or name.startswith("/") or "\0" in name or ".." in parts:
        raise ArchiveRefusedError(
            f"archive member {name!r} is refused: its path is absolute, empty or "
            "outside the model folder ('..')",
            where=where,
            fix=_REBUILD,
        )
    return posixpath.normpath(name)


def _refuse_type(member: tarfile.TarInfo, where: str) -> ArchiveRefusedError:
    if member.issym() or member.islnk():
        kind = "symbolic link" if member.issym() else "hard link"
        what = f"a {kind} (to {member.linkname!r}); links are not allowed in model archives"
    else:
        what = "a special file (device, FIFO or unknown type)"
    return ArchiveRefusedError(
        f"archive member {member.name!r} is refused: it is {what}",
        where=where,
        fix=_REBUILD,
    )


def _oserror(exc: OSError, member: str, where: str, destination: Path) -> LocalEndpointError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiskFullError(
            f"disk full while extracting {member!r}: {exc.strerror}",
            where=where,
            fix=f"free space on the file system of {destination.parent} (or give the "
            "endpoint a work folder on a larger disk), then retry",
        )
    return LocalEndpointError(
        f"cannot write archive member {member!r}: {exc}",
        where=where,
        fix="check the endpoint's work folder (permissions, free space)",
    )


class _Extractor:
    def __init__(self, root: Path, max_bytes: int, max_members: int, where: str) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.max_members = max_members
        self.where = where
        self.total = 0

    def _too_big(self) -> ArchiveRefusedError:
        return ArchiveRefusedError(
            f"archive extracts to more than {self.max_bytes} bytes",
            where=self.where,
            fix="raise the limit (`deploy serve --max-archive-mb`) or shrink the model",
        )

    def run(self, tar: tarfile.TarFile) -> None:
        count = 0
        for member in tar:
            count += 1
            if count > self.max_members:
                raise ArchiveRefusedError(
                    f"archive has more than {self.max_members} members",
                    where=self.where,
                    fix="package fewer files per model",
                )
            relative = _member_path(member, self.where)
            if relative == "." and member.isdir():
                continue  # "./", as `tar -C DIR .` writes first
            path = self.root / relative
            try:
                if member.isdir():
                    path.mkdir(mode=0o755, parents=True, exist_ok=True)
                elif member.isreg():
                    if self.total + member.size > self.max_bytes:
                        raise self._too_big()
                    source = tar.extractfile(member)
                    assert source is not None  # a regular file always has data
                    self._write(source, path, member.mode)
                else:
                    raise _refuse_type(member, self.where)
            except OSError as exc:
                raise _oserror(exc, member.name, self.where, self.root) from exc

    def _write(self, source: IO[bytes], path: Path, mode: int) -> None:
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        # Only folders and files made here exist under the root, so nothing can be
        # followed; O_NOFOLLOW|O_EXCL still refuse anything that is there already.
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        # Permission bits only (no setuid/setgid/sticky), always readable by the owner.
        fd = os.open(path, flags, (mode & 0o755) | 0o600)
        with os.fdopen(fd, "wb") as out:
            while chunk := source.read(_CHUNK):
                self.total += len(chunk)
                if self.total > self.max_bytes:
                    raise self._too_big()
                out.write(chunk)


def extract_archive(
    archive: Path,
    destination: Path,
    *,
    expected_sha256: str | None = None,
    max_bytes: int = DEFAULT_MAX_EXTRACTED_BYTES,
    max_members: int = MAX_MEMBERS,
    name: str | None = None,
) -> int:
    """Extract a `.tar.gz` archive to `destination` (which must not exist).

    Returns the number of bytes extracted. Raises `LocalEndpointError` naming
    the archive and the offending member when a check fails, having written
    nothing (a digest mismatch is found before extraction starts).
    """
    where = name or archive.name
    try:
        raw = archive.open("rb")
    except OSError as exc:
        raise LocalEndpointError(
            f"cannot open the archive: {exc}", where=where, fix="check the model store"
        ) from exc
    with raw:
        if expected_sha256 is not None:
            actual = sha256_of(raw)
            if actual != expected_sha256:
                raise LocalEndpointError(
                    f"sha256 {actual} does not match the manifest's {expected_sha256}; "
                    "nothing was extracted",
                    where=where,
                    fix="the store is inconsistent: re-run `deploy package` (and re-upload)",
                )
            raw.seek(0)
        destination.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
        extractor = _Extractor(staging, max_bytes, max_members, where)
        try:
            try:
                with (
                    igzip.open(raw, "rb") as unzipped,  # type: ignore[no-untyped-call]
                    tarfile.open(fileobj=unzipped, mode="r|") as tar,
                ):
                    extractor.run(tar)
            except (tarfile.TarError, EOFError, OSError) as exc:
                raise LocalEndpointError(
                    f"archive cannot be read: {exc}",
                    where=where,
                    fix="re-create it with `deploy package`",
                ) from exc
            staging.replace(destination)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return extractor.total
