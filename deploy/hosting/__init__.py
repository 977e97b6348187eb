"""Hosting modes: how an endpoint hosts a repository's models.

    multi-model   SageMaker MME: one archive per model, TargetModel per request (default)
    single-model  one archive, every model behind the generated router (ml.inf1 implies it)
    async         asynchronous endpoint, router layout, request bodies in S3
    serverless    serverless endpoint, router layout, CPU
    components    one inference component per model: its own GPUs, memory, copies

A stage picks one with `hosting = "..."` in deploy.toml, `--hosting` on the
CLI or `-c hosting=...` for the CDK app; `mode_for(settings)` returns it.
Each mode is a `HostingMode` (mode.py) composed of a settings check
(rules.py), a layout (per_model.py or router.py: packaging, the plan's diff,
store keys, the published manifest), the key of the endpoint stack the CDK app
synthesizes for it, the key of its local endpoint, its request limits and the
SDK's addressing (`deploy.client.manifest`). Code outside this package asks
the mode, never its name (`make lint` runs tools/mode_names.py).

    changes.py        the plan's per-model and archive changes (plain data)
    layout.py         the Layout protocol, StagePackage, StoredFile
    limits.py         SageMaker's payload and TargetModel limits, defined once
    router_model.py   the generated router model the router layouts serve
    router_archive.py the router layouts' one archive (and `deploy neuron package`'s)
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from deploy.client.manifest import HOSTINGS, MULTI_MODEL, SINGLE_MODEL
from deploy.errors import ConfigError
from deploy.hosting import asynchronous, components, multi_model, serverless, single_model
from deploy.hosting.layout import Diff, Layout, StagePackage, StoredFile
from deploy.hosting.mode import HostingMode, LocalServing

if TYPE_CHECKING:
    from deploy.config import DeploySettings

__all__ = [
    "HOSTINGS",
    "MODES",
    "Diff",
    "HostingMode",
    "Layout",
    "StagePackage",
    "StoredFile",
    "default_hosting",
    "default_mode",
    "local_modes",
    "mode_for",
    "mode_named",
]

MODES: Mapping[str, HostingMode] = {
    mode.name: mode
    for mode in (
        multi_model.MODE,
        single_model.MODE,
        asynchronous.MODE,
        serverless.MODE,
        components.MODE,
    )
}


def local_modes(where: Callable[[LocalServing], bool]) -> str:
    """The modes whose local endpoint is `where` (an error's "it applies to ..."),
    joined with "or"."""
    return " or ".join(name for name, mode in MODES.items() if mode.local and where(mode.local))


def default_hosting(instance_type: str) -> str:
    """The mode a stage gets without a `hosting` setting: ml.inf1 runs no multi-model
    endpoints, so it implies single-model."""
    from deploy.neuron.instances import is_inferentia

    return SINGLE_MODEL if is_inferentia(instance_type) else MULTI_MODEL


def default_mode() -> HostingMode:
    """The mode of a stage that names none and no instance type (the local endpoint)."""
    return multi_model.MODE


def mode_named(name: str, *, where: str = "hosting (--hosting)") -> HostingMode:
    mode = MODES.get(name)
    if mode is None:
        close = difflib.get_close_matches(name, list(MODES), n=1)
        raise ConfigError(
            f"unknown hosting {name!r}" + (f" (did you mean {close[0]}?)" if close else ""),
            where=where,
            fix=f"use one of: {', '.join(MODES)}",
        )
    return mode


def mode_for(settings: DeploySettings) -> HostingMode:
    """The stage's mode: its `hosting` setting, or the default for its instance type;
    multi-model with its asynchronous lane when `async_lane` is on."""
    mode = mode_named(settings.hosting or default_hosting(settings.instance_type))
    if settings.async_lane and mode.async_lane:
        from deploy.hosting.async_lane import LANED_MODE

        return LANED_MODE
    return mode
