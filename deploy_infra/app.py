"""The CDK app: `python -m deploy_infra.app`, what a cdk.json's `app` runs and what
`deploy cdk synth -c stage=prod [-c key=value ...]` runs without one.

Context keys other than `stage` override settings: top-level ones by name
(`region`, `instance_type`, `endpoint_name`) and infrastructure ones as
`infra.<field>` or bare `<field>` (e.g. `-c max_instance_count=4`). Any other
key that is not the CDK's own (feature flags, lookups) is an error: a typo
such as `-c max_instance_cout=4` must not synthesize the defaults silently.
"""

from __future__ import annotations

import difflib
import sys
from typing import Any

from deploy.config import DeploySettings, InfraSettings, load_settings
from deploy.errors import DeployError
from deploy_infra.errors import InfraConfigError

_TOP_LEVEL = frozenset(DeploySettings.model_fields) - {"infra", "stage"}
_INFRA = frozenset(InfraSettings.model_fields)
# Context the app reads besides settings, and plain keys the CDK CLI itself keeps.
_OTHER_KEYS = frozenset({"stage", "acknowledged-issue-numbers"})
NAG_CONTEXT = "deploy:nag"  # deploy.lifecycle.templates sets it false


def _cdk_owned(key: str) -> bool:
    """Feature flags (`@aws-cdk/...`), CLI switches (`aws:cdk:...`) and context-provider
    lookups (`availability-zones:account=...`): the CDK's keys, not ours."""
    return key.startswith("@") or ":" in key


def overrides_from_context(context: dict[str, Any]) -> dict[str, Any]:
    """Split `-c key=value` context into explicit settings overrides.

    A key that is neither a setting nor the CDK's own is a typo: an error naming
    the closest setting and listing the valid keys, never silently ignored.
    """
    overrides: dict[str, Any] = {}
    infra: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in context.items():
        name = key.removeprefix("infra.")
        if key in _TOP_LEVEL:
            overrides[key] = value
        elif name in _INFRA:
            infra[name] = value
        elif key not in _OTHER_KEYS and not _cdk_owned(key):
            unknown.append(key)
    if unknown:
        raise InfraConfigError(_unknown_keys(unknown), where="-c (CDK context)", fix=_VALID)
    if infra:
        overrides["infra"] = infra
    return overrides


def _unknown_keys(keys: list[str]) -> str:
    parts = []
    for key in sorted(keys):
        close = difflib.get_close_matches(
            key.removeprefix("infra."), [*_TOP_LEVEL, *_INFRA, *_OTHER_KEYS], n=1
        )
        parts.append(f"{key!r}" + (f" (did you mean {close[0]}?)" if close else ""))
    return f"unknown context key {', '.join(parts)}"


_VALID = (
    "use -c stage=NAME, a setting ("
    + ", ".join(sorted(_TOP_LEVEL))
    + ") or an infrastructure setting, bare or as infra.<name> ("
    + ", ".join(sorted(_INFRA))
    + ")"
)


def main() -> int:
    import aws_cdk as cdk

    from deploy_infra.synth import _pinned_context, build_app

    # The pinned context is the default; the CDK CLI's (cdk.json, -c) overrides it.
    app = cdk.App(context=_pinned_context())
    context = dict(app.node.get_all_context())
    stage = context.pop("stage", None)
    # `deploy up` synthesizes without cdk-nag (`make test` runs it).
    nag = str(context.pop(NAG_CONTEXT, True)).lower() != "false"
    try:
        settings = load_settings(stage=stage, **overrides_from_context(context))
        build_app(settings, app=app, nag=nag)
    except DeployError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
