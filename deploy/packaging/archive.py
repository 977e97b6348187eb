"""Deterministic, streaming `.tar.gz` writing through ISA-L.

Same members in, same bytes out: members sorted by path, mtime 0, uid/gid 0,
no user/group names, modes normalised to 0755/0644, GNU tar format (long
names without pax headers carrying host data), and a gzip header with mtime
0. The archive is never held in memory.

The tar stream is planned from the members' sizes, then cut into fixed
blocks of `BLOCK_SIZE` bytes, so where a block starts depends on the content
alone. Each block is read, hashed and compressed by one thread while it sits
in that core's cache; blocks go through the steps that must follow the
stream's order (the members' BLAKE3, the archive's sha256) one after the
other, and compression runs on several blocks at once. Each block is an
independent deflate run ending in a sync flush, as pigz and isal's threaded
writer do, so the blocks join into one gzip member any `gzip -d` reads. A
block whose sample barely deflates is written as stored deflate blocks
instead (the choice depends on its bytes only).

An archive is all or nothing: each file is opened without following links
and without blocking, and must still be the regular file the plan saw
(device, inode, size, mtime and ctime); after the last block, every file is
stat'ed again and must be unchanged; a file whose last change was recent
enough that a further change might not move its timestamps (they tick
coarsely) is read and hashed a second time. Any difference, a file that
cannot be read or one that got shorter fails the archive with an error
naming the file.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import stat
import struct
import tarfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from isal import isal_zlib

from deploy.errors import PackagingError
from deploy.packaging.digest import content_hash
from deploy.packaging.layout import Entry, change_key_of
from deploy.repository.files import printable

# ISA-L level 1: fast on incompressible float weights (it emits them nearly
# stored, ratio ~0.9 on random float32) and still shrinks configs and code.
# (ISA-L's level 0 is no faster and codes random bytes 20% larger: it never
# falls back to stored blocks.)
COMPRESS_LEVEL = 1
# One block and its compressed copy stay within a core's L2 cache, so the
# hashes and the compressor read them from there, not from memory.
BLOCK_SIZE = 1024 * 1024
_COMPRESS_BUFFER = BLOCK_SIZE + BLOCK_SIZE // 10 + 500  # deflate may grow random data a little
# ID1 ID2 CM=deflate FLG=0 MTIME=0 XFL=0 OS=255 (unknown)
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_FINAL_BLOCK = isal_zlib.compress(b"", wbits=-15)  # an empty last deflate block
# A block whose sample deflates to more than 7/8 of its size (ZFS's rule for
# keeping a block compressed) is stored: deflating random-looking float
# weights costs most of the packaging CPU and saves ~10%, and stored blocks
# also inflate several times faster when the endpoint extracts the archive.
STORE_ABOVE = 7 / 8
_SAMPLES = 4  # slices of the block, spread evenly, make up the sample
_SAMPLE_SIZE = 4096
_STORED_MAX = 0xFFFF  # the most a stored deflate block holds


@dataclass(frozen=True)
class _Part:
    """A run of the uncompressed tar stream: literal bytes, or a range of a member's file."""

    start: int  # offset in the tar stream
    length: int
    data: bytes | None = None
    member: int = -1  # index into the plan's files
    offset: int = 0  # offset in that file


@dataclass
class _Plan:
    parts: list[_Part]
    starts: list[int]
    size: int
    files: list[Entry]

    def block(self, index: int) -> list[tuple[_Part, int, int]]:
        """(part, offset in the part, length) of every run block `index` holds."""
        begin = index * BLOCK_SIZE
        end = min(begin + BLOCK_SIZE, self.size)
        runs = []
        at = bisect.bisect_right(self.starts, begin) - 1
        while begin < end:
            part = self.parts[at]
            skip = begin - part.start
            length = min(part.length - skip, end - begin)
            if length > 0:
                runs.append((part, skip, length))
            begin += length
            at += 1
        return runs


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
        info.size = entry.size if entry.data is None else len(entry.data)
    return info


def _plan(entries: list[Entry]) -> _Plan:
    """The tar stream `tarfile` writes for `entries`, as parts."""
    parts: list[_Part] = []
    files: list[Entry] = []
    at = 0

    def literal(data: bytes) -> None:
        nonlocal at
        if data:
            parts.append(_Part(at, len(data), data=data))
            at += len(data)

    for entry in entries:
        info = tar_info(entry)
        literal(info.tobuf(tarfile.GNU_FORMAT, "utf-8", "strict"))
        if entry.kind == "dir":
            continue
        if entry.data is not None:
            literal(entry.data)
        elif entry.source is not None:
            if info.size:
                parts.append(_Part(at, info.size, member=len(files)))
                at += info.size
            files.append(entry)
        else:
            raise ValueError(f"archive member {entry.arcname!r} has neither data nor a source")
        literal(tarfile.NUL * (-info.size % tarfile.BLOCKSIZE))
    literal(tarfile.NUL * (2 * tarfile.BLOCKSIZE))  # end of archive
    literal(tarfile.NUL * (-at % tarfile.RECORDSIZE))
    return _Plan(parts, [p.start for p in parts], at, files)


