"""Per-model call metrics of the local endpoint, served at `GET /metrics`.

SageMaker publishes no per-model metrics for a multi-model endpoint, and
tritonserver's own metrics port is not exposed (its names are content hashes,
not the names callers use). The front end counts each InvokeEndpoint call
under its TargetModel: calls, errors by class, request and response bytes, and
a latency histogram with fixed buckets. `/metrics` labels them with the
manifest's logical name (`model`) and the TargetModel (`target_model`).

The Prometheus text format is written here, not with `prometheus_client`:
that library is not a dependency of the project, and its per-call cost (a lock
and label lookup per observation) is more than the front end's CPU budget per
request allows. Recording a call is a dict lookup, a few integer additions and
a bisect, on the event loop only (no lock). `parse` reads the text back (for
`deploy status --local`) and `quantile` estimates p50/p99 from a histogram as
Prometheus's `histogram_quantile` does.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Iterable, Mapping

# Upper bounds of the latency buckets, in seconds (+Inf follows).
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# Error classes: 4xx the caller's fault; ModelError (424) the model's; other 5xx the
# endpoint's; ModelNotReady (429) and ServiceUnavailable (503) tell the caller to retry.
CLASSES = ("client", "model", "server", "throttled")
_CLIENT, _MODEL, _SERVER, _THROTTLED = range(4)
# Distinct TargetModels kept; calls naming more go under OTHER (callers choose the name).
MAX_TARGETS = 1000
OTHER = "(other)"

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _error_class(status: int) -> int:
    if status in (429, 503):
        return _THROTTLED
    if status == 424:
        return _MODEL
    return _SERVER if status >= 500 else _CLIENT


class _Counts:
    __slots__ = ("buckets", "calls", "errors", "received", "seconds", "sent")

    def __init__(self) -> None:
        self.calls = 0
        self.errors = [0, 0, 0, 0]
        self.received = 0
        self.sent = 0
        self.seconds = 0.0
        self.buckets = [0] * (len(BUCKETS) + 1)  # per bucket, not cumulative


class ModelMetrics:
    """Counts per TargetModel; touched on the event loop only."""

    def __init__(self) -> None:
        self._targets: dict[bytes, _Counts] = {}

    def observe(self, target: bytes, status: int, received: int, sent: int, seconds: float) -> None:
        counts = self._targets.get(target)
        if counts is None:
            counts = self._add(target)
        counts.calls += 1
        if status >= 400:
            counts.errors[_error_class(status)] += 1
        counts.received += received
        counts.sent += sent
        counts.seconds += seconds
        counts.buckets[bisect_left(BUCKETS, seconds)] += 1

    def _add(self, target: bytes) -> _Counts:
        if len(self._targets) >= MAX_TARGETS:
            target = OTHER.encode()
            counts = self._targets.get(target)
            if counts is not None:
                return counts
        counts = self._targets[target] = _Counts()
        return counts

    def exposition(self, names: Mapping[str, str]) -> bytes:
        """The Prometheus text format; `names` maps a TargetModel to its logical name
        (a TargetModel the manifest does not name gets model="")."""
        rows = []
        for raw, counts in sorted(self._targets.items()):
            target = raw.decode("utf-8", "replace")
            labels = f'model="{_escape(names.get(target, ""))}",target_model="{_escape(target)}"'
            rows.append((labels, counts))
        lines: list[str] = []

        def family(name: str, kind: str, help_text: str) -> None:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")

        family("deploy_invocations_total", "counter", "InvokeEndpoint calls answered.")
        lines += [f"deploy_invocations_total{{{labels}}} {c.calls}" for labels, c in rows]
        family(
            "deploy_invocation_errors_total",
            "counter",
            "Calls answered with an error, by class: client (4xx), model (ModelError), "
            "server (5xx), throttled (429, 503).",
        )
        for labels, c in rows:
            for index, name in enumerate(CLASSES):
                lines.append(
                    f'deploy_invocation_errors_total{{{labels},class="{name}"}} {c.errors[index]}'
                )
        family("deploy_request_bytes_total", "counter", "Request payload bytes received.")
        lines += [f"deploy_request_bytes_total{{{labels}}} {c.received}" for labels, c in rows]
        family("deploy_response_bytes_total", "counter", "Response payload bytes sent.")
        lines += [f"deploy_response_bytes_total{{{labels}}} {c.sent}" for labels, c in rows]
        family(
            "deploy_invocation_seconds",
            "histogram",
            "Time from a call's request head to its answer, in seconds.",
        )
        for labels, c in rows:
            total = 0
            for bound, count in zip((*BUCKETS, math.inf), c.buckets, strict=True):
                total += count
                le = "+Inf" if bound == math.inf else repr(bound)
                lines.append(f'deploy_invocation_seconds_bucket{{{labels},le="{le}"}} {total}')
            lines.append(f"deploy_invocation_seconds_sum{{{labels}}} {c.seconds!r}")
            lines.append(f"deploy_invocation_seconds_count{{{labels}}} {c.calls}")
        return ("\n".join(lines) + "\n").encode()


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# -- reading it back -----------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')
_UNESCAPE = re.compile(r"\\(.)")

Sample = tuple[str, dict[str, str], float]


class ExpositionError(ValueError):
    """A line that is not the Prometheus text format."""


def parse(text: str) -> list[Sample]:
    """Samples of the text format: (name, labels, value); comments skipped."""
    samples = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            raise ExpositionError(f"line {number} is not a sample: {line!r}")
        name, label_text, value = match.groups()
        labels: dict[str, str] = {}
        if label_text:
            end = 0
            for label in _LABEL.finditer(label_text):
                if label.start() != end:
                    raise ExpositionError(f"line {number} has malformed labels: {line!r}")
                labels[label[1]] = _UNESCAPE.sub(lambda m: "\n" if m[1] == "n" else m[1], label[2])
                end = label.end()
            if end != len(label_text):
                raise ExpositionError(f"line {number} has malformed labels: {line!r}")
        samples.append((name, labels, float(value)))
    return samples


def quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float | None:
    """The q-quantile of a cumulative histogram [(upper bound, count)], interpolated
    linearly inside its bucket (as Prometheus's histogram_quantile); None: no calls.
    A quantile in the +Inf bucket is the largest finite bound."""
    ordered = sorted(buckets)
    if not ordered or ordered[-1][1] == 0:
        return None
    rank = q * ordered[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if bound == math.inf:
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def per_model(samples: Iterable[Sample]) -> list[dict[str, object]]:
    """One row per (model, target_model): calls, errors by class, bytes, p50/p99 seconds."""
    rows: dict[tuple[str, str], dict[str, object]] = {}
    buckets: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for name, labels, value in samples:
        key = (labels.get("model", ""), labels.get("target_model", ""))
        row = rows.setdefault(
            key,
            {
                "model": key[0] or None,
                "target_model": key[1],
                "calls": 0,
                "errors": dict.fromkeys(CLASSES, 0),
                "request_bytes": 0,
                "response_bytes": 0,
            },
        )
        if name == "deploy_invocations_total":
            row["calls"] = int(value)
        elif name == "deploy_invocation_errors_total":
            errors = row["errors"]
            assert isinstance(errors, dict)
            errors[labels.get("class", "")] = int(value)
        elif name == "deploy_request_bytes_total":
            row["request_bytes"] = int(value)
        elif name == "deploy_response_bytes_total":
            row["response_bytes"] = int(value)
        elif name == "deploy_invocation_seconds_bucket":
            le = labels.get("le", "+Inf")
            buckets.setdefault(key, []).append((math.inf if le == "+Inf" else float(le), value))
    for key, row in rows.items():
        histogram = buckets.get(key, [])
        row["p50_seconds"] = quantile(0.5, histogram)
        row["p99_seconds"] = quantile(0.99, histogram)
    return [rows[key] for key in sorted(rows)]
