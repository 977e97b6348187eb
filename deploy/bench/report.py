"""What a load test reports, per step and for the run, and its JSON form.

A step counts the calls sent (fixed rate: scheduled) inside its measured
window, which opens after the warm-up; every one of them is waited for.
Throughput is the answered ones over the time from the window's start to the
last answer (at least the window), so a backlog that drains after the
window lowers it instead of hiding. Latency percentiles are over answered
calls (fixed rate: from each send's scheduled moment).
Errors are counted by class (`deploy.bench.outcomes`) with the first
message of each. Client CPU is the worker processes' CPU time in the window
per call; the client counts as saturated when a worker process used 90% of
a core (one Python process cannot do much more) or all workers together
90% of the machine's cores.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deploy.bench.cost import Pricing
from deploy.bench.outcomes import CODE, ERROR_CLASSES, OK
from deploy.bench.runner import MachineCpu, Step
from deploy.bench.worker import Samples

FORMAT = 1
FAILED_FRACTION = 0.01  # more failed calls than this and the run is reported as failed
SATURATED_CORE = 0.9
MACHINE_BUSY = 0.95


@dataclass
class StepReport:
    concurrency: int
    rate: float | None
    window_s: float
    ok: int
    errors: dict[str, int]
    error_examples: dict[str, str]
    throughput_rps: float
    items_per_s: float
    latency_ms: dict[str, float | None]
    client_cpu_ms_per_request: float | None
    client_cpu_cores: float
    busiest_worker_core: float
    client_saturated: bool
    machine_cpu_busy: float | None
    late_sends: int = 0  # fixed rate: sends held up by the cap on requests in flight
    cost_per_million_usd: float | None = None

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    @property
    def requests(self) -> int:
        return self.ok + self.failed

    @property
    def error_fraction(self) -> float:
        return self.failed / self.requests if self.requests else 0.0

    def label(self) -> str:
        return Step(self.concurrency, self.rate).label()

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "rate_rps": self.rate,
            "window_s": round(self.window_s, 3),
            "requests": self.requests,
            "ok": self.ok,
            "failed": self.failed,
            "error_fraction": round(self.error_fraction, 5),
            "errors": dict(self.errors),
            "error_examples": dict(self.error_examples),
            "throughput_rps": round(self.throughput_rps, 2),
            "items_per_s": round(self.items_per_s, 2),
            "latency_ms": self.latency_ms,
            "client_cpu_ms_per_request": self.client_cpu_ms_per_request,
            "client_cpu_cores": round(self.client_cpu_cores, 3),
            "busiest_worker_core": round(self.busiest_worker_core, 3),
            "client_saturated": self.client_saturated,
            "machine_cpu_busy": self.machine_cpu_busy,
            "late_sends": self.late_sends,
            "cost_per_million_usd": self.cost_per_million_usd,
        }


def summarize(
    step: Step,
    samples: Sequence[Samples],
    machine: MachineCpu,
    *,
    items_per_request: int,
    pricing: Pricing | None,
    window: tuple[float, float],
) -> StepReport:
    """One step's numbers from every worker's samples."""
    begin = np.concatenate([s.begin for s in samples]) if samples else np.zeros(0)
    end = np.concatenate([s.end for s in samples]) if samples else np.zeros(0)
    outcome = np.concatenate([s.outcome for s in samples]) if samples else np.zeros(0, np.uint8)
    inside = (begin >= window[0]) & (begin < window[1])
    begin, end, outcome = begin[inside], end[inside], outcome[inside]
    cpu_window_s = window[1] - window[0]
    window_s = max(cpu_window_s, float(end.max()) - window[0] if len(end) else 0.0)
    ok_mask = outcome == CODE[OK]
    latencies = (end[ok_mask] - begin[ok_mask]) * 1000.0
    ok = int(ok_mask.sum())
    errors = {kind: int((outcome == CODE[kind]).sum()) for kind in ERROR_CLASSES}
    errors = {kind: count for kind, count in errors.items() if count}
    examples: dict[str, str] = {}
    for part in samples:
        for kind, message in part.messages.items():
            if kind in errors:
                examples.setdefault(kind, message)
    calls = len(outcome)
    cpu = sum(s.cpu_s for s in samples)
    busiest = max((s.cpu_s for s in samples), default=0.0) / cpu_window_s
    cores = os.cpu_count() or 1
    saturated = busiest >= SATURATED_CORE or cpu / cpu_window_s >= SATURATED_CORE * cores
    throughput = ok / window_s
    items_per_s = throughput * items_per_request
    return StepReport(
        concurrency=step.concurrency,
        rate=step.rate,
        window_s=window_s,
        ok=ok,
        errors=errors,
        error_examples=examples,
        throughput_rps=throughput,
        items_per_s=items_per_s,
        latency_ms=_percentiles(latencies),
        client_cpu_ms_per_request=round(cpu / calls * 1000, 4) if calls else None,
        client_cpu_cores=cpu / cpu_window_s,
        busiest_worker_core=busiest,
        client_saturated=bool(saturated),
        machine_cpu_busy=round(machine.busy, 3) if machine.busy is not None else None,
        late_sends=sum(s.late for s in samples),
        cost_per_million_usd=pricing.per_million(items_per_s) if pricing is not None else None,
    )


def _percentiles(latencies_ms: np.ndarray[Any, Any]) -> dict[str, float | None]:
    if not len(latencies_ms):
        return {"p50": None, "p90": None, "p99": None, "max": None, "mean": None}
    p50, p90, p99 = np.percentile(latencies_ms, [50, 90, 99])
    return {
        "p50": round(float(p50), 3),
        "p90": round(float(p90), 3),
        "p99": round(float(p99), 3),
        "max": round(float(latencies_ms.max()), 3),
        "mean": round(float(latencies_ms.mean()), 3),
    }


@dataclass
class BenchReport:
    """A whole run: where it went, what it sent, and one `StepReport` per step."""

    model: str
    endpoint: str
    endpoint_url: str | None
    region: str | None
    target_model: str | None
    mode: str  # "closed-loop" or "fixed-rate"
    items_per_request: int
    request_bytes: int
    inputs: str  # "generated" or the file they came from
    duration_s: float
    warmup_s: float
    workers: int
    first_call_s: float
    pricing: Pricing | None
    steps: list[StepReport] = field(default_factory=list)
    started_at: str = ""

    @property
    def requests(self) -> int:
        return sum(step.requests for step in self.steps)

    @property
    def failed_fraction(self) -> float:
        failed = sum(step.failed for step in self.steps)
        return failed / self.requests if self.requests else 0.0

    @property
    def failed(self) -> bool:
        """More than 1% of the calls failed (or none was made)."""
        return self.requests == 0 or self.failed_fraction > FAILED_FRACTION

    def warnings(self) -> list[str]:
        notes = []
        if self.requests == 0:
            notes.append("no call ended inside a measured window: raise --duration")
        elif self.failed:
            failed = sum(step.failed for step in self.steps)
            classes: dict[str, int] = {}
            for step in self.steps:
                for kind, count in step.errors.items():
                    classes[kind] = classes.get(kind, 0) + count
            detail = ", ".join(f"{kind} {count}" for kind, count in sorted(classes.items()))
            notes.append(
                f"FAILED: {failed} of {self.requests} requests failed "
                f"({self.failed_fraction:.1%}, over the {FAILED_FRACTION:.0%} limit): {detail}"
            )
        saturated = [step.label() for step in self.steps if step.client_saturated]
        if saturated:
            notes.append(
                "client CPU saturated at "
                + ", ".join(saturated)
                + ": those numbers measure the load generator too (pass --workers, or run "
                "the client on a bigger machine)"
            )
        busy = [
            step.label()
            for step in self.steps
            if step.machine_cpu_busy is not None and step.machine_cpu_busy >= MACHINE_BUSY
        ]
        if busy and self.endpoint_url is not None:
            notes.append(
                "this machine's CPUs were busy at "
                + ", ".join(busy)
                + ": client and endpoint share them when the endpoint runs here"
            )
        late = [step.label() for step in self.steps if step.late_sends]
        if late:
            notes.append(
                "sends left late at "
                + ", ".join(late)
                + ": every allowed request was in flight (raise --concurrency to send on time)"
            )
        return notes

    def to_dict(self) -> dict[str, Any]:
        from deploy import __version__

        return {
            "format": FORMAT,
            "tool": f"deploy {__version__}",
            "started_at": self.started_at,
            "failed": self.failed,
            "failed_fraction": round(self.failed_fraction, 5),
            "warnings": self.warnings(),
            "model": self.model,
            "target_model": self.target_model,
            "endpoint": self.endpoint,
            "endpoint_url": self.endpoint_url,
            "region": self.region,
            "mode": self.mode,
            "items_per_request": self.items_per_request,
            "request_bytes": self.request_bytes,
            "inputs": self.inputs,
            "duration_s": self.duration_s,
            "warmup_s": self.warmup_s,
            "workers": self.workers,
            "first_call_s": round(self.first_call_s, 3),
            "pricing": self.pricing.to_dict() if self.pricing is not None else None,
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "system": platform.system(),
            },
            "steps": [step.to_dict() for step in self.steps],
        }
