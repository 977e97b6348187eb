"""Which files of a model folder belong to the model (shared by reading and packaging).

The walk reads folder listings and `lstat`s only; it never opens a file, so a
FIFO or device in a model folder is refused before anything could block on
it. Folders it cannot list, names that are not UTF-8 (a tar member name and
an S3 key must be) and special files are errors that name the path.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from deploy.errors import RepositoryError

# Editor, notebook and interpreter leftovers: never part of a model.
SKIP_NAMES = frozenset({"__pycache__", ".DS_Store", ".ipynb_checkpoints"})
SKIP_SUFFIXES = (".pyc",)


def skipped(name: str) -> bool:
    return name in SKIP_NAMES or name.endswith(SKIP_SUFFIXES)


def printable(path: Path | str) -> str:
    """`path` for messages: bytes that are not UTF-8 shown as \\xNN escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def check_name(path: Path) -> None:
    """Raise RepositoryError if the last part of `path` is not valid UTF-8."""
    try:
        path.name.encode("utf-8")
    except UnicodeEncodeError:
        raise RepositoryError(
            "the file name is not valid UTF-8",
            where=printable(path),
            fix="rename it with UTF-8 characters (archive member names and S3 keys are UTF-8)",
        ) from None


def unreadable(path: Path, exc: OSError) -> RepositoryError:
    """The error for a path the walk (or a reader) cannot access."""
    reason = exc.strerror or str(exc)
    return RepositoryError(
        f"cannot read: {reason}",
        where=printable(exc.filename if isinstance(exc.filename, str) else path),
        fix="make it readable by the user that runs deploy (e.g. chmod u+rX), or remove it",
    )


def special_file(path: Path) -> RepositoryError:
    return RepositoryError(
        "not a regular file (a FIFO, socket or device)",
        where=printable(path),
        fix="remove it from the model folder; a model folder holds files, folders and links",
    )


def model_entries(folder: Path) -> list[Path]:
    """Files, symlinks and empty folders under `folder`, relative to it, sorted.

    Leftovers are skipped; symlinked folders are listed, not descended into
    (packaging decides whether a link is allowed). Raises RepositoryError for
    a folder it cannot list, an entry it cannot stat, a name that is not
    UTF-8, or a FIFO, socket or device.
    """
    found: list[Path] = []
    pending = [folder]
    while pending:
        here = pending.pop()
        try:
            with os.scandir(here) as listing:
                children = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            raise unreadable(here, exc) from None
        kept = 0
        for child in children:
            if skipped(child.name):
                continue
            kept += 1
            path = Path(child.path)
            check_name(path)
            try:
                mode = child.stat(follow_symlinks=False).st_mode
            except OSError as exc:
                raise unreadable(path, exc) from None
            if stat.S_ISDIR(mode):
                pending.append(path)
            elif stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                found.append(path.relative_to(folder))
            else:
                raise special_file(path)
        if here != folder and not kept:
            found.append(here.relative_to(folder))
    return sorted(found, key=lambda p: p.as_posix())
