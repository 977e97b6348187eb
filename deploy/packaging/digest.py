"""Content digests without re-reading unchanged files.

A model's `source_digest` is the BLAKE3 hash of its archive's member list:
each member's path, type, mode and content hash (the layout version too, so a
change of layout renames every archive). BLAKE3 hashes at several GB/s, so the
content hashes cost little next to compression; the archive's own `sha256`
(what S3 and the manifest check) is computed separately. Content hashes are cached
by (device, inode, size, mtime_ns) in `DIR/.deploy-cache.json`, like git's
index: a no-op run stats files and reads nothing.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from blake3 import blake3

from deploy.packaging.atomic import atomic_write_bytes
from deploy.packaging.layout import Entry

# Bump when the archive layout, member encoding or content hash changes.
LAYOUT_VERSION = "deploy-archive-2"
CACHE_NAME = ".deploy-cache.json"


@dataclass
class DigestCache:
    """File content hashes and archive hashes, keyed by what stat() says."""

    path: Path
    files: dict[str, list[object]] = field(default_factory=dict)  # source -> [key..., sha]
    archives: dict[str, list[object]] = field(default_factory=dict)  # name -> [size, mtime, sha]

    @classmethod
    def load(cls, directory: Path) -> DigestCache:
        path = directory / CACHE_NAME
        with contextlib.suppress(OSError, ValueError, TypeError):
            if not path.is_file():  # never open a FIFO left in its place
                return cls(path)
            document = json.loads(path.read_text(encoding="utf-8"))
            if document.get("layout") == LAYOUT_VERSION:
                return cls(path, dict(document["files"]), dict(document["archives"]))
        return cls(path)

    def forget_except(self, sources: set[str], archives: set[str]) -> None:
        """Drop entries for files and archives this run no longer uses."""
        self.files = {k: v for k, v in self.files.items() if k in sources}
        self.archives = {k: v for k, v in self.archives.items() if k in archives}

    def save(self) -> None:
        document = {"layout": LAYOUT_VERSION, "files": self.files, "archives": self.archives}
        atomic_write_bytes(self.path, json.dumps(document, sort_keys=True).encode("utf-8"))

    def file_sha(self, entry: Entry) -> str | None:
        cached = self.files.get(str(entry.source))
        if cached is not None and tuple(cached[:4]) == entry.stat_key:
            return str(cached[4])
        return None

    def remember_file(self, entry: Entry, sha: str) -> None:
        if entry.stat_key is not None:
            self.files[str(entry.source)] = [*entry.stat_key, sha]

    def archive_sha(self, path: Path) -> str | None:
        cached = self.archives.get(path.name)
        try:
            info = path.stat()
        except FileNotFoundError:
            return None
        if cached is not None and cached[:2] == [info.st_size, info.st_mtime_ns]:
            return str(cached[2])
        return None

    def remember_archive(self, path: Path, sha: str) -> None:
        info = path.stat()
        self.archives[path.name] = [info.st_size, info.st_mtime_ns, sha]


def member_line(entry: Entry, content_sha: str) -> bytes:
    return f"{entry.arcname}\0{entry.kind}\0{entry.mode:o}\0{content_sha}\n".encode()


def content_hash(data: bytes = b"") -> blake3:
    """The hash of member contents (BLAKE3); feed it with `.update`."""
    return blake3(data)


def source_digest(entries: list[Entry], content: dict[str, str]) -> str:
    """BLAKE3 over the member list; `content` maps file arcnames to their content hashes."""
    digest = blake3(LAYOUT_VERSION.encode() + b"\n")
    for entry in entries:
        digest.update(member_line(entry, content.get(entry.arcname, "")))
    return digest.hexdigest()


def cached_contents(entries: list[Entry], cache: DigestCache) -> dict[str, str] | None:
    """Content sha256 of every file member from the cache, or None if any must be read."""
    content: dict[str, str] = {}
    for entry in entries:
        if entry.kind != "file":
            continue
        if entry.data is not None:
            content[entry.arcname] = content_hash(entry.data).hexdigest()
            continue
        sha = cache.file_sha(entry)
        if sha is None:
            return None
        content[entry.arcname] = sha
    return content
