"""A fix names a `make` target only inside this repository's checkout, where the Makefile is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """name: "m"
platform: "pytorch_libtorch"
max_batch_size: 0
input [{ name: "INPUT__0", data_type: TYPE_FP32, dims: [ 4 ] }]
output [{ name: "OUTPUT__0", data_type: TYPE_FP32, dims: [ 4 ] }]
"""


def _validate(repository: Path, cwd: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "deploy", "validate", str(repository)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.fixture
def weightless(tmp_path: Path) -> Path:
    """A repository whose pytorch model has no model.pt."""
    model = tmp_path / "models" / "m"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(CONFIG)
    return tmp_path / "models"


def test_a_users_project_gets_no_make_target(weightless: Path, tmp_path: Path) -> None:
    output = _validate(weightless, cwd=tmp_path)
    assert "version 1 has no model.pt" in output
    assert "add m/1/model.pt or set default_model_filename" in output
    assert "make" not in output


def test_this_checkout_gets_the_make_target_that_generates_the_examples(weightless: Path) -> None:
    output = _validate(weightless, cwd=ROOT / "model_packages")
    assert "run `make models` for the examples" in output