def _read_range(fd: int, view: memoryview, offset: int, entry: Entry) -> None:
    """Fill `view` from `fd` at `offset`; a file that got shorter is an error."""
    while view:
        try:
            count = os.preadv(fd, [view], offset)
        except OSError as exc:
            raise _unreadable(entry, exc) from None
        if count == 0:
            raise changed(entry, "it got shorter while it was read")
        view = view[count:]
        offset += count


def changed(entry: Entry, how: str) -> PackagingError:
    """The error for a file that changed between planning and the end of its archive."""
    return PackagingError(
        f"the file changed while it was archived ({how})",
        where=printable(entry.source or entry.arcname),
        fix="wait until whatever writes it has finished (or package a copy of the "
        "repository), then run `deploy package` again; no archive or manifest was written",
    )


def _unreadable(entry: Entry, exc: OSError) -> PackagingError:
    return PackagingError(
        f"cannot read: {exc.strerror or exc}",
        where=printable(entry.source or entry.arcname),
        fix="make it readable by the user that runs deploy (e.g. chmod u+r), or remove it",
    )


def _check_stat(entry: Entry, info: os.stat_result, when: str) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise changed(entry, f"it is no longer a regular file {when}")
    if entry.change_key is not None and change_key_of(info) != entry.change_key:
        raise changed(entry, f"its size, times or inode differ {when}")


def verify_unchanged(entries: list[Entry], digests: list[str]) -> None:
    """Stat every file again, and hash the recently changed ones a second time.

    `digests` are the content hashes computed while archiving, one per entry.
    """
    for entry in entries:
        assert entry.source is not None  # planned file parts have a source
        try:
            info = entry.source.lstat()
        except OSError as exc:
            raise changed(entry, f"it can no longer be read: {exc.strerror or exc}") from None
        _check_stat(entry, info, "after it was read")
    for entry, digest in zip(entries, digests, strict=True):
        if entry.recent and _rehash(entry) != digest:
            raise changed(entry, "a second read gave different bytes")


