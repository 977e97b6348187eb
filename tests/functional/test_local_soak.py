"""A short soak of the local endpoint: 8 clients, every example model, one model loaded at a time.

Runs `bench/soak_local_endpoint.py` (its 2-minute run is recorded in
docs/measurements/soak_local_endpoint.json) for 20 s against `deploy serve
--max-loaded-models 1` and requires what the benchmark targets: every call
answered 200, none over 30 s, no 5xx and no 424 (ModelNotReady is retried,
as the SDK does).
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


def test_short_soak_answers_every_call() -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "soak_local_endpoint.py"),
            *("--clients", "8", "--seconds", "20", "--baseline-seconds", "0"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    run = report["max_loaded_models_1"]
    assert run["calls"] >= 8, run
    assert report["targets"] == {
        "every_call_answered_200": True,
        "no_5xx": True,
        "no_424": True,
        "no_call_over_30s": True,
    }, run
    # Every model was called, so the single slot changed hands.
    assert set(run["calls_per_model"]) == set(run["models"]) and run["evictions"] > 0, run
