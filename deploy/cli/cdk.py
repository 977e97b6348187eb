"""`deploy cdk ARGS...`: the pinned AWS CDK CLI, run on the packaged CDK app.

In a folder with a cdk.json the CLI reads it as usual (`deploy init` writes one that
runs `python -m deploy_infra.app`); this interpreter's folder comes first on PATH,
so that `python` is the one deploy is installed in even when no venv is activated.
Without a cdk.json the packaged app is passed with `--app`.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command(
        "cdk",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )(cdk)


def cdk(ctx: typer.Context) -> None:
    """Run the pinned AWS CDK CLI (installed on first use) on the packaged CDK app,
    e.g. `deploy cdk synth -c stage=prod`; the CLI's own help: `deploy cdk -- --help`."""
    from deploy.lifecycle.cdk_toolkit import cannot_run, cdk_cli
    from deploy.lifecycle.templates import app_command

    here = Path.cwd()
    cli = cdk_cli(here)
    args = list(ctx.args)
    if not (here / "cdk.json").is_file() and "--app" not in args and "-a" not in args:
        args = ["--app", shlex.join(app_command()), *args]
    environment = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    environment["PATH"] = os.pathsep.join([bin_dir, environment.get("PATH", "")])
    # Node 20 synthesizes correctly; jsii's end-of-life banner would print on every run.
    environment.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
    environment.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    try:
        code = subprocess.call([str(cli), *args], env=environment)
    except OSError as exc:
        raise cannot_run(cli, exc) from exc
    raise typer.Exit(code)
