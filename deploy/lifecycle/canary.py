"""Per-model canaries on a multi-model endpoint: `deploy up --canary 10%`.

A changed model's new archive is uploaded and smoke-tested (golden requests)
as any change is, but the published manifest keeps the live version as the
model's `target_model` and names the new one as its `canary` with a percent;
the SDK and the front door split calls between them (`contract.split`). The
percent comes from `--canary` (every changed model of the stage) or from
`[stages.X.models.NAME] canary` (one model); the flag wins.

What `deploy up` does with a model that has a canary in the published manifest:
- the repository holds the live version or the canary's: the canary stays as it
  is (`--canary` with another percent changes only the percent);
- it holds a third version, with a canary percent: the new version replaces the
  canary (the live version stays live);
- it holds a third version, without one: the new version goes live for every
  call and the canary is dropped (the plan says so).
Other hosting modes refuse a canary: their traffic shifts are the endpoint's
DeploymentConfig (`[stages.X.rollout]`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from deploy.client import manifest as contract
from deploy.config import DeploySettings
from deploy.errors import ConfigError, DeployError
from deploy.hosting.changes import ModelChange
from deploy.hosting.mode import HostingMode

# The largest canary percent: past half of the calls it is the live version.
MAX_CANARY_PERCENT = 50.0
CanaryState = Literal["new", "replaced", "percent", "kept"]


@dataclass(frozen=True)
class CanaryChange:
    """A model's canary in the manifest this plan publishes.

    `state`: "new" (the model had none), "replaced" (`previous` was the canary),
    "percent" (the same canary, `previous_percent` before), "kept" (as published).
    `entry` is the model as the manifest publishes it: the live version, with
    the canary named."""

    name: str
    percent: float
    target_model: str
    live_target_model: str
    state: CanaryState
    entry: contract.ModelInfo
    previous: str | None = None
    previous_percent: float | None = None

    @property
    def changes_manifest(self) -> bool:
        return self.state != "kept"

    def describe(self) -> str:
        """'NAME canary 10% → NAME-<digest>.tar.gz (live ...)', as the plan prints it."""
        text = f"{self.name} canary {self.percent:g}% → {self.target_model}"
        if self.state == "replaced":
            text += f" (replaces {self.previous})"
        elif self.state == "percent":
            text += f" (was {self.previous_percent:g}%)"
        return f"{text}, live {self.live_target_model}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "percent": self.percent,
            "target_model": self.target_model,
            "live_target_model": self.live_target_model,
            "previous": self.previous,
            "previous_percent": self.previous_percent,
        }


def parse_percent(text: str, *, where: str = "--canary") -> float:
    """'10%' or '10' as a percent, checked (0 < percent <= MAX_CANARY_PERCENT)."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        value = math.nan
    return check_percent(value, where=where, shown=text)


def check_percent(value: float, *, where: str, shown: str | None = None) -> float:
    if not (math.isfinite(value) and 0 < value <= MAX_CANARY_PERCENT):
        raise ConfigError(
            f"canary {shown if shown is not None else value!r} is not a percent above 0 "
            f"and at most {MAX_CANARY_PERCENT:g}",
            where=where,
            fix=f"give a percent such as 10% (at most {MAX_CANARY_PERCENT:g}%: a larger "
            "share is a release, `deploy up` without a canary)",
        )
    return int(value) if value == int(value) else value


def requested(settings: DeploySettings, flag: float | None, mode: HostingMode) -> dict[str, float]:
    """Percent by model name ('*': every model, from `--canary`); refused unless
    the stage hosts a multi-model endpoint."""
    per_model = {
        name: model.canary for name, model in settings.models.items() if model.canary is not None
    }
    if flag is None and not per_model:
        return {}
    if not mode.model_canaries:
        where = (
            "--canary"
            if flag is not None
            else f"[stages.{settings.stage}.models.{sorted(per_model)[0]}] canary"
        )
        raise ConfigError(
            f"a per-model canary needs a multi-model endpoint; this stage hosts {mode.name}, "
            "whose traffic shifts are the endpoint's own (its DeploymentConfig)",
            where=where,
            fix=f'set [stages.{settings.stage}.rollout] traffic = "canary" for this hosting, '
            "or use hosting multi-model",
        )
    if flag is not None:
        return {"*": check_percent(flag, where="--canary")}
    return {
        name: check_percent(percent, where=f"[stages.{settings.stage}.models.{name}] canary")
        for name, percent in per_model.items()
    }


