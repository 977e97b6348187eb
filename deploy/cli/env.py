"""`deploy env build REQUIREMENTS --out env.tar.gz`: an execution environment for python models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deploy.cli.output import console, emit_json

IndexUrlOption = Annotated[
    str | None,
    typer.Option(
        "--index-url",
        help="Package index (simple API URL) pip installs from; default: pip_index_url in "
        "deploy.toml (DEPLOY_PIP_INDEX_URL), else PyPI. Requirements files never choose it.",
    ),
]

env_app = typer.Typer(
    name="env",
    help="Execution environments (EXECUTION_ENV_PATH) for python models.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(env_app)


@env_app.command("build")
def build(
    requirements: Annotated[Path, typer.Argument(help="requirements.txt (specifiers only).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The environment archive to write.")],
    python: Annotated[
        str | None,
        typer.Option(
            "--python", help="The image's Python (X.Y); default: that of --triton-version."
        ),
    ] = None,
    triton_version: Annotated[
        str,
        typer.Option("--triton-version", help="SageMaker Triton image the models run on."),
    ] = "24.09",
    index_url: IndexUrlOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
) -> None:
    """Install requirements for the image's Python and platform, packed for EXECUTION_ENV_PATH."""
    from deploy.envs import build_environment, image_python

    image = image_python(triton_version)
    result = build_environment(
        requirements, out, python=python or image.python, glibc=image.glibc, index=index_url
    )
    if as_json:
        emit_json(result.as_dict())
        return
    state = "unchanged (from the cache)" if result.reused else "built"
    out_console = console()
    out_console.print(
        f"{result.path}: {state}, Python {result.python}, {result.platforms[0]}", markup=False
    )
    out_console.print("packages: " + ", ".join(result.packages), markup=False)
    out_console.print(
        'use: parameters { key: "EXECUTION_ENV_PATH" value { string_value: '
        f'"$$TRITON_MODEL_DIRECTORY/{result.path.name}" }} }}',
        markup=False,
    )
