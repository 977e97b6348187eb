"""`validate_repository`: read the repository, run every registered rule, sort the findings."""

from __future__ import annotations

from pathlib import Path

from deploy.neuron import validation as _neuron_rules  # noqa: F401  (NeuronCore rules)
from deploy.repository import load_repository
from deploy.validation import rules as _rules  # noqa: F401  (registers the built-in rules)
from deploy.validation.diagnostics import Diagnostic, Report, error
from deploy.validation.registry import MODEL_RULES, REPOSITORY_RULES, Context


def validate_repository(repo: Path, *, instance_type: str | None = None) -> Report:
    """Check `repo` offline; RepositoryError only if it cannot be read at all."""
    repository = load_repository(repo)
    context = Context(repository=repository, instance_type=instance_type)
    found: list[Diagnostic] = [
        error(p.model, str(p.file), p.field, p.message, p.fix) for p in repository.problems
    ]
    for model in repository.models.values():
        for model_check in MODEL_RULES:
            found.extend(model_check(context, model))
    for repository_check in REPOSITORY_RULES:
        found.extend(repository_check(context))
    unique = list(dict.fromkeys(found))
    unique.sort(key=lambda d: (d.model, d.severity != "error", d.file, d.field, d.message))
    return Report(
        repository=str(repo),
        models=len(repository.models) + len(repository.problems),
        instance_type=instance_type,
        diagnostics=tuple(unique),
    )
