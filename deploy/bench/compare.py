"""Two `deploy bench --json` reports side by side, for release gates.

Steps are matched by their load (concurrency, and rate for fixed-rate runs).
A step regresses when its throughput (items/s) falls, or its p99 latency
rises, by more than the allowed fraction; a new run that failed (over 1% of
its requests) is a regression by itself. Steps only one report has are
listed, not judged; no step in common is an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deploy.errors import BenchError

DEFAULT_MAX_REGRESSION = 0.10


def parse_fraction(text: str) -> float:
    """`10%` or `0.1` → 0.1."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < 10:
        raise BenchError(
            f"--max-regression {text!r} is not a fraction",
            where="--max-regression",
            fix="give a percentage such as 10% (or 0.1)",
        )
    return value


@dataclass(frozen=True)
class StepDelta:
    load: str
    base_items_per_s: float
    new_items_per_s: float
    base_p99_ms: float | None
    new_p99_ms: float | None
    throughput_change: float | None  # (new - base) / base
    p99_change: float | None
    regressions: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "load": self.load,
            "base_items_per_s": self.base_items_per_s,
            "new_items_per_s": self.new_items_per_s,
            "base_p99_ms": self.base_p99_ms,
            "new_p99_ms": self.new_p99_ms,
            "throughput_change": _rounded(self.throughput_change),
            "p99_change": _rounded(self.p99_change),
            "regressions": list(self.regressions),
        }


@dataclass
class Comparison:
    base: str
    new: str
    max_regression: float
    steps: list[StepDelta] = field(default_factory=list)
    only_in_base: list[str] = field(default_factory=list)
    only_in_new: list[str] = field(default_factory=list)
    new_failed: bool = False

    @property
    def regressed(self) -> bool:
        return self.new_failed or any(step.regressions for step in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "new": self.new,
            "max_regression": self.max_regression,
            "regressed": self.regressed,
            "new_failed": self.new_failed,
            "steps": [step.to_dict() for step in self.steps],
            "only_in_base": self.only_in_base,
            "only_in_new": self.only_in_new,
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def read_report(path: Path) -> dict[str, Any]:
    """A `deploy bench --json` document; errors name the file and what is wrong."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BenchError(
            f"cannot read the report: {exc.strerror or exc}",
            where=str(path),
            fix="pass the file `deploy bench ... --json` wrote",
        ) from exc
    except ValueError as exc:
        raise BenchError(f"is not JSON: {exc}", where=str(path)) from exc
    steps = document.get("steps") if isinstance(document, dict) else None
    if not isinstance(steps, list) or not all(
        isinstance(step, dict) and isinstance(step.get("concurrency"), int) for step in steps
    ):
        raise BenchError(
            "is not a `deploy bench --json` report (no list of steps with a concurrency)",
            where=str(path),
            fix="pass the output of `deploy bench MODEL --json`",
        )
    report: dict[str, Any] = document
    return report


def _load_key(step: dict[str, Any]) -> str:
    rate = step.get("rate_rps")
    if rate is None:
        return f"concurrency {step['concurrency']}"
    return f"{rate:g}/s (max {step['concurrency']} in flight)"


def _number(step: dict[str, Any], *keys: str) -> float | None:
    value: Any = step
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return float(value) if isinstance(value, (int, float)) else None


def compare(base_path: Path, new_path: Path, *, max_regression: float) -> Comparison:
    base, new = read_report(base_path), read_report(new_path)
    if base.get("model") != new.get("model"):
        raise BenchError(
            f"the reports measure different models ({base.get('model')!r} and "
            f"{new.get('model')!r})",
            where=f"{base_path}, {new_path}",
            fix="compare two runs of the same model",
        )
    base_steps = {_load_key(step): step for step in base["steps"]}
    new_steps = {_load_key(step): step for step in new["steps"]}
    common = [key for key in base_steps if key in new_steps]
    if not common:
        raise BenchError(
            "the reports have no load level in common "
            f"({', '.join(base_steps) or 'none'} against {', '.join(new_steps) or 'none'})",
            where=f"{base_path}, {new_path}",
            fix="run the new benchmark with the base's --concurrency (and --rate)",
        )
    result = Comparison(
        str(base_path),
        str(new_path),
        max_regression,
        only_in_base=[key for key in base_steps if key not in new_steps],
        only_in_new=[key for key in new_steps if key not in base_steps],
        new_failed=bool(new.get("failed")),
    )
    for key in common:
        result.steps.append(_delta(key, base_steps[key], new_steps[key], max_regression))
    return result


def _delta(key: str, base: dict[str, Any], new: dict[str, Any], limit: float) -> StepDelta:
    base_tp = _number(base, "items_per_s") or 0.0
    new_tp = _number(new, "items_per_s") or 0.0
    base_p99 = _number(base, "latency_ms", "p99")
    new_p99 = _number(new, "latency_ms", "p99")
    tp_change = (new_tp - base_tp) / base_tp if base_tp > 0 else None
    p99_change = (new_p99 - base_p99) / base_p99 if base_p99 and new_p99 is not None else None
    regressions = []
    if tp_change is not None and tp_change < -limit:
        regressions.append(f"throughput {tp_change:+.1%}")
    if p99_change is not None and p99_change > limit:
        regressions.append(f"p99 {p99_change:+.1%}")
    elif base_p99 is not None and new_p99 is None:
        regressions.append("no answered request")
    return StepDelta(
        key, base_tp, new_tp, base_p99, new_p99, tp_change, p99_change, tuple(regressions)
    )
