"""tritonserver for an installed `deploy`: fetched once by pip, checked by hash, unpacked.

The wheels come from the package index for real (once per session, see
`triton_wheels` in tests/conftest.py); a second fetch in a fresh cache reuses
pip's own HTTP cache.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from deploy.errors import LocalEndpointError
from deploy.local.triton.wheel import (
    WHEELS_ENV,
    cache_dir,
    cached,
    ensure_cached,
    this_target,
)
from tests.conftest import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]


def _leftovers(base: Path) -> list[str]:
    return sorted(p.name for p in base.iterdir() if p.name.startswith("."))


@pytest.mark.slow
def test_first_use_downloads_the_pinned_wheels_then_reuses_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(WHEELS_ENV, raising=False)
    progress = io.StringIO()

    found = ensure_cached(progress=progress)

    assert cache_dir() == tmp_path / "deploy" / "triton"
    assert "fetching tritonserver for the local endpoint, once" in progress.getvalue()
    assert str(cache_dir()) in progress.getvalue()
    binary = found.root / "bin" / "tritonserver"
    assert os.access(binary, os.X_OK)
    assert (found.root.parent.parent / "nvidia_pytriton.libs").is_dir()
    assert (found.stub_site / "numpy" / "__init__.py").is_file()
    # Only tritonserver's part of the wheel is kept, not the pytriton package.
    assert sorted(p.name for p in found.root.parent.iterdir()) == ["tritonserver"]
    assert _leftovers(cache_dir()) == [".lock"]  # no staging folder, no wheel left
    # The unpacked binary runs (its libraries found through its RPATH).
    done = subprocess.run(
        [str(binary), "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert "--model-repository" in done.stdout + done.stderr

    again = io.StringIO()
    assert ensure_cached(progress=again) == found
    assert again.getvalue() == ""


@pytest.mark.slow
def test_a_wheel_whose_hash_differs_is_refused_and_nothing_is_unpacked(
    triton_wheels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    tampered = tmp_path / "wheels"
    shutil.copytree(triton_wheels, tampered)
    wheel = tampered / this_target().pytriton.filename
    with wheel.open("r+b") as handle:  # one byte inside a member's data
        handle.seek(wheel.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, os.SEEK_CUR)
        handle.write(bytes([byte[0] ^ 0xFF]))

    with pytest.raises(LocalEndpointError) as caught:
        ensure_cached(source=tampered, progress=io.StringIO())

    assert "is not the pinned" in caught.value.message
    assert caught.value.where == str(wheel)
    assert not cached(this_target()).root.parent.parent.exists()
    assert _leftovers(cache_dir()) == [".lock"]


@pytest.mark.slow
def test_offline_names_the_network_and_the_way_for_machines_without_an_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(WHEELS_ENV, raising=False)
    # No pip configuration, and an index nobody listens on: what offline looks like to pip.
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")

    with pytest.raises(LocalEndpointError) as caught:
        ensure_cached(progress=io.StringIO())

    fix = caught.value.fix or ""
    assert "pip could not download nvidia-pytriton 0.7.0" in caught.value.message
    assert "HTTPS_PROXY" in fix
    assert "pip download --no-deps --only-binary=:all:" in fix
    assert "deploy fetch-triton --from triton-wheels" in fix
    assert "make" not in fix
    assert not cached(this_target()).root.parent.parent.exists()


@pytest.mark.slow
def test_a_wheel_folder_serves_a_machine_without_an_index(
    triton_wheels: Path, tmp_path: Path
) -> None:
    env = _without_pytriton(tmp_path)
    env["PIP_INDEX_URL"] = "http://127.0.0.1:9/simple"  # pip would fail: the folder is used
    env[WHEELS_ENV] = str(triton_wheels)

    done = subprocess.run(
        [sys.executable, "-m", "deploy", "fetch-triton", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["tritonserver"].startswith(str(tmp_path / "xdg" / "deploy" / "triton"))
    assert found["stub_site"].startswith(str(tmp_path / "xdg" / "deploy" / "triton"))


def test_a_missing_c_compiler_is_named_before_anything_is_fetched(tmp_path: Path) -> None:
    env = _without_pytriton(tmp_path)
    env["CC"] = "no-such-cc"

    done = subprocess.run(
        [sys.executable, "-m", "deploy", "serve", str(EXAMPLES), "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 1
    assert "no C compiler ('no-such-cc')" in done.stderr
    assert "apt-get install gcc" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "xdg" / "deploy" / "triton").exists()


def test_this_virtualenvs_install_is_preferred_when_present() -> None:
    from deploy.local.triton.install import find_triton

    install = find_triton(fetch=False)
    assert Path(sys.prefix) in install.stub_site.parents
    assert cache_dir() not in install.root.parents


@pytest.mark.slow
@pytest.mark.triton
def test_serve_runs_the_cached_tritonserver_when_the_virtualenv_has_none(
    triton_cache_home: Path, tmp_path: Path
) -> None:
    repository = tmp_path / "models"
    shutil.copytree(EXAMPLES / "addsub", repository / "addsub")
    env = _without_pytriton(tmp_path)
    env["XDG_CACHE_HOME"] = str(triton_cache_home)
    env["DEPLOY_LOCAL_PORT"] = "0"
    deploy = [sys.executable, "-m", "deploy"]
    up = subprocess.run(
        [*deploy, "up", "--local", "--repository", str(repository), "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert [s["name"] for s in json.loads(up.stdout)["smoke"]] == ["addsub"]
        state = json.loads((tmp_path / ".deploy" / "local" / "local.json").read_text())
        servers = [
            Path(f"/proc/{pid}/exe").resolve()
            for pid in _descendants(int(state["pid"]))
            if Path(f"/proc/{pid}/exe").resolve().name == "tritonserver"
        ]
        assert servers, "no tritonserver under the endpoint"
        assert all(triton_cache_home in server.parents for server in servers)
        # The python backend answers with values, as it does with numpy<2 only.
        inputs = tmp_path / "inputs.json"
        inputs.write_text(json.dumps({"INPUT0": [[1, 2, 3, 4]], "INPUT1": [[1, 1, 1, 1]]}))
        called = subprocess.run(
            [*deploy, "invoke", "--local", "addsub", "--input", str(inputs), "--json"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert called.returncode == 0, called.stdout + called.stderr
        outputs = {o["name"]: o["data"] for o in json.loads(called.stdout)["outputs"]}
        assert outputs["OUTPUT0"] == [2, 3, 4, 5]
    finally:
        subprocess.run(
            [*deploy, "down", "--local"], env=env, cwd=tmp_path, timeout=120, check=False
        )


def _without_pytriton(tmp_path: Path) -> dict[str, str]:
    """The environment of a `deploy` installed without nvidia-pytriton, with its own cache.

    A plain module named `pytriton` first on the path hides the package this
    virtualenv has (`find_spec` then finds no package folder), in child processes too.
    """
    shadow = tmp_path / "no-pytriton"
    shadow.mkdir(exist_ok=True)
    (shadow / "pytriton.py").write_text('raise ImportError("nvidia-pytriton is not installed")\n')
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(shadow), str(ROOT)])
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    env.pop(WHEELS_ENV, None)
    return env


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def test_a_cache_folder_this_user_cannot_write_is_named() -> None:
    # GIVEN a cache home owned by another user (root), WHEN an unprivileged user fetches
    home = Path(tempfile.mkdtemp(prefix="root-owned-"))  # outside pytest's 0700 folder
    home.chmod(0o755)
    code = (
        "from deploy.local.triton.wheel import ensure_cached\n"
        "from deploy.errors import DeployError\n"
        "try:\n    ensure_cached()\nexcept DeployError as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         sys.executable, "-c", code],
        env=dict(os.environ, XDG_CACHE_HOME=str(home), PYTHONPATH=str(ROOT)),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    # THEN the folder and the fix are named, with no traceback
    assert done.returncode == 0, done.stderr
    assert "the cache folder cannot be written: Permission denied" in done.stdout
    assert "set XDG_CACHE_HOME" in done.stdout
    assert not (home / "deploy").exists()
    home.rmdir()
