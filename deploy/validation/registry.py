"""Rule registry: every rule is a function from a context to diagnostics.

Other modules add their own checks with `register_rule` (the Inferentia work
adds NeuronCore-range checks that run when `instance_type` is `ml.inf1.*`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from deploy.repository import Model, Repository
from deploy.validation.diagnostics import Diagnostic


@dataclass(frozen=True)
class Context:
    repository: Repository
    instance_type: str | None = None
    triton_version: str | None = None  # the stage's SageMaker Triton image tag

    def file_of(self, model: Model) -> str:
        path = model.config_path or model.path
        return str(path)


ModelRule = Callable[[Context, Model], Iterable[Diagnostic]]
RepositoryRule = Callable[[Context], Iterable[Diagnostic]]

MODEL_RULES: list[ModelRule] = []
REPOSITORY_RULES: list[RepositoryRule] = []


def model_rule(rule: ModelRule) -> ModelRule:
    """Decorator: run `rule` once per model that was read."""
    MODEL_RULES.append(rule)
    return rule


def repository_rule(rule: RepositoryRule) -> RepositoryRule:
    """Decorator: run `rule` once per repository."""
    REPOSITORY_RULES.append(rule)
    return rule


def register_rule(rule: ModelRule) -> ModelRule:
    """Public hook for other modules: add a per-model rule (idempotent)."""
    if rule not in MODEL_RULES:
        MODEL_RULES.append(rule)
    return rule