def _rehash(entry: Entry) -> str:
    assert entry.source is not None
    digest = content_hash()
    buffer = bytearray(BLOCK_SIZE)
    try:
        fd = os.open(entry.source, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise changed(entry, f"it can no longer be read: {exc.strerror or exc}") from None
    try:
        while count := os.readv(fd, [buffer]):
            digest.update(memoryview(buffer)[:count])
    finally:
        os.close(fd)
    return str(digest.hexdigest())


class _Turns:
    """Lets blocks through a step in stream order; any failure releases every waiter."""

    def __init__(self) -> None:
        self._ready = threading.Condition()
        self._next = {"hash": 0, "out": 0}
        self.failed = False

    def wait(self, step: str, index: int) -> None:
        with self._ready:
            self._ready.wait_for(lambda: self.failed or self._next[step] == index)
            if self.failed:
                raise _AbortedError

    def done(self, step: str, index: int) -> None:
        with self._ready:
            self._next[step] = index + 1
            self._ready.notify_all()

    def fail(self) -> None:
        with self._ready:
            self.failed = True
            self._ready.notify_all()


class _AbortedError(Exception):
    """Another thread failed; this one stops."""


class _Writer:
    def __init__(self, plan: _Plan, out: BinaryIO, on_bytes: Callable[[int], None] | None) -> None:
        self.plan = plan
        self.blocks = -(-plan.size // BLOCK_SIZE)
        self.on_bytes = on_bytes
        self.out_fd = out.fileno()
        self.base = out.tell()
        self.sha = hashlib.sha256(GZIP_HEADER)
        self.size = len(GZIP_HEADER)  # compressed bytes so far
        self.crc = 0
        self.hashes = [content_hash() for _ in plan.files]
        self.turns = _Turns()
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._next_block = 0
        # Each file is opened once; the last block that reads it closes it.
        self._fds: dict[int, int] = {}
        self._readers = [0] * len(plan.files)
        for index in range(self.blocks):
            for part, _, _ in plan.block(index):
                if part.member >= 0:
                    self._readers[part.member] += 1

    def run(self, threads: int) -> None:
        self._write(0, [GZIP_HEADER])
        helpers = [
            threading.Thread(target=self._work, name=f"archive-{n}", daemon=True)
            for n in range(1, max(1, threads))
        ]
        for helper in helpers:
            helper.start()
        try:
            self._work()
        finally:
            for helper in helpers:
                helper.join()
            for fd in self._fds.values():
                os.close(fd)
        if self.error is not None:
            raise self.error
        tail = _FINAL_BLOCK + struct.pack("<II", self.crc, self.plan.size & 0xFFFFFFFF)
        self.sha.update(tail)
        self._write(self.size, [tail])
        self.size += len(tail)
        os.lseek(self.out_fd, self.base + self.size, os.SEEK_SET)

    def _work(self) -> None:
        buffer = bytearray(BLOCK_SIZE)
        compressor = isal_zlib._ParallelCompress(buffersize=_COMPRESS_BUFFER, level=COMPRESS_LEVEL)
        try:
            while True:
                with self._lock:
                    index = self._next_block
                    self._next_block += 1
                if index >= self.blocks or self.turns.failed:
                    return
                self._block(index, memoryview(buffer), compressor)
        except _AbortedError:
            return
        except BaseException as exc:
            with self._lock:
                if self.error is None:
                    self.error = exc
            self.turns.fail()
            if not isinstance(exc, Exception):
                raise

    def _block(self, index: int, buffer: memoryview, compressor: Any) -> None:
        runs = self.plan.block(index)
        length = 0
        for part, skip, count in runs:
            view = buffer[length : length + count]
            if part.data is not None:
                view[:] = part.data[skip : skip + count]
            else:
                member = self.plan.files[part.member]
                _read_range(self._open(part.member), view, part.offset + skip, member)
            length += count
        data = buffer[:length]
        self.turns.wait("hash", index)
        at = 0
        read = 0
        for part, _, count in runs:
            if part.member >= 0:
                self.hashes[part.member].update(data[at : at + count])
                read += count
            at += count
        self.turns.done("hash", index)
        for part, _, _ in runs:
            if part.member >= 0:
                self._release(part.member)
        pieces: list[bytes | memoryview]
        if _incompressible(data):
            pieces, crc = _stored(data), isal_zlib.crc32(data)
        else:
            compressed, crc = compressor.compress_and_crc(data, b"")
            pieces = [compressed]
        self.turns.wait("out", index)
        for piece in pieces:
            self.sha.update(piece)
        self.crc = isal_zlib.crc32_combine(self.crc, crc, length)
        offset = self.size
        self.size += sum(len(piece) for piece in pieces)
        self.turns.done("out", index)
        self._write(offset, pieces)
        if self.on_bytes is not None and read:
            self.on_bytes(read)

    def _open(self, member: int) -> int:
        with self._lock:
            fd = self._fds.get(member)
            if fd is None:
                entry = self.plan.files[member]
                assert isinstance(entry.source, Path)  # a planned file part has a source
                # O_NONBLOCK: a FIFO swapped in since planning cannot block the open.
                flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
                try:
                    fd = os.open(entry.source, flags)
                except OSError as exc:
                    raise _unreadable(entry, exc) from None
                try:
                    _check_stat(entry, os.fstat(fd), "when it was opened")
                except BaseException:
                    os.close(fd)
                    raise
                self._fds[member] = fd
            return fd

    def _release(self, member: int) -> None:
        with self._lock:
            self._readers[member] -= 1
            if self._readers[member] == 0:
                fd = self._fds.pop(member, None)
                if fd is not None:
                    os.close(fd)

    def _write(self, offset: int, pieces: list[bytes | memoryview]) -> None:
        offset += self.base
        views = [memoryview(piece) for piece in pieces]
        while views:
            count = os.pwritev(self.out_fd, views, offset)
            offset += count
            while views and count >= len(views[0]):
                count -= len(views[0])
                views.pop(0)
            if views:
                views[0] = views[0][count:]


def _incompressible(data: memoryview) -> bool:
    """Whether a sample of `data` (slices spread over it) deflates to more than STORE_ABOVE."""
    if len(data) < _SAMPLES * _SAMPLE_SIZE:
        return False
    step = len(data) // _SAMPLES
    sample = b"".join(data[n * step : n * step + _SAMPLE_SIZE] for n in range(_SAMPLES))
    deflated = isal_zlib.compress(sample, level=COMPRESS_LEVEL, wbits=-15)
    return len(deflated) > STORE_ABOVE * len(sample)


def _stored(data: memoryview) -> list[bytes | memoryview]:
    """`data` as stored deflate blocks (byte-aligned, as every block here ends)."""
    pieces: list[bytes | memoryview] = []
    for start in range(0, len(data), _STORED_MAX):
        chunk = data[start : start + _STORED_MAX]
        pieces.append(struct.pack("<BHH", 0, len(chunk), len(chunk) ^ 0xFFFF))
        pieces.append(chunk)
    return pieces


def write_archive(
    entries: list[Entry],
    out: BinaryIO,
    *,
    threads: int = 1,
    on_bytes: Callable[[int], None] | None = None,
) -> tuple[str, int, dict[str, str]]:
    """Write `entries` as tar.gz to `out` (a file); returns (archive sha256, bytes, member hashes).

    `threads` threads (the caller's among them) read and compress blocks.
    """
    plan = _plan(entries)
    writer = _Writer(plan, out, on_bytes)
    writer.run(threads)
    digests = [digest.hexdigest() for digest in writer.hashes]
    verify_unchanged(plan.files, digests)
    contents = {e.arcname: content_hash(e.data).hexdigest() for e in entries if e.data is not None}
    for entry, digest in zip(plan.files, digests, strict=True):
        contents[entry.arcname] = digest
    return writer.sha.hexdigest(), writer.size, contents
