"""The CDK app `cdk.json` runs: `npx cdk synth -c stage=prod [-c key=value ...]`.

Context keys other than `stage` override settings: top-level ones by name
(`region`, `instance_type`, `endpoint_name`) and infrastructure ones as
`infra.<field>` or bare `<field>` (e.g. `-c max_instance_count=4`).
"""

from __future__ import annotations

import sys
from typing import Any

from deploy.config import DeploySettings, InfraSettings, load_settings
from deploy.errors import DeployError

_TOP_LEVEL = frozenset(DeploySettings.model_fields) - {"infra", "stage"}
_INFRA = frozenset(InfraSettings.model_fields)


def overrides_from_context(context: dict[str, Any]) -> dict[str, Any]:
    """Split `-c key=value` context into explicit settings overrides."""
    overrides: dict[str, Any] = {}
    infra: dict[str, Any] = {}
    for key, value in context.items():
        name = key.removeprefix("infra.")
        if key in _TOP_LEVEL:
            overrides[key] = value
        elif name in _INFRA:
            infra[name] = value
    if infra:
        overrides["infra"] = infra
    return overrides


def main() -> int:
    import aws_cdk as cdk

    from infra.synth import build_app

    app = cdk.App()
    context_keys = list(_TOP_LEVEL) + [f"infra.{n}" for n in _INFRA] + list(_INFRA)
    context = {
        key: value for key in context_keys if (value := app.node.try_get_context(key)) is not None
    }
    stage = app.node.try_get_context("stage")
    try:
        settings = load_settings(stage=stage, **overrides_from_context(context))
        build_app(settings, app=app)
    except DeployError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
