"""Config search: every combination of a few config fields, served and measured locally.

    run_sweep(repo, "addsub", parse_axes(["max_batch_size=1,8", "instances=1,2"]), plan,
              budget_ms=50)

Each variant is the model's config with the swept fields changed, written
into a private copy of the model's folders (hard links, so large weights are
not copied; the config itself is a new file), validated and packaged there:
new content, new archive name, as SageMaker's cache needs. All variants are
prepared before anything runs, so a variant Triton would refuse is an error
up front. One local endpoint (real tritonserver) then serves them one at a
time (one model loaded at a time) while `deploy bench` measures each over the
same load levels. The best variant is the one with the most inferences per
second at a load where p99 stays within the budget and at most 1% of the
requests failed.

Swept fields:

    max_batch_size       max_batch_size (the model must batch already)
    instances            count of every instance_group (one group is added if none)
    max_queue_delay_us   dynamic_batching.max_queue_delay_microseconds (enables it)
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deploy.bench.cost import Pricing
from deploy.bench.report import FAILED_FRACTION, BenchReport, StepReport
from deploy.bench.runner import Plan
from deploy.errors import BenchError

AXES: dict[str, str] = {
    "max_batch_size": "max_batch_size",
    "instances": "instance_group count",
    "max_queue_delay_us": "dynamic_batching.max_queue_delay_microseconds",
}
_MINIMUM = {"max_batch_size": 1, "instances": 1, "max_queue_delay_us": 0}
SWEEP_ENDPOINT = "bench-sweep"

Variant = dict[str, int]


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple[int, ...]


def parse_axes(specs: Sequence[str]) -> list[Axis]:
    """`--sweep KEY=V1,V2` flags as axes; unknown keys and bad values name the flag."""
    axes: list[Axis] = []
    known = ", ".join(AXES)
    for spec in specs:
        key, _, raw = spec.partition("=")
        key = key.strip()
        if key not in AXES:
            raise BenchError(
                f"--sweep {spec!r}: unknown field {key!r}",
                where="--sweep",
                fix=f"sweep one of: {known} (as KEY=V1,V2)",
            )
        if any(axis.name == key for axis in axes):
            raise BenchError(
                f"--sweep {key} is given twice", where="--sweep", fix="list its values once"
            )
        try:
            values = tuple(int(value) for value in raw.split(",") if value.strip())
        except ValueError:
            values = ()
        if not values or any(value < _MINIMUM[key] for value in values):
            raise BenchError(
                f"--sweep {spec!r}: values must be whole numbers >= {_MINIMUM[key]}",
                where="--sweep",
                fix=f"e.g. --sweep {key}={_MINIMUM[key] or 0},{max(_MINIMUM[key], 1) * 8}",
            )
        axes.append(Axis(key, tuple(dict.fromkeys(values))))
    return axes


def parse_budget(text: str) -> float:
    """`50ms`, `0.05s` or `50` (milliseconds) → milliseconds."""
    raw = text.strip().lower()
    scale = 1.0
    if raw.endswith("ms"):
        raw = raw[:-2]
    elif raw.endswith("s"):
        raw, scale = raw[:-1], 1000.0
    try:
        value = float(raw) * scale
    except ValueError:
        value = 0.0
    if value <= 0:
        raise BenchError(
            f"--latency-budget {text!r} is not a duration",
            where="--latency-budget",
            fix="give the p99 budget as 50ms or 0.05s",
        )
    return value


def variants(axes: Sequence[Axis]) -> list[Variant]:
    names = [axis.name for axis in axes]
    return [
        dict(zip(names, values, strict=True))
        for values in itertools.product(*(axis.values for axis in axes))
    ]


_SHORT = {"max_batch_size": "batch", "instances": "inst", "max_queue_delay_us": "delay"}


def describe(variant: Mapping[str, int], *, short: bool = False) -> str:
    """`max_batch_size=8 instances=2` (short, for tables: `batch=8 inst=2`, delay in µs)."""
    names = _SHORT if short else {key: key for key in variant}
    return " ".join(f"{names[key]}={value}" for key, value in variant.items()) or "as configured"


def apply(config: Any, variant: Mapping[str, int], *, where: str) -> Any:
    """A copy of `config` (a ModelConfig) with the variant's fields set."""
    changed = type(config)()
    changed.CopyFrom(config)
    ensemble = changed.platform == "ensemble"
    for key, value in variant.items():
        if key == "max_batch_size":
            if config.max_batch_size == 0:
                raise BenchError(
                    "the model does not batch (max_batch_size 0): another max_batch_size "
                    "would change its inputs' shapes",
                    where=where,
                    fix="sweep max_batch_size only for a model that batches",
                )
            changed.max_batch_size = value
        elif key == "instances":
            if ensemble:
                raise BenchError(
                    "an ensemble has no instances of its own",
                    where=where,
                    fix="sweep instances of the models its steps call",
                )
            if not changed.instance_group:
                changed.instance_group.add()
            for group in changed.instance_group:
                group.count = value
        elif key == "max_queue_delay_us":
            if ensemble or changed.HasField("sequence_batching"):
                raise BenchError(
                    "dynamic batching does not apply to "
                    + ("an ensemble" if ensemble else "a model with sequence_batching"),
                    where=where,
                    fix="sweep max_queue_delay_us of a model without them",
                )
            changed.dynamic_batching.max_queue_delay_microseconds = value
    return changed


