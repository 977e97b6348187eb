"""Rule on model names: only characters every serving layer accepts (`deploy.repository.names`)."""

from __future__ import annotations

from collections.abc import Iterator

from deploy.repository import Model
from deploy.repository.names import MODEL_NAME_CHARACTERS, model_name_problem
from deploy.validation.diagnostics import Diagnostic, error
from deploy.validation.registry import Context, model_rule


@model_rule
def name_serves(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    problem = model_name_problem(model.name)
    if problem is not None:
        yield error(
            model.name,
            str(model.path),
            "name",
            f"{problem}; SageMaker TargetModels, file systems and the python backend's "
            "stub command line must all carry it",
            f"rename the folder (and `name:` in config.pbtxt) using {MODEL_NAME_CHARACTERS}",
        )
