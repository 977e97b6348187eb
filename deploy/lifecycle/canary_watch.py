"""`deploy up --watch`: follow a published canary until it ends, or for a while.

Each poll reads the published manifest (the split: which models have a canary,
at what share) and the canary alarms' states. A canary ends when the manifest
no longer names it: promoted (its TargetModel became the model's) or rolled
back (by `deploy rollback` or by the canary-rollback function when an alarm
fired). Nothing here changes anything: the rollback needs no process running,
watching only shows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from deploy.client import manifest as contract
from deploy.lifecycle.canary_alarms import ERROR_RATE, P99_LATENCY, CanaryAlarms, alarm_name

PROMOTED = "promoted"
ROLLED_BACK = "rolled back"


@dataclass(frozen=True)
class CanaryView:
    model: str
    live: str  # the model's target_model
    canary: str  # the canary's TargetModel
    percent: float
    alarms: dict[str, str]  # error-rate / p99-latency → OK | ALARM | INSUFFICIENT_DATA | missing


@dataclass(frozen=True)
class WatchOutcome:
    ended: dict[str, str] = field(default_factory=dict)  # model → promoted | rolled back
    running: tuple[CanaryView, ...] = ()  # canaries still running at the timeout

    @property
    def rolled_back(self) -> list[str]:
        return sorted(name for name, how in self.ended.items() if how == ROLLED_BACK)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ended": dict(sorted(self.ended.items())),
            "running": [view.__dict__ for view in self.running],
        }


def _canaries(manifest: contract.Manifest | None) -> dict[str, contract.ModelInfo]:
    models = manifest.models if manifest is not None else {}
    return {name: info for name, info in sorted(models.items()) if info.canary is not None}


def watch(
    read_manifest: Callable[[], dict[str, Any] | None],
    alarms: CanaryAlarms,
    *,
    timeout_s: float,
    interval_s: float = 15.0,
    show: Callable[[list[CanaryView]], None],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> WatchOutcome:
    """Poll until no canary of the first read remains, or `timeout_s` passed."""
    deadline = clock() + timeout_s
    first = read_manifest()
    watched = _canaries(contract.parse(first, "the published manifest") if first else None)
    ended: dict[str, str] = {}
    views: list[CanaryView] = []
    while True:
        document = read_manifest()
        manifest = contract.parse(document, "the published manifest") if document else None
        current = _canaries(manifest)
        states = alarms.states()
        views = []
        for name, info in watched.items():
            if name in ended:
                continue
            canary = info.canary
            assert canary is not None
            now = current.get(name)
            if now is None or now.canary is None or now.canary.target_model != canary.target_model:
                live = manifest.models.get(name) if manifest is not None else None
                promoted = live is not None and live.target_model == canary.target_model
                ended[name] = PROMOTED if promoted else ROLLED_BACK
                continue
            views.append(
                CanaryView(
                    model=name,
                    live=now.target_model,
                    canary=canary.target_model,
                    percent=now.canary.percent,
                    alarms={
                        kind: states.get(
                            alarm_name(alarms.endpoint, name, canary.target_model, kind), "missing"
                        )
                        for kind in (ERROR_RATE, P99_LATENCY)
                    },
                )
            )
        show(views)
        if not views or clock() >= deadline:
            return WatchOutcome(ended, tuple(views))
        sleep(max(0.0, min(interval_s, deadline - clock())))
