"""`deploy emulate`: `deploy up / status / invoke / down` end to end without an AWS account.

The commands run as a user runs them: `deploy emulate` in its own process,
its variables exported into the environment of each later command.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES

pytestmark = [pytest.mark.moto, pytest.mark.cdk, pytest.mark.triton, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
STAGE = "emulated"


@pytest.fixture
def emulated(tmp_path: Path) -> Iterator[dict[str, str]]:
    """`deploy emulate` running; the environment with its variables exported."""
    env_file = tmp_path / "emulated.env"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    process = subprocess.Popen(
        [sys.executable, "-m", "deploy", "emulate", "--env-file", str(env_file)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not env_file.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "deploy emulate did not get ready"
            time.sleep(0.2)
        for line in env_file.read_text().splitlines():
            key, value = line.split("=", 1)
            env[key] = value
        for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
            env.pop(key, None)
        yield env
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert out.startswith("unset AWS_PROFILE")  # the shell form of the same variables
    assert "export DEPLOY_SMOKE_ENDPOINT_URL=" in out
    assert not env_file.exists()  # removed with the emulator


def deploy(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deploy", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_up_status_invoke_down_against_the_emulated_aws(
    emulated: dict[str, str], tmp_path: Path
) -> None:
    repo = tmp_path / "models"
    shutil.copytree(EXAMPLES / "addsub", repo / "addsub")
    up = ["up", "--stage", STAGE, "--repository", str(repo), "--package-dir", str(tmp_path / "p")]
    up += ["--instance", "ml.m5.xlarge", "--json"]

    first = deploy(emulated, *up)
    assert first.returncode == 0, first.stdout + first.stderr
    document = json.loads(first.stdout)
    assert [(s["name"], s["ok"]) for s in document["smoke"]] == [("addsub", True)]
    assert document["manifest_published"]

    status = deploy(emulated, "status", "--stage", STAGE, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["endpoint"]["status"] == "InService"

    # The data plane is called by its URL alone: its name comes from the endpoint.
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"INPUT0": [[1, 2, 3, 4]], "INPUT1": [[1, 1, 1, 1]]}))
    url = emulated["DEPLOY_SMOKE_ENDPOINT_URL"]
    called = deploy(emulated, "invoke", "addsub", "--input", str(inputs), "--endpoint-url", url)
    assert called.returncode == 0, called.stdout + called.stderr
    assert "OUTPUT0" in called.stdout

    # WHEN the smoke test is sent to moto itself (no data plane), THEN the fix says so
    # and does not blame the model.
    source = repo / "addsub" / "1" / "model.py"
    source.write_text(source.read_text() + "\n# revision 2\n")
    without = {k: v for k, v in emulated.items() if not k.startswith("DEPLOY_SMOKE_")}
    failed = deploy(without, *up[:-1])
    assert failed.returncode == 1
    assert "reached no SageMaker data plane" in failed.stderr
    assert "--smoke-endpoint-url" in failed.stderr
    assert "fix the named model" not in failed.stderr
    assert "Traceback" not in failed.stderr

    down = deploy(emulated, "down", "--stage", STAGE, "--yes", "--json")
    assert down.returncode == 0, down.stdout + down.stderr
    gone = deploy(emulated, "status", "--stage", STAGE, "--json")
    assert gone.returncode == 0, gone.stderr
    assert json.loads(gone.stdout)["endpoint"] is None
