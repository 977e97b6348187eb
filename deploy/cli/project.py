"""`deploy init [DIR]`: set a project up to use deploy (deploy.scaffold)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deploy.cli.output import console, emit_json


def register(app: typer.Typer) -> None:
    app.command("init")(init)


def init(
    directory: Annotated[
        Path, typer.Argument(help="The project folder (created if missing).")
    ] = Path(),
    endpoint_name: Annotated[
        str | None,
        typer.Option("--endpoint-name", help="Endpoint name (default: from the folder's name)."),
    ] = None,
    repository: Annotated[
        str | None,
        typer.Option(
            "--repository",
            help="Model repository, relative to DIR (default: models/ or model_repository/ "
            "if found, else a new models/ with an example model).",
        ),
    ] = None,
    region: Annotated[str, typer.Option("--region", help="AWS region.")] = "us-east-1",
    force: Annotated[bool, typer.Option("--force", help="Replace files that exist.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Write deploy.toml, cdk.json, a release workflow, .gitignore lines and (unless the
    project has one) a model repository; existing files are kept without --force."""
    from deploy.scaffold import next_steps, scaffold

    result = scaffold(
        directory,
        force=force,
        endpoint_name=endpoint_name,
        repository=repository,
        region=region,
    )
    if as_json:
        emit_json(result.as_dict())
        return
    out = console()
    where = result.project
    for relative in result.written:
        out.print(f"wrote {where / relative}", markup=False)
    for relative in result.kept:
        out.print(f"kept {where / relative} (it exists; --force replaces it)", markup=False)
    if result.gitignore_added:
        out.print(
            f"added {', '.join(result.gitignore_added)} to {where / '.gitignore'}", markup=False
        )
    if result.repository_found:
        out.print(f"model repository: {result.repository} (found)", markup=False)
    out.print(f"endpoint: {result.endpoint_name} (dev), -staging, -prod", markup=False)
    out.print("next, in the project folder:", markup=False)
    if where.resolve() != Path.cwd().resolve():
        out.print(f"  cd {where}", markup=False)
    for step in next_steps(result):
        out.print(f"  {step}", markup=False)
