"""Rendering helpers shared by commands: JSON on stdout, rich text on a TTY."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def emit_json(document: Any) -> None:
    """Write one JSON document to stdout (machine output for `--json`)."""
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def console(*, stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def interactive() -> bool:
    """True when progress bars make sense (a TTY on stderr)."""
    return sys.stderr.isatty()
