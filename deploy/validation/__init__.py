"""`deploy validate`: offline checks of a Triton model repository.

    from deploy.validation import validate_repository
    report = validate_repository(Path("model_packages/examples"))
    report.errors  # [Diagnostic(severity, model, file, field, message, fix), ...]

Extra rules: `register_rule(fn)` where `fn(context, model)` yields diagnostics;
`context.instance_type` carries `--instance`.
"""

from __future__ import annotations

from deploy.validation.diagnostics import (
    ConfigView,
    Diagnostic,
    Report,
    Severity,
    error,
    warning,
)
from deploy.validation.registry import Context, ModelRule, register_rule
from deploy.validation.validate import validate_model, validate_repository

__all__ = [
    "ConfigView",
    "Context",
    "Diagnostic",
    "ModelRule",
    "Report",
    "Severity",
    "error",
    "register_rule",
    "validate_model",
    "validate_repository",
    "warning",
]
