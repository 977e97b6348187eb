"""The fresh copy of a model (or script) folder that boxed code runs from.

Boxed code may write only to its copy, so whatever it changes there is thrown
away with the scratch folder. Large files (weights) are not copied: the copy
holds a link to each, and the box lets the code read that one file, never
write it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

LINK_ABOVE_BYTES = 16 << 20
_SKIPPED = frozenset({".git", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache"})


def fresh_copy(
    source: Path, target: Path, *, skip: Callable[[str, list[str]], set[str]] | None = None
) -> list[Path]:
    """Copy `source` to `target`; the large files linked instead, which it returns.

    Links inside `source` are followed for files (as Triton reads them) and
    kept as they are for folders.
    """
    linked: list[Path] = []

    def copy(src: str, dst: str) -> str:
        path = Path(src)
        if path.stat().st_size > LINK_ABOVE_BYTES:
            real = path.resolve()
            Path(dst).symlink_to(real)
            linked.append(real)
            return dst
        return str(shutil.copy2(src, dst))

    def ignore(directory: str, names: list[str]) -> set[str]:
        chosen = {name for name in names if name in _SKIPPED}
        return chosen | (skip(directory, names) if skip else set())

    shutil.copytree(source, target, symlinks=False, ignore=ignore, copy_function=copy)
    return linked
