"""The `deploy` console script: the CLI, or what to install when its extra is missing.

`deploy.cli` imports typer at once; an SDK-only install (no `cli` extra) gets
the pip command to run instead of a traceback.
"""

from __future__ import annotations

import sys

from deploy.extras import missing_extra


def main() -> None:
    try:
        from deploy.cli import main as cli_main
    except ModuleNotFoundError as exc:
        message = missing_extra(exc)
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr)
        sys.exit(1)
    cli_main()