@dataclass(frozen=True)
class PreparedVariant:
    variant: Variant
    target_model: str
    info: Any  # deploy.client.ModelInfo of this variant's archive
    config_text: str


@dataclass
class VariantResult:
    variant: Variant
    target_model: str
    config_text: str
    report: BenchReport | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": dict(self.variant),
            "target_model": self.target_model,
            "error": self.error,
            "report": self.report.to_dict() if self.report is not None else None,
        }


@dataclass
class SweepReport:
    model: str
    repository: str
    axes: list[Axis]
    budget_ms: float | None
    results: list[VariantResult] = field(default_factory=list)

    def best(self) -> tuple[VariantResult, StepReport] | None:
        """Most inferences/s at a load within the budget with at most 1% failed."""
        candidates = [
            (result, step)
            for result in self.results
            if result.report is not None
            for step in result.report.steps
            if within(step, self.budget_ms)
        ]
        if not candidates:
            return None
        return max(
            candidates, key=lambda pair: (pair[1].items_per_s, -(pair[1].latency_ms["p99"] or 0))
        )

    def to_dict(self) -> dict[str, Any]:
        chosen = self.best()
        return {
            "model": self.model,
            "repository": self.repository,
            "sweep": {axis.name: list(axis.values) for axis in self.axes},
            "latency_budget_ms": self.budget_ms,
            "best": None
            if chosen is None
            else {
                "variant": dict(chosen[0].variant),
                "target_model": chosen[0].target_model,
                "concurrency": chosen[1].concurrency,
                "rate_rps": chosen[1].rate,
                "items_per_s": round(chosen[1].items_per_s, 2),
                "p99_ms": chosen[1].latency_ms["p99"],
                "cost_per_million_usd": chosen[1].cost_per_million_usd,
                "config": chosen[0].config_text,
            },
            "variants": [result.to_dict() for result in self.results],
        }


def within(step: StepReport, budget_ms: float | None) -> bool:
    p99 = step.latency_ms["p99"]
    if p99 is None or step.ok == 0 or step.error_fraction > FAILED_FRACTION:
        return False
    return budget_ms is None or p99 <= budget_ms


# -- preparing the variants ---------------------------------------------------------------


def _link_or_copy(source: str, destination: str) -> str:
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)
    return destination


