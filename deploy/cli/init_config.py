"""`deploy init-config MODEL_DIR`: write a model's config.pbtxt from its model file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deploy.cli.flags import NoRepoCodeOption, repository_code
from deploy.cli.output import console, emit_json


def register(app: typer.Typer) -> None:
    app.command("init-config")(init_config)


def init_config(
    model_dir: Annotated[
        Path, typer.Argument(help="Model folder (MODEL_DIR/1/model.onnx|model.pt|model.py).")
    ],
    sample_input: Annotated[
        Path | None,
        typer.Option(
            "--sample-input",
            help="TorchScript: .npz with one array per forward() argument, batch first.",
        ),
    ] = None,
    max_batch_size: Annotated[
        int | None,
        typer.Option("--max-batch-size", help="0 turns batching off (default: from the model)."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing config.pbtxt.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
    no_repo_code: NoRepoCodeOption = False,
) -> None:
    """Write MODEL_DIR/config.pbtxt for an ONNX, TorchScript or python model, validated."""
    repository_code(no_repo_code)
    from deploy.repository import config_json
    from deploy.repository.init_config import infer_config, write_config
    from deploy.validation import validate_model

    inferred = infer_config(model_dir, sample_input=sample_input, max_batch_size=max_batch_size)
    warnings = []

    def check(folder: Path) -> list[str]:
        report = validate_model(folder)
        warnings.extend(report.warnings)
        return [f"{d.field + ': ' if d.field else ''}{d.message}" for d in report.errors]

    path = write_config(inferred, force=force, check=check)
    if as_json:
        emit_json(
            {
                "path": str(path),
                "kind": inferred.kind,
                "source": str(inferred.source),
                "config": config_json(inferred.config),
                "warnings": [w.as_dict() for w in warnings],
            }
        )
        return
    out = console()
    out.print(inferred.text, markup=False, highlight=False)
    for warning in warnings:
        out.print(f"warning {warning.file}: {warning.message}", markup=False)
        out.print(f"  fix: {warning.fix}", markup=False)
    out.print(f"wrote {path} (from {inferred.source.name})", markup=False)
