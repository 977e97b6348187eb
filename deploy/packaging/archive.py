"""Deterministic, streaming `.tar.gz` writing through ISA-L.

Same members in, same bytes out: members sorted by path, mtime 0, uid/gid 0,
no user/group names, modes normalised to 0755/0644, GNU tar format (long
names without pax headers carrying host data), and a gzip header with mtime
0 (isal's threaded writer always writes 0). Data is streamed in large blocks;
the archive is never held in memory. The members' content hashes (BLAKE3) and
the archive's sha256 are computed on the way through.
"""

from __future__ import annotations

import hashlib
import io
import queue
import tarfile
import threading
from collections.abc import Callable
from typing import BinaryIO

from isal import igzip_threaded

from deploy.packaging.digest import content_hash
from deploy.packaging.layout import Entry

# ISA-L level 1: fast on incompressible float weights (it emits them nearly
# stored, ratio ~1.0) and still shrinks configs and code.
COMPRESS_LEVEL = 1
BLOCK_SIZE = 1024 * 1024  # per compression task; isal's default
COPY_BUFFER = 4 * 1024 * 1024


class _HashingWriter(io.RawIOBase):
    """Writes the compressed bytes to the file and hashes them (sha256) on a thread of its own.

    Hashing beside the write keeps it off the compression writer's critical
    path; isal hands over immutable `bytes` blocks, so no copy is needed.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.sha = hashlib.sha256()
        self.size = 0
        self._blocks: queue.Queue[bytes | None] = queue.Queue(maxsize=16)
        self._hasher = threading.Thread(target=self._hash, name="archive-sha256", daemon=True)
        self._hasher.start()

    def _hash(self) -> None:
        while (block := self._blocks.get()) is not None:
            self.sha.update(block)

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        block = data if isinstance(data, bytes) else bytes(data)
        self._blocks.put(block)
        self.size += len(block)
        view = memoryview(block)
        written = 0
        while written < len(block):
            written += self.raw.write(view[written:]) or 0
        return len(block)

    def hexdigest(self) -> str:
        """The archive's sha256, once every block is written."""
        if self._hasher.is_alive():
            self._blocks.put(None)
            self._hasher.join()
        return self.sha.hexdigest()


class _HashingReader(io.RawIOBase):
    """Hashes a member's bytes (BLAKE3) while tarfile copies them; reports progress."""

    def __init__(self, raw: BinaryIO, on_bytes: Callable[[int], None] | None) -> None:
        self.raw = raw
        self.hash = content_hash()
        self.on_bytes = on_bytes

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.hash.update(data)
        if self.on_bytes is not None:
            self.on_bytes(len(data))
        return data


class _Position:
    """Gives tarfile the tell() it asks for on a write-only stream."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.offset = 0

    def tell(self) -> int:
        return self.offset

    def write(self, data: bytes) -> int:
        self.raw.write(data)
        self.offset += len(data)
        return len(data)


def tar_info(entry: Entry) -> tarfile.TarInfo:
    info = tarfile.TarInfo(entry.arcname)
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = entry.mode
    if entry.kind == "dir":
        info.type = tarfile.DIRTYPE
    else:
        info.type = tarfile.REGTYPE
        info.size = entry.size
    return info


def write_archive(
    entries: list[Entry],
    out: BinaryIO,
    *,
    threads: int = 1,
    on_bytes: Callable[[int], None] | None = None,
) -> tuple[str, int, dict[str, str]]:
    """Write `entries` as tar.gz to `out`; returns (archive sha256, bytes, member hashes)."""
    sink = _HashingWriter(out)
    try:
        contents: dict[str, str] = {}
        with igzip_threaded.open(  # type: ignore[no-untyped-call]
            sink, "wb", compresslevel=COMPRESS_LEVEL, threads=threads, block_size=BLOCK_SIZE
        ) as gz:
            tar = tarfile.TarFile(
                fileobj=_Position(gz),  # type: ignore[arg-type]
                mode="w",
                format=tarfile.GNU_FORMAT,
                encoding="utf-8",
                errors="strict",
                copybufsize=COPY_BUFFER,
            )
            with tar:
                for entry in entries:
                    info = tar_info(entry)
                    if entry.kind == "dir":
                        tar.addfile(info)
                    elif entry.data is not None:
                        contents[entry.arcname] = content_hash(entry.data).hexdigest()
                        tar.addfile(info, io.BytesIO(entry.data))
                    else:
                        assert entry.source is not None  # a file member has data or a source
                        with entry.source.open("rb", buffering=0) as raw:
                            reader = _HashingReader(raw, on_bytes)
                            tar.addfile(info, reader)
                            contents[entry.arcname] = reader.hash.hexdigest()
    finally:
        digest = sink.hexdigest()  # also stops the hashing thread on failure
    return digest, sink.size, contents