@contextmanager
def prepared_store(
    repository: Path, model: str, axes: Sequence[Axis]
) -> Iterator[tuple[Path, list[PreparedVariant], Any]]:
    """A temporary store holding one archive per variant; yields (store, variants, the
    model's original ModelConfig). Removed when the block ends."""
    from deploy.client import Manifest
    from deploy.packaging import package_repository
    from deploy.repository import CONFIG_FILE, format_config, load_repository
    from deploy.validation import validate_repository

    source = load_repository(repository)
    original = source.models.get(model)
    if original is None:
        known = ", ".join(sorted(source.models)) or "none"
        raise BenchError(
            f"model {model!r} is not in the repository",
            where=str(repository),
            fix=f"its models: {known} (or pass --repository)",
        )
    where = str(original.config_path or original.path)
    chosen = variants(axes)
    configs = [apply(original.config, variant, where=where) for variant in chosen]
    work = Path(tempfile.mkdtemp(prefix="deploy-bench-sweep-"))
    try:
        copy, packages, store = work / "repo", work / "package", work / "store"
        store.mkdir()
        for name in source.closure(model):
            shutil.copytree(source.models[name].path, copy / name, copy_function=_link_or_copy)
        config_path = copy / model / CONFIG_FILE
        prepared = []
        for variant, config in zip(chosen, configs, strict=True):
            text = format_config(config)
            # A new file, never a write through the hard link to the original.
            config_path.unlink(missing_ok=True)
            config_path.write_text(text, encoding="utf-8")
            report = validate_repository(copy)
            if report.errors:
                first = report.errors[0]
                raise BenchError(
                    f"variant {describe(variant)}: {first.message}",
                    where=f"{where}: {first.field}" if first.field else where,
                    fix=first.fix,
                )
            packaged = package_repository(copy, packages)
            entry = packaged.manifest.models[model]
            _link_or_copy(str(packages / entry.target_model), str(store / entry.target_model))
            info = Manifest.from_path(packaged.manifest_path).find(model)
            prepared.append(PreparedVariant(dict(variant), entry.target_model, info, text))
        yield store, prepared, original.config
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- running them -------------------------------------------------------------------------


def run_sweep(
    repository: Path,
    model: str,
    axes: Sequence[Axis],
    plan: Plan,
    *,
    budget_ms: float | None,
    batch: int = 1,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    timeout_s: float = 30.0,
    pricing: Pricing | None = None,
    on_variant: Callable[[VariantResult], None] | None = None,
) -> SweepReport:
    """Prepare every variant, then serve and measure each on one local endpoint."""
    from deploy.bench.benchmark import benchmark
    from deploy.bench.inputs import generate_inputs
    from deploy.bench.target import Target
    from deploy.client import Manifest
    from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint

    if not axes:
        raise BenchError("nothing to sweep", fix="pass --sweep KEY=V1,V2")
    report = SweepReport(model, str(repository), list(axes), budget_ms)
    with prepared_store(repository, model, axes) as (store, prepared, _):
        inputs = [generate_inputs(item.info, batch=batch, shapes=shapes) for item in prepared]
        options = EndpointOptions(endpoint_name=SWEEP_ENDPOINT, max_models=1)
        with LocalEndpoint(store, options=options) as endpoint:
            for item, arrays in zip(prepared, inputs, strict=True):
                manifest = Manifest("multi-model", {model: item.info}, f"variant {item.variant}")
                target = Target(
                    SWEEP_ENDPOINT,
                    model,
                    endpoint.url,
                    manifest=manifest,
                    target_model=item.target_model,
                    timeout_s=timeout_s,
                )
                result = VariantResult(item.variant, item.target_model, item.config_text)
                try:
                    result.report = benchmark(target, arrays, plan, info=item.info, pricing=pricing)
                except BenchError as exc:
                    result.error = str(exc)  # e.g. a variant the server refuses to load
                report.results.append(result)
                if on_variant is not None:
                    on_variant(result)
    return report


def write_best(report: SweepReport, repository: Path) -> Path | None:
    """The best variant's config.pbtxt into the model's folder (atomically); None when
    no variant met the budget."""
    from deploy._files import atomic_write_bytes
    from deploy.repository import CONFIG_FILE

    chosen = report.best()
    if chosen is None:
        return None
    path = repository / report.model / CONFIG_FILE
    atomic_write_bytes(path, chosen[0].config_text.encode("utf-8"))
    return path
