"""The local loop finds itself: `deploy serve` / `deploy up --local` on one default
port, a state file both write, the manifest served by the endpoint (so the SDK
and `deploy invoke --local` need no manifest), logical names in `deploy status
--local`, tritonserver's log kept after the endpoint stops, and `deploy serve
REPO`'s temporary store removed on SIGTERM.

Each test runs the CLI as a user would, in a fresh working directory, against
the real tritonserver.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from deploy.cli import app
from tests.conftest import EXAMPLES

pytestmark = [pytest.mark.triton, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ROW = np.arange(4, dtype=np.float32)[None, :]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(path: Path, process: subprocess.Popen[str], seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.is_file():
        if process.poll() is not None:
            raise AssertionError(f"deploy serve exited: {process.communicate()[0]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear in {seconds}s")
        time.sleep(0.2)


def stop(process: subprocess.Popen[str], signum: int) -> str:
    if process.poll() is None:
        process.send_signal(signum)
    try:
        output, _ = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    return output


def cli(*args: str) -> Any:
    outcome = CliRunner().invoke(app, list(args))
    assert outcome.exit_code == 0, outcome.output
    return outcome


def test_serve_is_found_by_status_invoke_and_the_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN `deploy serve REPO` with no --port (the local_port setting picks it)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DEPLOY_LOCAL_PORT": str(port)}
    process = subprocess.Popen(
        [sys.executable, "-m", "deploy", "serve", str(EXAMPLES)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    state_file = tmp_path / ".deploy" / "local" / "local.json"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEPLOY_LOCAL_PORT", str(port))
    try:
        wait_for(state_file, process)
        state = json.loads(state_file.read_text())
        assert state["pid"] == process.pid
        assert state["url"] == f"http://127.0.0.1:{port}"
        temporary_store = Path(state["store"])
        assert (temporary_store / "manifest.json").is_file()
        manifest = json.loads((temporary_store / "manifest.json").read_text())
        addsub = manifest["models"]["addsub"]["target_model"]

        # WHEN `deploy invoke --local` is given no --manifest THEN the name resolves
        np.savez(tmp_path / "in.npz", INPUT0=ROW, INPUT1=ROW)
        invoked = cli("invoke", "addsub", "--input", "in.npz", "--local", "--json")
        document = json.loads(invoked.output)
        assert document["target_model"] == addsub
        assert {o["name"]: o["data"] for o in document["outputs"]} == {
            "OUTPUT0": [0.0, 2.0, 4.0, 6.0],
            "OUTPUT1": [0.0, 0.0, 0.0, 0.0],
        }

        # AND the SDK, sync and async, resolves logical names from the endpoint alone
        from deploy.client import AsyncEndpoint, Endpoint

        with Endpoint("local", endpoint_url=state["url"]) as endpoint:
            result = endpoint.infer("addsub", {"INPUT0": ROW, "INPUT1": ROW})
            assert result.target_model == addsub
            np.testing.assert_array_equal(result["OUTPUT0"], ROW * 2)

        async def call() -> Any:
            async with AsyncEndpoint("local", endpoint_url=state["url"]) as endpoint:
                return await endpoint.infer("addsub", {"INPUT0": ROW, "INPUT1": ROW})

        assert asyncio.run(call()).target_model == addsub

        # AND `deploy status --local` sees the endpoint, with logical names
        status = json.loads(cli("status", "--local", "--json").output)
        assert status["status"] == "InService"
        assert status["pid"] == process.pid
        rows = {row["name"]: row for row in status["models"]}
        assert set(rows) == set(manifest["models"])
        assert rows["addsub"]["target_model"] == addsub
        assert rows["addsub"]["loaded"] is True
        assert rows["strings"]["loaded"] is False
        text = cli("status", "--local").output
        assert "addsub" in text and "tritonserver log" in text

        # AND `deploy up --local` does not publish into a store it does not serve
        up = ["up", "--local", "--repository", str(EXAMPLES), "--package-dir", "build"]
        clash = CliRunner().invoke(app, up)
        assert clash.exit_code == 1, clash.output
        assert "deploy down --local" in clash.output
    finally:
        # WHEN it gets SIGTERM
        output = stop(process, signal.SIGTERM)
    assert process.returncode == 0, output

    # THEN its temporary store and its record are gone, tritonserver's log is kept
    assert not temporary_store.exists()
    assert not state_file.exists()
    triton_log = tmp_path / ".deploy" / "local" / "local" / "tritonserver.log"
    assert triton_log.stat().st_size > 0
    assert f"tritonserverlogkept:{triton_log.resolve()}" in "".join(output.split())
    gone = json.loads(cli("status", "--local", "--json").output)
    assert gone["status"] == "NotRunning"


def test_up_local_uses_the_same_default_port_and_keeps_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEPLOY_LOCAL_PORT", str(port))
    runner = CliRunner()
    up = runner.invoke(
        app,
        ["up", "--local", "--repository", str(EXAMPLES), "--package-dir", "build", "--skip-smoke"],
    )
    try:
        assert up.exit_code == 0, up.output
        state = json.loads((tmp_path / ".deploy" / "local" / "local.json").read_text())
        assert state["url"] == f"http://127.0.0.1:{port}"
        assert "tritonserver log" in up.output

        np.savez(tmp_path / "in.npz", INPUT0=ROW, INPUT1=ROW)
        invoked = runner.invoke(app, ["invoke", "addsub", "--input", "in.npz", "--local"])
        assert invoked.exit_code == 0, invoked.output
        assert "OUTPUT0" in invoked.output

        status = json.loads(runner.invoke(app, ["status", "--local", "--json"]).output)
        published = json.loads(
            (tmp_path / ".deploy" / "local" / "local" / "store" / "manifest.json").read_text()
        )
        current = {row["name"]: row["target_model"] for row in status["models"]}
        assert current == {n: e["target_model"] for n, e in published["models"].items()}
    finally:
        down = runner.invoke(app, ["down", "--local"])
    assert down.exit_code == 0, down.output
    triton_log = tmp_path / ".deploy" / "local" / "local" / "tritonserver.log"
    assert "tritonserver log kept" in down.output
    assert triton_log.stat().st_size > 0
    assert "addsub" in triton_log.read_text(errors="replace")
    with pytest.raises(ProcessLookupError):
        os.kill(state["pid"], 0)


def test_port_in_use_names_the_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        monkeypatch.setenv("DEPLOY_LOCAL_PORT", str(port))
        outcome = CliRunner().invoke(
            app, ["up", "--local", "--repository", str(EXAMPLES), "--package-dir", "build"]
        )
    assert outcome.exit_code == 1, outcome.output
    assert f"port {port} is in use" in outcome.output
    assert "--port" in outcome.output
    assert not (tmp_path / ".deploy" / "local" / "local.json").exists()


def test_the_endpoint_serves_its_manifest(local_endpoint: Any) -> None:
    import urllib.request

    from deploy.client._core import ENDPOINT_MANIFEST_PATH
    from deploy.local.http.wire import MANIFEST_ROUTE

    assert ENDPOINT_MANIFEST_PATH == MANIFEST_ROUTE  # the SDK keeps its own copy
    with urllib.request.urlopen(local_endpoint.url + MANIFEST_ROUTE, timeout=10) as response:
        assert response.headers["Content-Type"] == "application/json"
        served = json.loads(response.read())
    assert served == json.loads((local_endpoint.store_dir / "manifest.json").read_text())
