"""Files that appear complete or not at all.

Where the filesystem supports it, a new file is an unnamed O_TMPFILE inode
linked into place only once complete, so even SIGKILL leaves nothing behind.
Elsewhere (overlayfs, for one) it is a hidden `.partial-<pid>` file renamed
into place; `remove_stale_partials` clears those a killed run left.

The one place the project writes files atomically (`deploy.packaging.atomic`
re-exports it under its older name). Files are created 0666 and folders 0777
less the umask, as `open` and `mkdir` do: a temporary name (mkstemp's 0600,
mkdtemp's 0700) must not decide the final mode; `with_umask` gives it.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

PARTIAL_MARK = ".partial-"


class AtomicFile:
    """A file being written that appears under `target` only when committed.

    `commit()` (fsync, then link or rename into place) may run on another
    thread while the next file is written; `discard()` removes every trace.
    """

    def __init__(self, target: Path) -> None:
        self.target = target  # may be changed before commit()
        directory = target.parent
        directory.mkdir(parents=True, exist_ok=True)
        self._partial = directory / f".{target.name}{PARTIAL_MARK}{os.getpid()}"
        fd: int | None = None
        self._named = True
        if _tmpfile_links(directory):
            with contextlib.suppress(OSError):
                fd = os.open(directory, os.O_TMPFILE | os.O_WRONLY, 0o666)
                self._named = False
        if fd is None:
            fd = os.open(self._partial, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o666)
        self.handle: BinaryIO = os.fdopen(fd, "wb", buffering=0)

    def commit(self) -> Path:
        try:
            self.handle.flush()
            os.fsync(self.handle.fileno())
            if not self._named:
                # link(2) cannot replace an existing file: link under the
                # partial name, then rename over the target.
                self._partial.unlink(missing_ok=True)
                os.link(f"/proc/self/fd/{self.handle.fileno()}", self._partial)
            self._partial.replace(self.target)
        except BaseException:
            self.discard()
            raise
        self.handle.close()
        return self.target

    def discard(self) -> None:
        self.handle.close()
        self._partial.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_file(target: Path) -> Iterator[AtomicFile]:
    """Yield an `AtomicFile`; on clean exit it becomes `.target` (fsynced), else vanishes."""
    file = AtomicFile(target)
    try:
        yield file
    except BaseException:
        file.discard()
        raise
    file.commit()


@functools.lru_cache(maxsize=64)
def _tmpfile_links(directory: Path) -> bool:
    """Whether this filesystem supports O_TMPFILE and linking it in."""
    if not hasattr(os, "O_TMPFILE"):
        return False
    probe = directory / f".probe{PARTIAL_MARK}{os.getpid()}"
    try:
        fd = os.open(directory, os.O_TMPFILE | os.O_WRONLY, 0o644)
    except OSError:
        return False
    try:
        os.link(f"/proc/self/fd/{fd}", probe, follow_symlinks=True)
    except OSError:
        return False
    finally:
        os.close(fd)
    probe.unlink(missing_ok=True)
    return True


def umask() -> int:
    """This process's umask, read without changing it where /proc tells it (setting it to
    read it would race other threads' file creation)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    current = os.umask(0o022)
    os.umask(current)
    return current


def with_umask(path: Path, mode: int | None = None) -> Path:
    """Give `path` the mode `open` or `mkdir` would have (0666 or 0777 less the umask), or
    `mode` less the umask; for files made by mkstemp (0600) or folders by mkdtemp (0700)."""
    if mode is None:
        mode = 0o777 if path.is_dir() else 0o666
    path.chmod(mode & ~umask())
    return path


def atomic_write_bytes(target: Path, data: bytes) -> None:
    with atomic_file(target) as file:
        file.handle.write(data)


def remove_stale_partials(directory: Path) -> None:
    """Delete `.partial-<pid>` files left by runs that were killed."""
    if not directory.is_dir():
        return
    for path in directory.glob(f".*{PARTIAL_MARK}*"):
        pid = path.name.rsplit(PARTIAL_MARK, 1)[1]
        if pid.isdigit() and pid_exists(int(pid)):
            continue  # another run is writing it right now
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def pid_exists(pid: int) -> bool:
    """Whether a process `pid` exists (one of another user's counts; a zombie too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
