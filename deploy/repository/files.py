"""Which files of a model folder belong to the model (shared by reading and packaging)."""

from __future__ import annotations

import os
from pathlib import Path

# Editor, notebook and interpreter leftovers: never part of a model.
SKIP_NAMES = frozenset({"__pycache__", ".DS_Store", ".ipynb_checkpoints"})
SKIP_SUFFIXES = (".pyc",)


def skipped(name: str) -> bool:
    return name in SKIP_NAMES or name.endswith(SKIP_SUFFIXES)


def model_entries(folder: Path) -> list[Path]:
    """Files, symlinks and empty folders under `folder`, relative to it, sorted.

    Leftovers are skipped; symlinked folders are listed, not descended into
    (packaging decides whether a link is allowed).
    """
    found: list[Path] = []
    for current, dirnames, filenames in os.walk(folder, followlinks=False):
        here = Path(current)
        kept = sorted(d for d in dirnames if not skipped(d))
        links = [d for d in kept if (here / d).is_symlink()]
        dirnames[:] = [d for d in kept if d not in links]
        found.extend((here / name).relative_to(folder) for name in filenames if not skipped(name))
        found.extend((here / name).relative_to(folder) for name in links)
        if here != folder and not dirnames and not filenames:
            found.append(here.relative_to(folder))
    return sorted(found, key=lambda p: p.as_posix())
