"""One load test from start to report: model metadata, probe, workers, steps.

info = model_info(target)                       # what the manifest declares
inputs = generate_inputs(info, batch=8)         # or read from a file
report = benchmark(target, inputs, plan, info=info)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from deploy.bench.cost import Pricing
from deploy.bench.inputs import items_per_request
from deploy.bench.report import BenchReport, StepReport, summarize
from deploy.bench.runner import MachineCpu, Plan, Step, probe, run_steps, worker_pool
from deploy.bench.target import Target
from deploy.bench.worker import Samples
from deploy.client import ClientError, ModelInfo
from deploy.errors import BenchError


def model_info(target: Target) -> ModelInfo | None:
    """What the manifest (given, or found as the SDK finds it) says about the model.

    An unknown name is an error here, before anything else runs; None means no
    manifest describes the model, which is fine when the inputs come from a file.
    """
    try:
        with target.open() as endpoint:
            info = endpoint.model_info(target.model)
    except ClientError as exc:
        raise BenchError(
            f"cannot read the manifest: {exc.message}",
            where=exc.where or target.describe(),
            fix=exc.fix or "check --manifest",
        ) from exc
    if info is None and target.target_model is None and not target.model.endswith(".tar.gz"):
        # The SDK cannot route the name: its error lists the known models, or why
        # no manifest was found. No inputs are needed to get it.
        probe(target, {})
    return info


def request_bytes(inputs: Mapping[str, Any]) -> int:
    from deploy.client import encode

    return len(encode(inputs).body)


def benchmark(
    target: Target,
    inputs: Mapping[str, Any],
    plan: Plan,
    *,
    info: ModelInfo | None,
    pricing: Pricing | None = None,
    inputs_label: str = "generated",
    on_step: Callable[[StepReport], None] | None = None,
) -> BenchReport:
    """Probe, then run every step of `plan` from worker processes."""
    if not plan.steps:
        raise BenchError("nothing to run: no load levels", fix="pass --concurrency or --rate")
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    first = probe(target, inputs)
    items = items_per_request(info, inputs)
    processes = plan.processes()
    report = BenchReport(
        model=target.model,
        endpoint=target.endpoint,
        endpoint_url=target.endpoint_url,
        region=target.region,
        target_model=target.target_model or (info.target_model if info is not None else None),
        mode="closed-loop" if all(step.rate is None for step in plan.steps) else "fixed-rate",
        items_per_request=items,
        request_bytes=request_bytes(inputs),
        inputs=inputs_label,
        duration_s=plan.duration_s,
        warmup_s=plan.warmup_s,
        workers=processes,
        first_call_s=first.seconds,
        pricing=pricing,
        started_at=started_at,
    )

    def finished(
        step: Step, samples: list[Samples], machine: MachineCpu, window: tuple[float, float]
    ) -> None:
        result = summarize(
            step,
            samples,
            machine,
            items_per_request=items,
            pricing=pricing,
            window=window,
        )
        report.steps.append(result)
        if on_step is not None:
            on_step(result)

    with worker_pool(target, inputs, processes) as pool:
        run_steps(pool, plan, finished)
    return report
