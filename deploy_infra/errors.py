"""Errors the CDK app raises for settings it cannot synthesize."""

from __future__ import annotations

from deploy.errors import ConfigError


class InfraConfigError(ConfigError):
    """A stage's settings cannot be turned into infrastructure (e.g. an unsupported instance)."""
