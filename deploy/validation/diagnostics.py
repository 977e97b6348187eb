"""Validation results as data: one `Diagnostic` per problem, gathered in a `Report`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Diagnostic:
    """A problem found in a model repository: where (file, field), what, and the fix."""

    severity: Severity
    model: str
    file: str
    field: str
    message: str
    fix: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def error(model: str, file: str, field: str, message: str, fix: str) -> Diagnostic:
    return Diagnostic("error", model, file, field, message, fix)


def warning(model: str, file: str, field: str, message: str, fix: str) -> Diagnostic:
    return Diagnostic("warning", model, file, field, message, fix)


@dataclass(frozen=True)
class ConfigView:
    """The config Triton would load a model with, and where it comes from."""

    model: str
    source: str  # "config.pbtxt", "auto_complete_config in model.py", ...
    text: str  # config.pbtxt form
    document: dict[str, Any]  # Triton's JSON form

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "source": self.source, "config": self.document}


@dataclass(frozen=True)
class Report:
    repository: str
    models: int
    instance_type: str | None = None
    diagnostics: tuple[Diagnostic, ...] = field(default_factory=tuple)
    configs: tuple[ConfigView, ...] = ()  # filled on request (`--show-config`)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not self.errors

    def as_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "repository": self.repository,
            "models": self.models,
            "instance_type": self.instance_type,
            "ok": self.ok,
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "diagnostics": [d.as_dict() for d in self.diagnostics],
        }
        if self.configs:
            document["configs"] = [c.as_dict() for c in self.configs]
        return document