def plan_canaries(
    models: tuple[ModelChange, ...],
    package: Mapping[str, Any],
    published: Mapping[str, Any] | None,
    percents: Mapping[str, float],
    *,
    stage: str,
    lane: bool = False,
) -> tuple[tuple[ModelChange, ...], tuple[CanaryChange, ...], tuple[str, ...]]:
    """The plan's model changes adjusted for canaries, the canaries the published
    manifest will name, and notes for the plan (`lane`: the stage has an async lane).
    `package` and `published` are the manifests as decoded; they are parsed here."""
    local = contract.parse(package, "package manifest").models
    unknown = sorted(name for name in percents if name != "*" and name not in local)
    if unknown:
        raise ConfigError(
            f"the repository has no model {unknown[0]!r}",
            where=f"[stages.{stage}.models.{unknown[0]}] canary",
            fix=f"remove it or name one of: {', '.join(sorted(local)) or 'none'}",
        )
    live = _published_models(published)
    changes: list[ModelChange] = []
    canaries: list[CanaryChange] = []
    notes: list[str] = []
    for change in models:
        percent = percents.get(change.name, percents.get("*"))
        before = live.get(change.name)
        if change.action == "removed" or change.action == "unknown":
            changes.append(change)
            continue
        if before is None:
            if percent is not None:
                notes.append(
                    f"{change.name} is new: there is no live version to canary against, so "
                    "it takes all its calls"
                )
            changes.append(change)
            continue
        info = before
        current = info.canary
        new = change.target_model
        if current is not None and new in (info.target_model, current.target_model):
            # The live version or the canary's: the canary stays (maybe at a new percent).
            wanted = current.percent if percent is None or new == info.target_model else percent
            state: CanaryState = "kept" if wanted == current.percent else "percent"
            canary = replace(current, percent=wanted)
            canaries.append(
                _change(
                    change.name,
                    info,
                    canary,
                    state,
                    previous_percent=current.percent if state == "percent" else None,
                )
            )
            changes.append(replace(change, action="unchanged"))
            continue
        if change.action != "changed" or percent is None:
            if current is not None and change.action == "changed":
                notes.append(
                    f"{change.name}: its canary {current.target_model} is dropped; the new "
                    f"version {new} takes every call (deploy it with --canary to keep the "
                    f"live version {info.target_model})"
                )
            changes.append(change)
            continue
        entry = local[change.name]
        _check_signature(change.name, info, entry)
        canary = contract.Canary(
            target_model=new,
            percent=percent,
            sha256=entry.sha256,
            bytes=entry.bytes,
            source_digest=entry.source_digest,
        )
        canaries.append(
            _change(
                change.name,
                info,
                canary,
                "new" if current is None else "replaced",
                previous=current.target_model if current is not None else None,
            )
        )
        changes.append(change)
    if lane and any(canary.changes_manifest for canary in canaries):
        notes.append(
            "the async lane (requests over 6 MB) serves this repository's version of each "
            "model: a canary's split applies to real-time calls only"
        )
    return tuple(changes), tuple(canaries), tuple(notes)


def published_document(package_bytes: bytes, canaries: tuple[CanaryChange, ...]) -> bytes:
    """The package's manifest with each canaried model's entry: the live version and
    its canary."""
    if not canaries:
        return package_bytes
    try:
        manifest = contract.loads(package_bytes, "the manifest to publish")
    except contract.ManifestFormatError as exc:  # a package this version cannot carry
        raise DeployError(
            f"the manifest with its canaries breaks the contract: {exc}",
            where="the published manifest",
            fix="re-run `deploy up` without a canary",
        ) from exc
    models = {**manifest.models, **{canary.name: canary.entry for canary in canaries}}
    return contract.dump(contract.written(replace(manifest, models=models)))


def _change(
    name: str,
    info: contract.ModelInfo,
    canary: contract.Canary,
    state: CanaryState,
    *,
    previous: str | None = None,
    previous_percent: float | None = None,
) -> CanaryChange:
    return CanaryChange(
        name=name,
        percent=canary.percent,
        target_model=canary.target_model,
        live_target_model=info.target_model,
        state=state,
        entry=replace(info, canary=canary),
        previous=previous,
        previous_percent=previous_percent,
    )


def _published_models(published: Mapping[str, Any] | None) -> Mapping[str, contract.ModelInfo]:
    if published is None:
        return {}
    try:
        return contract.parse(published, "published manifest").models
    except contract.ManifestFormatError:
        return {}  # the diff refuses it, naming the field


def _check_signature(name: str, live: contract.ModelInfo, new: contract.ModelInfo) -> None:
    """A canary answers the live version's callers: it takes the same inputs and
    gives the same outputs (the manifest describes the live version's)."""
    before = (live.max_batch_size, live.inputs, live.outputs)
    after = (new.max_batch_size, new.inputs, new.outputs)
    if before != after:
        raise ConfigError(
            f"model {name!r}: the new version's inputs, outputs or max_batch_size differ from "
            f"the live version's ({live.target_model}), so it cannot be a canary: callers "
            "are checked against the live version's",
            where=f"model {name!r} (--canary)",
            fix="release it without a canary, or keep its inputs and outputs",
        )
