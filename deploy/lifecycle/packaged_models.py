"""The logical model names of a stage's packaged manifest: what its dashboard shows.

The stage's CloudWatch dashboard has a section per logical model (the
per-model metrics of `deploy.client.model_metrics`). The CDK app runs as a
separate program that reads no deploy.toml, so `deploy up` hands it the names
as the context key `MODELS_CONTEXT` (a JSON list), and the synthesized
templates are cached per set of names: a model added or removed re-synthesizes
the dashboard. Without the key (`deploy cdk synth`), the app reads the package
itself.
"""

from __future__ import annotations

import json
from pathlib import Path

from deploy.client import manifest as contract
from deploy.config import DeploySettings

MODELS_CONTEXT = "deploy:models"


def packaged_models(settings: DeploySettings, package_dir: Path | None = None) -> list[str]:
    """The models `deploy package` wrote for the stage's hosting mode, sorted ([] when
    nothing is packaged yet or the manifest cannot be read: the dashboard then has no
    per-model sections, and the next `deploy up` adds them)."""
    from deploy.hosting import mode_for

    folder = mode_for(settings).package_dir(package_dir or settings.package_dir)
    path = folder / "manifest.json"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        parsed = contract.parse(document, str(path))
    except (OSError, ValueError, contract.ManifestFormatError):
        return []
    return sorted(parsed.models)


def models_from_context(value: object) -> list[str] | None:
    """`MODELS_CONTEXT` as the CDK app reads it (a JSON list, or a list); None if unset."""
    if value is None:
        return None
    names = json.loads(value) if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise ValueError(f"{MODELS_CONTEXT} must be a JSON list of model names, not {value!r}")
    return sorted(set(names))
