"""The `deploy` command line.

Commands parse arguments, build the objects they need, call one function and
render its result (a rich table, or JSON with `--json`). Exit codes: 0 ok,
1 a user error (`DeployError`: a one-paragraph message, traceback only with
`--debug`), 2 usage. Heavy modules (boto3, CDK, torch, rich) are imported
inside commands so `deploy --help` stays fast.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import typer

from deploy import __version__
from deploy.cli.help import ReadableGroup
from deploy.errors import DeployError
from deploy.extras import missing_extra

DEBUG_ENV = "DEPLOY_DEBUG"


class _DeployGroup(ReadableGroup):
    """Maps `DeployError`, and a missing extra, to exit code 1 with a readable message."""

    def invoke(self, ctx: Any) -> Any:  # typer's vendored click.Context
        try:
            return super().invoke(ctx)
        except DeployError as exc:
            debug = bool(ctx.obj and ctx.obj.get("debug")) or os.environ.get(DEBUG_ENV) == "1"
            if debug:
                raise
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None
        except ModuleNotFoundError as exc:
            # An optional part (an extra) this command needs is not installed.
            message = missing_extra(exc, ctx.invoked_subcommand)
            if message is None:
                raise
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(1) from None


app = typer.Typer(
    name="deploy",
    cls=_DeployGroup,
    help="Take a Triton model repository to production on Amazon SageMaker.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"deploy {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    ctx.obj = {"debug": debug}


def _register() -> None:
    # Each module adds its own commands; importing them is cheap (no heavy imports).
    from deploy.cli import commands

    commands.register(app)


_register()


def main() -> None:
    """Console-script entry point."""
    sys.exit(app(prog_name="deploy"))
