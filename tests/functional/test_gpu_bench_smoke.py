"""A short run of `bench/gpu_local_endpoint.py` on this machine (no GPU needed).

`--model small` swaps ResNet-50 for a small convolutional net of the same
input shape; the KIND_GPU instance group then runs on the CPU. The run must
package and serve the model, answer as raw torch does, measure every cell
against its raw-torch baseline and read the batch of the model call from
the answers. The numbers themselves belong in docs/measurements/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.triton, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def run_script(script: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """A bench/ script as a subprocess from the repository root, with this checkout first."""
    return subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


def test_quick_gpu_bench_run_reports_every_cell_and_round(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    result = run_script(
        ROOT / "bench" / "gpu_local_endpoint.py",
        "--quick",
        "--out",
        out,
        # The pipelined adapter a GPU gets by default, here on the CPU.
        "--adapter-parameter",
        "DEPLOY_ADAPTER_PIPELINE=1",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert json.loads(out.read_text()) == report
    assert report["max_abs_diff_endpoint_vs_raw_torch"]["x1"] < 1e-4, report
    cells = [f"batch_{b}/concurrency_{c}" for b in (1, 8) for c in (1, 8)]
    assert sorted(report["raw_torch_baseline_median"]) == sorted(cells)
    assert sorted(report["ratio_endpoint_to_raw_torch"]) == sorted(f"x1/{c}" for c in cells)
    for cell in cells:
        served = report["endpoint_median"][f"x1/{cell}"]
        assert served["images_per_s"] > 0 and served["requests"] > 0, served
        batch = int(cell.split("/")[0].removeprefix("batch_"))
        # Read from the answers: a model call holds at least the request's own images.
        assert batch <= served["mean_images_per_model_call"] <= 64, served
        # Every round is kept, with its ratio against the same round's raw torch.
        assert len(report["endpoint_rounds"][f"x1/{cell}"]) == report["rounds"] == 1
        by_round = report["ratio_endpoint_to_raw_torch_by_round"][f"x1/{cell}"]
        assert by_round["worst_round"] == min(by_round["each_round"]), by_round
    latency = report["added_latency_batch_1_concurrency_1"]["x1/batch_1/concurrency_1"]
    assert len(latency["added_ms_each_round"]) == 1, latency
    # One round cannot meet a target stated for every round of at least three.
    assert report["target"]["cell"] == "x1/batch_8/concurrency_8"
    # The target cell's requests to a model doing no work, same rounds.
    path = report["serving_path_batch_8/concurrency_8"]
    assert len(path["no_work_rounds"]) == 1 and path["no_work_rounds"][0]["requests"] > 0, path
    assert path["no_work_rounds"][0]["mean_images_per_model_call"] >= 8, path
    # The same requests straight at tritonserver's port (past the front end), both models:
    # a direct call is answered by the model (its call-size output), not refused.
    for name in ("no_work_direct_rounds", "endpoint_direct_rounds"):
        assert len(path[name]) == 1 and path[name][0]["requests"] > 0, path
        assert path[name][0]["mean_images_per_model_call"] >= 8, path
    for name in (
        "ratio_endpoint_to_no_work_by_round",
        "ratio_raw_torch_to_no_work_by_round",
        "ratio_raw_torch_to_no_work_direct_by_round",
        "ratio_endpoint_direct_to_raw_torch_by_round",
        "ratio_endpoint_to_endpoint_direct_by_round",
    ):
        assert len(path[name]["each_round"]) == 1 and path[name]["median"] > 0, path
    assert report["target"]["met"] is False, report["target"]
    assert report["git"]["commit"], report["git"]
    assert report["config"]["adapter_parameters"] == {"DEPLOY_ADAPTER_PIPELINE": "1"}
    assert "calls launched and answered beside execute" in report["adapter_log"][0]
    assert report["machine"]["torch"], report["machine"]


def test_the_device_check_of_the_adapter_runs_here(tmp_path: Path) -> None:
    """bench/device/adapter_gpu_check.py on the CPU, pipeline on: every answer its own."""
    out = tmp_path / "check.json"
    result = run_script(
        ROOT / "bench" / "device" / "adapter_gpu_check.py", "--pipeline", "1", "--out", out
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["ok"] and report["matched"] > 200 and report["errors_expected"] > 0, report
    assert report["mean_rows_per_model_call"] > 1, report
