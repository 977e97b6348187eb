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
