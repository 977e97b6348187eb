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

from deploy.errors import RepositoryError
from deploy.repository import DEPENDENCIES_PARAMETER, Model
from deploy.repository.files import model_entries
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


# What a bundle's loader leaves out of `files` (model_packages/examples/bls_addsub).
_NOT_PASSED = frozenset({"config.pbtxt", "requirements.txt", "python-env.tar.gz", "deps"})


def _passed_files(dependency: Model) -> list[str]:
    """The files of a bundled model that `pb_utils.load_model(files=...)` hands to Triton
    (what packaging keeps: no interpreter or editor leftovers)."""
    try:
        entries = model_entries(dependency.path)
    except RepositoryError:  # reported where the model is read
        return []
    return [
        entry.as_posix()
        for entry in entries
        if entry.parts[0] not in _NOT_PASSED and not (dependency.path / entry).is_dir()
    ]


@model_rule
def bundled_model_has_several_files(ctx: Context, model: Model) -> Iterator[Diagnostic]:
    """python_backend's `load_model(files=...)` keeps only one of several files intact.

    `ModelLoader::LoadModel` (python_backend 2.51, and its main branch as of
    2026-07) points every file at one reused buffer, so a bundled model of
    more than one file loads with all but one of them overwritten (docs/
    architecture.md, "bundled models").
    """
    if not model.dependencies:
        return
    for name in sorted(_bundled(ctx, model)):
        dependency = ctx.repository.models.get(name)
        if dependency is None:
            continue
        files = _passed_files(dependency)
        if len(files) < 2:
            continue
        shown = ", ".join(files[:4]) + (", ..." if len(files) > 4 else "")
        yield warning(
            model.name,
            ctx.file_of(model),
            f"parameters[{DEPENDENCIES_PARAMETER}]",
            f'bundles model "{name}", whose {len(files)} files ({shown}) pb_utils.load_model '
            "hands to Triton: python_backend (tritonserver 2.51) keeps only one of several "
            f'files intact, so in a multi-model archive "{name}" loads with the others '
            "overwritten",
            f'keep "{name}" to one file (its code in {name}/1/model.py, no helper modules '
            "or data files beside it)",
        )
