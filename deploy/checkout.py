"""Whether `deploy` runs inside its own source checkout, where the Makefile's targets exist.

An installed `deploy` is used in the user's own project, which has no
Makefile: a fix that says "run `make models`" holds only here. Messages add
such a hint through `make_hint`, which is empty anywhere else.
"""

from __future__ import annotations

from pathlib import Path

# This file is deploy/checkout.py: the folder above `deploy/` is the checkout, if any.
_ROOT = Path(__file__).resolve().parent.parent


def in_source_checkout(cwd: Path | None = None) -> bool:
    """True when `cwd` (default: here) is inside the checkout this `deploy` runs from."""
    if not ((_ROOT / "Makefile").is_file() and (_ROOT / "model_packages").is_dir()):
        return False  # an installed package: site-packages has neither
    here = (cwd or Path.cwd()).resolve()
    return here == _ROOT or _ROOT in here.parents


def make_hint(text: str, cwd: Path | None = None) -> str:
    """`text` (a hint that names a make target) inside the checkout, else ""."""
    return text if in_source_checkout(cwd) else ""
