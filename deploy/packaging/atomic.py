"""Files that appear complete or not at all: `deploy._files`, under its packaging name."""

from __future__ import annotations

from deploy._files import (
    PARTIAL_MARK,
    AtomicFile,
    atomic_file,
    atomic_write_bytes,
    remove_stale_partials,
)

__all__ = [
    "PARTIAL_MARK",
    "AtomicFile",
    "atomic_file",
    "atomic_write_bytes",
    "remove_stale_partials",
]
