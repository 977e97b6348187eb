"""The `deploy` console script: the CLI, or what to install when its extra is missing.

`deploy.cli` imports typer at once; an SDK-only install (no `cli` extra) gets
the pip command to run instead of a traceback.
"""

from __future__ import annotations

import sys

from deploy.extras import missing_extra

# pyproject's requires-python; pip refuses older interpreters, a copied tree may not.
MIN_PYTHON = (3, 11)


def main() -> None:
    if sys.version_info < MIN_PYTHON:
        found = ".".join(str(part) for part in sys.version_info[:3])
        print(
            f"error: Python {found} is too old: deploy needs Python "
            f"{'.'.join(map(str, MIN_PYTHON))} or later\n"
            "  fix: create the venv with a newer Python (e.g. `python3.12 -m venv .venv`) and "
            "install deploy into it",
            file=sys.stderr,
        )
        sys.exit(1)
    try:
        from deploy.cli import main as cli_main
    except ModuleNotFoundError as exc:
        message = missing_extra(exc)
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr)
        sys.exit(1)
    cli_main()
