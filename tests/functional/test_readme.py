"""The README's first run, block by block, as printed, in a fresh folder.

The folder holds what a checkout has (`model_packages`, `deploy.toml`,
`.venv`, as links). bash blocks run with the virtualenv's `bin` first on
PATH, as after `source .venv/bin/activate` in the first terminal; the `serve`
block is the second terminal, run in the background until `deploy down
--local` stops it. The machine is shared, so the endpoint's port is a free
one given through the `local_port` setting (`DEPLOY_LOCAL_PORT`) and the
snippets' `DEPLOY_ENDPOINT_URL`; everything else is the README's text.
A python block's `print(...)  # VALUE` comment is checked against its output.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.triton, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"<!-- readme-example: ([\w-]+) -->\n```(bash|python)\n(.*?)```", re.S)
FIRST_RUN = ["package", "serve", "client", "invoke", "boto3", "up-local"]


def first_run_section() -> str:
    return README.split("\n## First run\n", 1)[1].split("\n## ", 1)[0]


def blocks() -> list[tuple[str, str, str]]:
    return [(m.group(1), m.group(2), m.group(3)) for m in BLOCK.finditer(first_run_section())]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_every_first_run_block_is_marked_in_order() -> None:
    section = first_run_section()
    assert len(re.findall(r"^```\w+$", section, re.M)) == len(FIRST_RUN)
    assert [name for name, _, _ in blocks()] == FIRST_RUN
    # Every python snippet in the README is marked, so a test runs it as printed: the first
    # run's here, the asynchronous endpoint's in test_local_async.py.
    marked = [m.group(1) for m in BLOCK.finditer(README) if m.group(2) == "python"]
    assert README.count("```python\n") == len(marked)
    assert set(marked) - {name for name, lang, _ in blocks() if lang == "python"} == {"async-sdk"}


def expected_prints(code: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^\s*print\(.*\)\s+#\s*(.+)$", code, re.M)]


def test_the_first_run_as_written(tmp_path: Path) -> None:
    for name in ("model_packages", "deploy.toml", ".venv"):
        (tmp_path / name).symlink_to(ROOT / name)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "DEPLOY_CONFIG"}  # read deploy.toml
    env.update(
        PYTHONPATH=str(ROOT),
        PATH=f"{tmp_path / '.venv' / 'bin'}:{os.environ['PATH']}",
        DEPLOY_LOCAL_PORT=str(port),
        DEPLOY_ENDPOINT_URL=f"http://127.0.0.1:{port}",
    )
    state = tmp_path / ".deploy" / "local" / "local.json"
    serve: subprocess.Popen[bytes] | None = None
    serve_output = tmp_path / "serve.out"  # the second terminal
    shown: dict[str, str] = {}
    try:
        for name, language, code in blocks():
            if name == "serve":
                with serve_output.open("wb") as sink:
                    serve = subprocess.Popen(
                        ["bash", "-euo", "pipefail", "-c", code],
                        cwd=tmp_path,
                        env=env,
                        stdout=sink,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                deadline = time.monotonic() + 120
                while not state.is_file():
                    assert serve.poll() is None, serve_output.read_text()
                    assert time.monotonic() < deadline, "deploy serve did not start"
                    time.sleep(0.2)
                continue
            command = (
                ["bash", "-euo", "pipefail", "-c", code]
                if language == "bash"
                else [sys.executable, "-c", code]
            )
            done = subprocess.run(
                command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
            )
            assert done.returncode == 0, (name, done.stdout, done.stderr)
            for value in expected_prints(code) if language == "python" else []:
                assert value in done.stdout, (name, value, done.stdout)
            shown[name] = done.stdout
    finally:
        if state.is_file():
            subprocess.run(
                [sys.executable, "-m", "deploy", "down", "--local"], cwd=tmp_path, env=env
            )
        if serve is not None and serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()

    # package: archives, a manifest, machine-readable validation
    manifest = json.loads((tmp_path / "build" / "models" / "manifest.json").read_text())
    assert json.loads((tmp_path / "validate.json").read_text())
    # invoke: the .npz made in the block went in, the outputs came out
    outputs = {
        o["name"]: o["data"] for o in json.loads((tmp_path / "out.json").read_text())["outputs"]
    }
    assert outputs["OUTPUT0"] == [0.0, 2.0, 4.0, 6.0]
    assert manifest["models"]["addsub"]["target_model"] in shown["invoke"]
    # up-local: the first `down` stopped `deploy serve`, which exited cleanly
    assert serve is not None and serve.returncode == 0, serve_output.read_text()
    assert "tritonserver log kept" in serve_output.read_text()
    assert "OUTPUT0" in shown["up-local"]
    assert not state.exists()
    assert (tmp_path / ".deploy" / "local" / "local" / "tritonserver.log").stat().st_size > 0


def test_make_demo_leaves_build_models_and_says_what_next(tmp_path: Path) -> None:
    (tmp_path / "model_packages").symlink_to(ROOT / "model_packages")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # What `make demo` runs once installed (make install is not run by tests).
    done = subprocess.run(
        [sys.executable, "-m", "deploy.demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "build" / "models" / "manifest.json").is_file()
    next_block = done.stdout.split("\nnext", 1)[1]
    commands = [
        line.split("#", 1)[0].strip()
        for line in next_block.splitlines()[1:]
        if line.strip().startswith("deploy ")
    ]
    assert commands and commands[0] == "deploy serve build/models"
    readme_text = "\n".join(code for _, _, code in blocks())
    for command in commands:
        assert command in readme_text, f"{command!r} is not in the README's first run"
