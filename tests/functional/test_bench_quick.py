"""The benchmarks in bench/ still run: each one's `--quick` mode, as a subprocess.

A change that breaks a benchmark (an API it calls, a stand-in it builds)
breaks this test instead of the next `make bench`. The numbers are not
checked, only that the report is whole and carries its same-run baseline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_quick(script: str, *args: str, timeout: float = 120) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--quick", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def positive(section: dict[str, Any], *keys: str) -> None:
    for key in keys:
        value = section[key]
        assert isinstance(value, int | float) and value > 0, (key, section)


def test_front_door_bench_quick_reports_the_handler_against_its_baselines() -> None:
    report = run_quick("front_door.py")

    assert report["benchmark"] == "front_door" and report["quick"] is True
    request = report["request"]
    assert request["fp32_values"] > 0
    positive(
        request,
        "request_json_bytes",
        "answer_json_bytes",
        "front_door_handle_ms",
        "baseline_json_parse_and_dump_ms",
        "baseline_sdk_binary_encode_decode_ms",
    )
    ratio = request["front_door_handle_ms"] / request["baseline_json_parse_and_dump_ms"]
    assert request["front_door_vs_json_floor"] == pytest.approx(ratio, abs=0.01)
    positive(
        report["cold_start"],
        "interpreter_start_ms",
        "import_handler_module_ms",
        "first_call_setup_ms",
        "baseline_import_boto3_ms",
    )


def test_package_bench_quick_reports_deploy_package_against_tar_and_copy() -> None:
    report = run_quick("package.py")

    assert report["repository"]["models"] == 8 and report["archive_bytes"] > 0
    positive(
        report["seconds"],
        "deploy_package_s",
        "plain_copy_s",
        "read_write_copy_s",
        "gnu_tar_czf_s",
        "python_tarfile_gz_s",
        "noop_rerun_s",
        "noop_rerun_cli_s",
    )
    assert set(report["ratios"]) == {
        "vs_gnu_tar_czf",
        "vs_python_tarfile_gz",
        "vs_plain_copy",
        "vs_read_write_copy",
    }
    assert set(report["met"]) == set(report["targets"])


def test_codec_bench_quick_reports_the_sdk_against_tritonclient_and_memcpy() -> None:
    report = run_quick("codec.py", "--skip-endpoint")

    assert report["benchmark"] == "codec"
    cases = [case["case"] for case in report["codec"]]
    assert any(c.startswith("FP32") for c in cases) and any(c.startswith("BYTES") for c in cases)
    for case in report["codec"]:
        positive(case["seconds"], "sdk", "tritonclient", "memcpy")
        positive(case, "speedup_vs_tritonclient", "ratio_to_memcpy")
    assert report["targets"]["fp32_ge_1mb_min_speedup_vs_tritonclient"] > 0
    assert report["endpoint_overhead"] == {"measured": False, "why": "--skip-endpoint"}


@pytest.mark.slow
def test_client_bench_quick_reports_every_path_against_raw_http() -> None:
    report = run_quick("client.py")

    assert report["benchmark"] == "client" and report["rounds"] == 1
    assert set(report["bodies"]) == {"small", "0.6MB", "4.8MB"}
    for body in report["bodies"].values():
        positive(body["cpu_ms_per_call"], "raw_http", "sdk", "sdk_transport", "boto3")
        assert body["ratios"], body
    assert report["targets"] and all(isinstance(v, bool) for v in report["targets"].values())


@pytest.mark.slow
def test_load_generator_bench_quick_reports_deploy_bench_against_raw_http() -> None:
    report = run_quick("load_generator.py")

    assert report["benchmark"] == "load_generator"
    assert set(report["bodies"]) == {"small", "1MB"}
    for body in report["bodies"].values():
        for path in ("raw_http", "deploy_bench"):
            assert set(body[path]) == {"c1", "c8", "c32"}
            for step in body[path].values():
                assert step["errors"] == 0, step
                positive(step, "req_per_s", "client_cpu_ms_per_request")
        positive(body["deploy_bench_vs_raw_client_cpu"], "c1", "c8", "c32")


@pytest.mark.slow
@pytest.mark.moto
def test_lifecycle_bench_quick_reports_uploads_and_incremental_up_runs() -> None:
    report = run_quick("lifecycle.py", timeout=300)

    upload = report["upload"]
    positive(
        upload,
        "deploy_uploader_s",
        "baseline_boto3_upload_file_s",
        "baseline_boto3_upload_file_sha256_s",
        "ratio_vs_boto3",
        "resume_after_half_s",
        "resume_parts_reused",
    )
    up = report["up"]
    assert (up["first_up_uploads"], up["rerun_unchanged_uploads"]) == (up["models"], 0)
    assert up["one_model_changed_uploads"] == 1
    assert up["one_model_changed_infra_action"] == "none"
    positive(up, "first_up_s", "rerun_unchanged_s", "one_model_changed_s")


# -- benchmarks that start tritonserver (tens of seconds each on a small machine) ----


@pytest.mark.slow
@pytest.mark.triton
def test_codec_bench_quick_measures_the_endpoint_overhead_against_bare_boto3() -> None:
    report = run_quick("codec.py", "--calls", "20", timeout=300)

    overhead = report["endpoint_overhead"]
    assert overhead["measured"] is True, overhead
    assert overhead["calls"] == 20
    positive(overhead, "bare_boto3_invoke_endpoint_ms", "endpoint_infer_ms", "overhead_ratio")


@pytest.mark.slow
@pytest.mark.triton
def test_local_endpoint_bench_quick_reports_every_part_against_its_baseline() -> None:
    report = run_quick("local_endpoint.py", "--seconds", "0.5", "--model-mb", "20", timeout=400)

    assert report["benchmark"] == "local_endpoint"
    assert {"throughput", "cold_load", "large_body", "targets"} <= set(report), list(report)
    for level in ("c1", "c8"):
        for path in ("front_end", "direct"):  # the direct path is the baseline
            run = report["throughput"][level][path]
            assert run["requests"] > 0 and run["errors"] == 0, (level, path, run)
    positive(report["throughput"]["c8"], "front_end_vs_direct_throughput")
    for variant in report["cold_load"].values():
        positive(variant, "cold_vs_extract")
    assert report["machine"]["cpus"] and report["machine"]["cpu_model"]
    assert report["commit"]
    cells = report["targets"]["large_body_front_end_vs_minimal_hop_cpu<=1.3"]
    assert set(cells) == {f"{m}_c{c}" for m in ("sum", "echo") for c in (1, 4)}
    for model in ("sum", "echo"):
        for level in ("c1", "c4"):
            cell = report["large_body"][model][level]
            assert len(cell["rounds"]["front_end"]) == len(cell["rounds"]["minimal_hop"]) == 1
            assert cell["front_end"]["errors"] == 0, cell["front_end"]
            positive(cell, "front_end_vs_minimal_hop_cpu_worst_round")
            assert isinstance(cell["target"]["met_in_every_round"], bool)


@pytest.mark.slow
@pytest.mark.triton
def test_soak_bench_quick_answers_every_call_with_and_without_a_model_limit() -> None:
    report = run_quick("soak_local_endpoint.py", timeout=400)

    for run in (report["max_loaded_models_1"], report["baseline_no_model_limit"]):
        assert run["calls"] > 0 and run["final_status"] == {"200": run["calls"]}, run
        assert run["hung_clients"] == 0 and run["errors_5xx"] == 0
    assert all(report["targets"].values()), report["targets"]


@pytest.mark.slow
@pytest.mark.triton
def test_adapter_batching_bench_quick_reports_the_endpoint_against_raw_torch() -> None:
    report = run_quick("adapter_batching.py", timeout=300)

    assert set(report["endpoint_median"]) == {"mlp_batched", "mlp_alone"}
    for model in report["endpoint_median"].values():
        positive(model, "rows_per_s", "mean_rows_per_model_call")
    assert report["endpoint_median"]["mlp_alone"]["mean_rows_per_model_call"] == 1.0
    positive(report["raw_torch_baseline_rows_per_s_median"], "batch_1", "batch_4")
    positive(report["ratio_to_raw_torch_batch_1"], "mlp_batched", "mlp_alone")


@pytest.mark.slow
@pytest.mark.triton
def test_neuron_batching_bench_quick_reports_concat_against_per_request() -> None:
    report = run_quick("neuron_batching.py", timeout=300)

    assert set(report["results"]) == {"c1", "c8"}
    for level in report["results"].values():
        for model in ("concat", "per_request"):
            positive(level[model], "rps", "requests")
        positive(level, "concat_vs_baseline_rps")


@pytest.mark.slow
@pytest.mark.triton
@pytest.mark.moto
def test_async_round_trip_bench_quick_reports_the_sdk_against_s3_direct() -> None:
    report = run_quick("async_round_trip.py", timeout=300)

    assert report["rounds"] == 1 and report["request_bytes"] > 4_000_000
    positive(report["median_seconds"], "sdk_round_trip", "s3_direct")
    positive(report, "round_trip_over_s3_direct")
    assert report["endpoint"]["failed"] == 0 and report["endpoint"]["completed"] >= 1
    assert report["objects_left_in_the_bucket"] == 0
