"""`validate_repository`: read the repository, run every registered rule, sort the findings."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from deploy.repository import (
    LoadProblem,
    Repository,
    config_json,
    format_config,
    load_model,
    load_repository,
)
from deploy.validation import rules as _rules  # noqa: F401  (registers the built-in rules)
from deploy.validation.diagnostics import ConfigView, Diagnostic, Report, error
from deploy.validation.registry import MODEL_RULES, REPOSITORY_RULES, Context


def validate_repository(
    repo: Path,
    *,
    instance_type: str | None = None,
    triton_version: str | None = None,
    show_configs: bool = False,
    extra_rules: Sequence[Callable[[Repository], Iterable[Diagnostic]]] = (),
) -> Report:
    """Check `repo` offline; RepositoryError only if it cannot be read at all.

    `show_configs` adds each model's effective config (as read, inferred or
    completed by `auto_complete_config`) to the report. `extra_rules` run once
    over the repository as read (a hosting mode's own rules).
    """
    repository = load_repository(repo)
    context = Context(
        repository=repository, instance_type=instance_type, triton_version=triton_version
    )
    found: list[Diagnostic] = [
        error(p.model, str(p.file), p.field, p.message, p.fix) for p in repository.problems
    ]
    for model in repository.models.values():
        for model_check in MODEL_RULES:
            found.extend(model_check(context, model))
    for repository_check in REPOSITORY_RULES:
        found.extend(repository_check(context))
    for extra in extra_rules:
        found.extend(extra(repository))
    unique = list(dict.fromkeys(found))
    unique.sort(key=lambda d: (d.model, d.severity != "error", d.file, d.field, d.message))
    return Report(
        repository=str(repo),
        models=len(repository.models) + len(repository.problems),
        instance_type=instance_type,
        diagnostics=tuple(unique),
        configs=_configs(repository) if show_configs else (),
    )


def validate_model(folder: Path, *, instance_type: str | None = None) -> Report:
    """Check one model folder alone (its model rules; nothing that needs the others)."""
    loaded = load_model(folder)
    if isinstance(loaded, LoadProblem):
        found = [error(loaded.model, str(loaded.file), loaded.field, loaded.message, loaded.fix)]
        return Report(repository=str(folder.parent), models=1, diagnostics=tuple(found))
    repository = Repository(root=folder.parent, models={folder.name: loaded}, problems=())
    context = Context(repository=repository, instance_type=instance_type)
    found = [d for model_check in MODEL_RULES for d in model_check(context, loaded)]
    return Report(
        repository=str(folder.parent),
        models=1,
        instance_type=instance_type,
        diagnostics=tuple(dict.fromkeys(found)),
    )


def _configs(repository: Repository) -> tuple[ConfigView, ...]:
    return tuple(
        ConfigView(
            model=name,
            source=model.config_source,
            text=format_config(model.config),
            document=config_json(model.config),
        )
        for name, model in sorted(repository.models.items())
    )
