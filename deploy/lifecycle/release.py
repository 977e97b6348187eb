"""`deploy promote` and `deploy rollback`: end a model's canary and publish the outcome.

A model with a canary (format 1.2: a second TargetModel taking a share of its
calls) ends it one of two ways:

- promote: the canary's TargetModel (and its archive's digest and size) becomes
  the model's `target_model`; every call goes to it.
- rollback: the canary is removed; the live version stays.

Either way the manifest is published conditionally on the one read
(deploy.lifecycle.manifest_writes), so a concurrent publish is never
overwritten, and clients pick the outcome up as their manifest cache expires.
The canary's archive stays in the store (`deploy prune` deletes what no
manifest names).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from deploy.client import manifest as contract
from deploy.errors import DeployError
from deploy.lifecycle.provider import Provider

Action = Literal["promote", "rollback"]


class ReleaseError(DeployError):
    """A promote or rollback that cannot be done as asked."""


@dataclass(frozen=True)
class ReleaseOutcome:
    model: str
    action: Action
    live: str  # the TargetModel every call goes to now
    dropped: str  # the TargetModel no call goes to any more
    percent: float  # the share the canary had

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def promoted(manifest: contract.Manifest, name: str, where: str) -> contract.Manifest:
    """`manifest` with model `name`'s canary as its live version, and no canary."""
    info, canary = _canary_of(manifest, name, where, "promote")
    live = dataclasses.replace(
        info,
        target_model=canary.target_model,
        sha256=canary.sha256,
        bytes=canary.bytes,
        source_digest=canary.source_digest,
        canary=None,
    )
    return dataclasses.replace(manifest, models={**manifest.models, name: live})


def rolled_back(manifest: contract.Manifest, name: str, where: str) -> contract.Manifest:
    """`manifest` with model `name`'s canary removed: the live version stays."""
    info, _canary = _canary_of(manifest, name, where, "rollback")
    kept = dataclasses.replace(info, canary=None)
    return dataclasses.replace(manifest, models={**manifest.models, name: kept})


def _canary_of(
    manifest: contract.Manifest, name: str, where: str, action: Action
) -> tuple[contract.ModelInfo, contract.Canary]:
    info = manifest.models.get(name)
    if info is None:
        known = ", ".join(sorted(manifest.models)) or "none"
        raise ReleaseError(
            f"model {name!r} is not in the published manifest (its models: {known})",
            where=where,
            fix=f"name one of its models: `deploy {action} MODEL`",
        )
    if info.canary is None:
        raise ReleaseError(
            f"model {name!r} has no canary: every call goes to {info.target_model}",
            where=where,
            fix="publish a canary first (`deploy up --canary N%`); nothing to "
            + ("promote" if action == "promote" else "roll back"),
        )
    return info, info.canary


def end_canary(
    provider: Provider,
    name: str,
    action: Action,
    *,
    where: str,
    after_publish: Callable[[contract.Manifest], None] | None = None,
) -> ReleaseOutcome:
    """Promote or roll back model `name`'s canary in the published manifest and publish
    it (conditionally on the read); `after_publish` gets the manifest published."""
    document = provider.published_manifest()
    if document is None:
        raise ReleaseError(
            "no manifest is published",
            where=where,
            fix="run `deploy up` first: there is no model, so no canary",
        )
    manifest = contract.parse(document, where)
    info, canary = _canary_of(manifest, name, where, action)
    changed = (
        promoted(manifest, name, where)
        if action == "promote"
        else rolled_back(manifest, name, where)
    )
    provider.publish_manifest(contract.dump(changed))
    if after_publish is not None:
        after_publish(changed)
    live, dropped = (
        (canary.target_model, info.target_model)
        if action == "promote"
        else (info.target_model, canary.target_model)
    )
    return ReleaseOutcome(name, action, live, dropped, canary.percent)
