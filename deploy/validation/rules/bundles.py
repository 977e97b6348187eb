"""A model bundled into a BLS archive that an ensemble's archive also holds as a step.

On a SageMaker multi-model endpoint each archive is a model repository of its
own (`--model-namespacing=true`): an ensemble's steps load inside its
archive's namespace, while a BLS archive's bundled models load with
`pb_utils.load_model` outside any (see `deploy.packaging.bundles`). Once both
archives are loaded, Triton has two models of that name, and a BLS call by the
name alone fails. Seen with tritonserver 2.51 in SageMaker MME mode: an
ensemble with step `preprocess` and a BLS archive bundling `preprocess`, in
either load order, leave the BLS calls failing with "Model 'preprocess' is not
ready" (tests/functional/test_local_bundles.py). Requests fail rather than
load, so it is a warning.
"""

from __future__ import annotations

from collections.abc import Iterator

from deploy.repository import DEPENDENCIES_PARAMETER, Model
from deploy.validation.diagnostics import Diagnostic, warning
from deploy.validation.registry import Context, model_rule


def _steps(ctx: Context, ensemble: Model) -> set[str]:
    """The model folders an ensemble's archive holds at its root (nested ensembles too)."""
    seen: set[str] = set()
    pending = [ensemble.name]
    while pending:
        current = ctx.repository.models.get(pending.pop())
        if current is None or current.name in seen:
            continue
        seen.add(current.name)
        pending.extend(step.model_name for step in current.ensemble_steps)
    return seen


def _bundled(ctx: Context, model: Model) -> set[str]:
    """Every model a BLS model's archive bundles (dependencies of dependencies too)."""
    seen: set[str] = set()
    pending = list(model.dependencies)
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        dependency = ctx.repository.models.get(name)
        if dependency is not None:
            pending.extend(dependency.dependencies)
    return seen


@model_rule
def bundled_model_is_an_ensemble_step(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    if not model.dependencies:
        return
    bundled = _bundled(ctx, model)
    for ensemble in sorted(ctx.repository.models.values(), key=lambda m: m.name):
        if ensemble.kind != "ensemble":
            continue
        for name in sorted(bundled & _steps(ctx, ensemble)):
            yield warning(
                model.name,
                ctx.file_of(model),
                f"parameters[{DEPENDENCIES_PARAMETER}]",
                f'bundles model "{name}", which ensemble "{ensemble.name}" also holds as a '
                "step: on a SageMaker multi-model endpoint, once both archives are loaded, "
                f'Triton has two models called "{name}" (the step, inside {ensemble.name}\'s '
                f'archive, and this bundle, outside it) and this model\'s BLS calls to "{name}" '
                f"fail (\"Model '{name}' is not ready\")",
                f"bundle a copy under another name (a copy of the {name}/ folder, named in "
                f"{DEPENDENCIES_PARAMETER} and in the BLS model_name), or serve "
                f'"{ensemble.name}" and "{model.name}" from different endpoints',
            )
