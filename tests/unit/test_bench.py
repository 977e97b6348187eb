"""`deploy bench` pieces without an endpoint: inputs, error classes, the load shapes
of one worker, step statistics, cost, the comparison and the chart."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from deploy.bench.compare import compare, parse_fraction
from deploy.bench.cost import Pricing, pricing_for
from deploy.bench.inputs import generate_inputs, items_per_request, parse_shapes
from deploy.bench.outcomes import CODE, classify
from deploy.bench.plot import Point, Series, nice_ticks, render_page
from deploy.bench.report import summarize
from deploy.bench.runner import MachineCpu, Plan, Step, jobs_for
from deploy.bench.worker import Job, Samples, run_job
from deploy.cli import app
from deploy.client import (
    EndpointError,
    InferenceTimeoutError,
    InvalidInputError,
    ModelError,
    ModelInfo,
    ResponseFormatError,
    RetriesExhaustedError,
    TensorSpec,
)
from deploy.errors import BenchError

BATCHING = ModelInfo(
    name="m",
    target_model="m-0.tar.gz",
    max_batch_size=8,
    inputs=(
        TensorSpec("IMAGE", "UINT8", (3, -1)),
        TensorSpec("TEXT", "BYTES", (1,)),
        TensorSpec("MASK", "BOOL", (2,), optional=True),
    ),
    outputs=(),
)
FLAT = ModelInfo("f", "f-0.tar.gz", 0, (TensorSpec("X", "FP16", (2, 2)),), ())


# -- inputs -------------------------------------------------------------------------


def test_generated_inputs_follow_the_specs_with_batch_rows_in_front() -> None:
    inputs = generate_inputs(BATCHING, batch=4, shapes=parse_shapes(["IMAGE=3x7"]))
    assert set(inputs) == {"IMAGE", "TEXT"}  # optional inputs are left out
    assert inputs["IMAGE"].shape == (4, 3, 7) and inputs["IMAGE"].dtype == np.uint8
    assert inputs["TEXT"].shape == (4, 1) and inputs["TEXT"].dtype == object
    assert items_per_request(BATCHING, inputs) == 4
    flat = generate_inputs(FLAT)
    assert flat["X"].shape == (2, 2) and flat["X"].dtype == np.float16
    assert items_per_request(FLAT, flat) == 1


@pytest.mark.parametrize(
    ("info", "kwargs", "message"),
    [
        (FLAT, {"batch": 2}, "does not batch"),
        (BATCHING, {"batch": 9}, "over the model's max_batch_size 8"),
        (BATCHING, {"shapes": {"NOPE": (1,)}}, "names no input"),
        (BATCHING, {"shapes": {"IMAGE": (4, 7)}}, "does not fit the declared shape"),
    ],
)
def test_generated_inputs_refuse_what_the_model_cannot_take(
    info: ModelInfo, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(BenchError, match=message):
        generate_inputs(info, **kwargs)


def test_shape_flags_need_name_and_positive_dims() -> None:
    assert parse_shapes(["A=1x2"]) == {"A": (1, 2)}
    for bad in ("A", "A=", "=3", "A=0x2", "A=x"):
        with pytest.raises(BenchError, match="is not NAME=DIMS"):
            parse_shapes([bad])


# -- error classes ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (EndpointError("slow down", code="ThrottlingException", status=400), "throttling"),
        (RetriesExhaustedError("x", attempts=1, status=429), "throttling"),
        (EndpointError("loading", code="ModelNotReadyException", status=429), "model_not_ready"),
        (EndpointError("boom", code="InternalFailure", status=500), "5xx"),
        (EndpointError("unavailable", code="ServiceUnavailable", status=503), "5xx"),
        (EndpointError("connection refused"), "connection"),
        (EndpointError("bad", code="ValidationError", status=400), "4xx"),
        (ModelError("triton 500", status=500), "5xx"),
        (ModelError("bad shape", status=400), "4xx"),
        (InferenceTimeoutError("late"), "timeout"),
        (ResponseFormatError("cut"), "bad_response"),
        (InvalidInputError("nope"), "4xx"),
        (RuntimeError("bug"), "other"),
    ],
)
def test_sdk_errors_sort_into_report_classes(error: Exception, kind: str) -> None:
    assert classify(error) == kind


# -- one worker -------------------------------------------------------------------------


def _job(threads: int, warmup: float, duration: float, interval: float | None = None) -> Job:
    start = time.monotonic() + 0.05
    return Job(
        threads=threads,
        start_at=start,
        warm_until=start + warmup,
        end_at=start + warmup + duration,
        interval_s=interval,
    )


def test_closed_loop_keeps_each_thread_busy_and_records_failures() -> None:
    calls: list[int] = []
    numbers = itertools.count()

    def call() -> None:
        number = next(numbers)  # atomic: threads share the counter
        calls.append(number)
        time.sleep(0.01)
        if number % 4 == 3:
            raise EndpointError("boom", code="InternalFailure", status=500)

    samples = run_job(call, _job(threads=2, warmup=0.0, duration=0.4))
    assert len(samples.begin) == len(calls) >= 20  # 2 threads x ~40 calls of 10 ms
    assert (samples.end - samples.begin).min() >= 0.01
    assert (samples.outcome == CODE["5xx"]).sum() == len(calls) // 4
    assert "boom" in samples.messages["5xx"]


def test_fixed_rate_times_from_the_schedule_so_queueing_shows() -> None:
    """One thread, sends every 10 ms, calls of 30 ms: the queue grows and the
    latency with it, although every call itself takes 30 ms."""

    def call() -> None:
        time.sleep(0.03)

    samples = run_job(call, _job(threads=1, warmup=0.0, duration=0.3, interval=0.01))
    assert len(samples.begin) == 30  # every scheduled send happens, late or not
    np.testing.assert_allclose(np.diff(samples.begin), 0.01, atol=1e-9)  # the schedule
    latencies = samples.end - samples.begin
    assert latencies[-1] > 0.5 > latencies[0]  # ~30 x 30 ms - 0.3 s behind by the end
    assert samples.late > 20


def test_work_splits_over_workers_and_fixed_rate_interleaves() -> None:
    plan = Plan((Step(5),), duration_s=1.0, warmup_s=0.5)
    jobs = jobs_for(Step(5), plan, 3, start_at=100.0)
    assert [job.threads for job in jobs] == [2, 2, 1]
    assert {(job.warm_until, job.end_at) for job in jobs} == {(100.5, 101.5)}
    assert [job.threads for job in jobs_for(Step(1), plan, 3, 100.0)] == [1, 0, 0]
    rated = jobs_for(Step(4, rate=100.0), plan, 2, start_at=0.0)
    assert [job.interval_s for job in rated] == [0.02, 0.02]
    assert [job.offset_s for job in rated] == [0.0, 0.01]


def test_worker_count_follows_concurrency_cores_and_connection_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    assert Plan((Step(1),)).processes() == 1
    assert Plan((Step(1), Step(32))).processes() == 4
    assert Plan((Step(512),)).processes() == 16  # 32 threads per process at most
    assert Plan((Step(8),), workers=64).processes() == 8


# -- statistics, cost ----------------------------------------------------------------------


def _samples(begin: list[float], latency: list[float], outcome: list[str], cpu: float) -> Samples:
    b = np.array(begin)
    return Samples(
        begin=b,
        end=b + np.array(latency),
        outcome=np.array([CODE[o] for o in outcome], np.uint8),
        cpu_s=cpu,
        messages={"timeout": "InferenceTimeoutError: late"},
    )


def test_step_counts_sends_inside_the_window_and_waits_out_the_last_answer() -> None:
    pricing = Pricing("ml.m5.xlarge", 2, "us-east-1", 0.23, "2024-06-01", "test")
    worker = _samples(
        [0.5, 1.0, 1.5, 2.0, 2.5, 3.2],  # the first is warm-up, the last after the window
        [0.1, 0.1, 0.2, 0.3, 0.9, 0.1],
        ["ok", "ok", "ok", "timeout", "ok", "ok"],
        cpu=0.2,
    )
    step = summarize(
        Step(2),
        [worker],
        MachineCpu(busy=0.5),
        items_per_request=4,
        pricing=pricing,
        window=(1.0, 3.0),
    )
    assert (step.ok, step.errors, step.requests) == (3, {"timeout": 1}, 4)
    assert step.window_s == pytest.approx(2.4)  # the answer to the send at 2.5 came at 3.4
    assert step.throughput_rps == pytest.approx(3 / 2.4)
    assert step.items_per_s == pytest.approx(4 * 3 / 2.4)
    assert step.latency_ms["max"] == pytest.approx(900)
    assert step.latency_ms["p50"] == pytest.approx(200)
    assert step.client_cpu_ms_per_request == pytest.approx(50)
    assert not step.client_saturated
    assert step.error_examples == {"timeout": "InferenceTimeoutError: late"}
    hourly = 2 * 0.23
    assert step.cost_per_million_usd == pytest.approx(hourly / (4 * 3 / 2.4 * 3600) * 1e6, 1e-3)


def test_a_worker_that_used_a_core_marks_the_client_saturated() -> None:
    worker = _samples([1.0], [0.1], ["ok"], cpu=1.9)
    step = summarize(
        Step(1), [worker], MachineCpu(), items_per_request=1, pricing=None, window=(1.0, 3.0)
    )
    assert step.client_saturated


def test_prices_come_from_the_table_deploy_up_uses() -> None:
    pricing = pricing_for("ml.m5.xlarge", 3, "us-east-1", source="--instance")
    assert pricing.hourly == pytest.approx(3 * 0.23)
    assert pricing.per_million(0) is None
    with pytest.raises(BenchError, match=r"no price for ml\.nope\.large"):
        pricing_for("ml.nope.large", 1, "us-east-1", source="--instance")


# -- compare -----------------------------------------------------------------------------


def _report(path: Path, steps: list[tuple[int, float, float]], *, failed: bool = False) -> Path:
    document = {
        "model": "addsub",
        "failed": failed,
        "steps": [
            {"concurrency": c, "rate_rps": None, "items_per_s": tp, "latency_ms": {"p99": p99}}
            for c, tp, p99 in steps
        ],
    }
    path.write_text(json.dumps(document))
    return path


def test_compare_flags_throughput_and_p99_regressions(tmp_path: Path) -> None:
    base = _report(tmp_path / "base.json", [(1, 100.0, 10.0), (8, 400.0, 20.0), (32, 500.0, 50)])
    new = _report(tmp_path / "new.json", [(1, 95.0, 10.5), (8, 300.0, 20.0), (16, 1.0, 1.0)])
    result = compare(base, new, max_regression=0.1)
    assert result.regressed
    by_load = {step.load: step for step in result.steps}
    assert by_load["concurrency 1"].regressions == ()
    assert by_load["concurrency 8"].regressions == ("throughput -25.0%",)
    assert result.only_in_base == ["concurrency 32"]
    assert result.only_in_new == ["concurrency 16"]
    slower = _report(tmp_path / "slower.json", [(1, 100.0, 12.0)])
    assert compare(base, slower, max_regression=0.1).steps[0].regressions == ("p99 +20.0%",)
    assert not compare(base, slower, max_regression=0.25).regressed


def test_compare_exit_codes(tmp_path: Path) -> None:
    base = _report(tmp_path / "base.json", [(1, 100.0, 10.0)])
    same = _report(tmp_path / "same.json", [(1, 101.0, 9.0)])
    worse = _report(tmp_path / "worse.json", [(1, 50.0, 10.0)])
    failed = _report(tmp_path / "failed.json", [(1, 100.0, 10.0)], failed=True)
    runner = CliRunner()
    ok = runner.invoke(app, ["bench", "--compare", str(base), str(same)])
    assert ok.exit_code == 0, ok.output
    assert "no regression" in ok.output
    bad = runner.invoke(app, ["bench", "--compare", str(base), str(worse), "--json"])
    assert bad.exit_code == 1
    assert json.loads(bad.stdout)["steps"][0]["regressions"] == ["throughput -50.0%"]
    assert runner.invoke(app, ["bench", "--compare", str(base), str(failed)]).exit_code == 1
    loose = ["bench", "--compare", str(base), str(worse), "--max-regression", "60%"]
    assert runner.invoke(app, loose).exit_code == 0


def test_compare_refuses_what_it_cannot_compare(tmp_path: Path) -> None:
    base = _report(tmp_path / "base.json", [(1, 100.0, 10.0)])
    other = _report(tmp_path / "other.json", [(8, 100.0, 10.0)])
    (tmp_path / "junk.json").write_text('{"steps": "no"}')
    runner = CliRunner()
    cases = [
        ([str(base), str(other)], "no load level in common"),
        ([str(base), str(tmp_path / "junk.json")], "is not a `deploy bench --json` report"),
        ([str(base), str(tmp_path / "missing.json")], "cannot read the report"),
    ]
    for paths, message in cases:
        result = runner.invoke(app, ["bench", "--compare", *paths])
        assert result.exit_code == 1
        assert message in result.output
    assert parse_fraction("10%") == pytest.approx(0.1)
    assert parse_fraction("0.25") == pytest.approx(0.25)
    with pytest.raises(BenchError, match="is not a fraction"):
        parse_fraction("ten")


# -- chart ---------------------------------------------------------------------------------


def test_chart_is_one_html_page_with_an_svg_and_the_numbers() -> None:
    series = [
        Series("p50", (Point(100.0, 1.0, "c1"), Point(800.0, 4.0, "c8"))),
        Series("p99", (Point(100.0, 3.0, "c1"), Point(800.0, 12.5, "c8"))),
    ]
    page = render_page(
        "bench <addsub>",
        series,
        notes=["client CPU saturated"],
        table=[["load"], ["c1"]],
        budget_ms=10.0,
    )
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 1
    assert "bench &lt;addsub&gt;" in page  # escaped
    assert page.count("<polyline") == 2 and page.count("<circle") == 4
    assert "budget 10 ms" in page and "client CPU saturated" in page
    assert "<script" not in page
    assert nice_ticks(87.0) == [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]


def test_pricing_follows_the_stage_for_its_endpoint_or_the_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deploy.cli.bench import _pricing

    config = tmp_path / "deploy.toml"
    config.write_text(
        '[stages.staging]\nendpoint_name = "shop-staging"\ninstance_type = "ml.g5.xlarge"\n'
        "[stages.staging.infra]\nmin_instance_count = 2\nmax_instance_count = 4\n"
        "initial_instance_count = 2\n"
    )
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    staged = _pricing(None, None, "us-east-1", "staging", stage_endpoint="shop-staging")
    assert staged is not None
    assert (staged.instance_type, staged.instance_count) == ("ml.g5.xlarge", 2)
    assert staged.source == "stage staging"
    # Another endpoint than the stage's: its instances are unknown, so no price.
    assert _pricing(None, None, "us-east-1", "staging", stage_endpoint="other") is None
    flagged = _pricing("ml.m5.xlarge", 3, "us-east-1", "staging", stage_endpoint="other")
    assert flagged is not None and flagged.hourly == pytest.approx(3 * 0.23)
    with pytest.raises(BenchError, match="--instance-count needs --instance"):
        _pricing(None, 3, "us-east-1", "staging", stage_endpoint="other")


def test_a_stage_of_inference_components_is_priced_by_its_instances(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several components share the instances: the cost per million is the instances'
    (at least the one serving the benchmark when the minimum is 0), not per component."""
    from deploy.catalogue.instances import hourly_price
    from deploy.cli.bench import _pricing

    config = tmp_path / "deploy.toml"
    config.write_text(
        '[stages.mixed]\nendpoint_name = "mixed"\ninstance_type = "ml.g5.12xlarge"\n'
        'hosting = "components"\n'
        "[stages.mixed.infra]\nmin_instance_count = 0\nmax_instance_count = 2\n"
        "[stages.mixed.models.detector]\nmin_copies = 2\n"
        "[stages.mixed.models.tabular]\nmin_copies = 0\n"
    )
    monkeypatch.setenv("DEPLOY_CONFIG", str(config))
    priced = _pricing(None, None, "us-east-1", "mixed", stage_endpoint="mixed")
    assert priced is not None
    price = hourly_price("ml.g5.12xlarge", "us-east-1")
    assert price is not None
    assert (priced.instance_count, priced.hourly) == (1, pytest.approx(price))
    assert priced.per_million(100.0) == pytest.approx(round(price / 360000 * 1e6, 4))
