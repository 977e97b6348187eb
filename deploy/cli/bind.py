"""`deploy bind SCRIPT --out REPO`: a PyTriton script's models as a Triton model repository."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deploy.cli.flags import NoRepoCodeOption, repository_code
from deploy.cli.output import console, emit_json


def register(app: typer.Typer) -> None:
    # Whatever follows `--` is the script's own command line (ctx.args).
    app.command("bind", context_settings={"allow_extra_args": True})(bind)


def bind(
    ctx: typer.Context,
    script: Annotated[Path, typer.Argument(help="PyTriton script (calls Triton.bind()).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Model repository to write into.")],
    force: Annotated[
        bool, typer.Option("--force", help="Replace model folders that already exist.")
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds the script may run while recording.")
    ] = 300.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
    no_repo_code: NoRepoCodeOption = False,
) -> None:
    """Run a PyTriton script without a server and write one python model per bind().

    Arguments after -- go to the script, when bound and when served.
    """
    repository_code(no_repo_code)
    from deploy.pytriton import bind_script

    result = bind_script(script, out, argv=list(ctx.args), force=force, timeout=timeout)
    if as_json:
        emit_json(result.as_dict())
        return
    from rich.table import Table

    table = Table("model", "bound at", "max_batch_size", "instances", "inputs", "outputs")
    for model in result.models:
        table.add_row(
            model.name,
            model.location,
            str(model.max_batch_size),
            str(model.instances),
            ", ".join(t.name for t in model.inputs),
            ", ".join(t.name for t in model.outputs),
        )
    out_console = console()
    out_console.print(table)
    for warning in result.warnings:
        out_console.print(f"warning {warning.file}: {warning.message}", markup=False)
        out_console.print(f"  fix: {warning.fix}", markup=False)
    out_console.print(f"repository: {result.repository}", markup=False)
