"""A real tritonserver for the repository, validation and packaging tests.

Starts the server from the nvidia-pytriton wheel (located with `find_spec`,
never imported) with a private backend directory, either over a plain model
repository or in SageMaker multi-model mode, and stops it with the test session.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


def pytriton_dir() -> Path | None:
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    return root if (root / "tritonserver" / "bin" / "tritonserver").is_file() else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _backend_dir(pytriton: Path, into: Path) -> Path:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    python = into / "python"
    python.mkdir(parents=True, exist_ok=True)
    source = pytriton / "tritonserver" / "backends" / "python"
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        (python / name).symlink_to(source / name)
    stub = (
        pytriton / "tritonserver" / "python_backend_stubs" / version / "triton_python_backend_stub"
    )
    shutil.copy2(stub, python / "triton_python_backend_stub")
    return into


@dataclass
class TritonProcess:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def run_tritonserver(
    workdir: Path,
    *,
    repository: Path | None = None,
    timeout: float = 60.0,
    extra_args: tuple[str, ...] = (),
) -> Iterator[TritonProcess]:
    """Run tritonserver: plain HTTP over `repository`, or SageMaker MME mode when None."""
    pytriton = pytriton_dir()
    if pytriton is None:
        raise FileNotFoundError("tritonserver (nvidia-pytriton wheel) is not installed")
    backends = _backend_dir(pytriton, workdir / "backends")
    site_packages = sysconfig.get_paths()["purelib"]
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        [str(Path(sys.base_prefix) / "lib"), str(Path(site_packages) / "nvidia_pytriton.libs")]
    )
    env["PYTHONPATH"] = site_packages
    port = _free_port()
    args = [
        str(pytriton / "tritonserver" / "bin" / "tritonserver"),
        f"--backend-directory={backends}",
        "--allow-grpc=false",
        "--allow-metrics=false",
        "--log-verbose=0",
    ]
    if repository is None:
        empty = workdir / "empty-repository"
        empty.mkdir(exist_ok=True)
        env["SAGEMAKER_MULTI_MODEL"] = "true"
        args += [
            f"--model-repository={empty}",
            "--model-control-mode=explicit",
            "--model-namespacing=true",
            "--allow-sagemaker=true",
            f"--sagemaker-port={port}",
            "--allow-http=false",
        ]
        ready_path = "/ping"
    else:
        args += [
            f"--model-repository={repository}",
            "--allow-http=true",
            f"--http-port={port}",
            "--strict-readiness=false",
            "--exit-on-error=false",
        ]
        ready_path = "/v2/health/live"
    args += extra_args
    # The stub's embedded interpreter ignores PYTHONPATH but puts its working
    # directory first on sys.path: run where `make install` put numpy<2, which
    # the stub (built against numpy 1) needs for BYTES tensors.
    stub_site = Path(sys.prefix) / "triton-stub-site"
    cwd = stub_site if (stub_site / "numpy").is_dir() else workdir
    log = workdir / "tritonserver.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(args, env=env, cwd=cwd, stdout=sink, stderr=subprocess.STDOUT)
    server = TritonProcess(process, port, log)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise OSError(f"tritonserver exited early:\n{server.log_text()}")
            try:
                with urllib.request.urlopen(server.url + ready_path, timeout=1) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"tritonserver not ready:\n{server.log_text()}")
            time.sleep(0.1)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


_SHARED: dict[str, TritonProcess] = {}


def shared_tritonserver(
    config: object,
    workdir_factory: object,
    key: str,
    repository: Path | None = None,
    extra_args: tuple[str, ...] = (),
) -> TritonProcess:
    """One server per `key` for the whole test session, stopped at session end."""
    import pytest

    assert isinstance(config, pytest.Config)
    assert isinstance(workdir_factory, pytest.TempPathFactory)
    if key not in _SHARED:
        if pytriton_dir() is None:
            pytest.skip("tritonserver (nvidia-pytriton wheel) is not installed")
        manager = run_tritonserver(
            workdir_factory.mktemp(f"triton-{key}"), repository=repository, extra_args=extra_args
        )
        _SHARED[key] = manager.__enter__()

        def stop() -> None:
            _SHARED.pop(key, None)
            manager.__exit__(None, None, None)

        config.add_cleanup(stop)
    return _SHARED[key]


def mme_load(server: TritonProcess, folder: Path, target_model: str) -> tuple[int, bytes]:
    """POST /models for a folder laid out as SageMaker extracts archives (`.../<hash>/model`)."""
    import json

    request = urllib.request.Request(
        server.url + "/models",
        data=json.dumps({"model_name": folder.parent.name, "url": str(folder)}).encode(),
        headers={"X-Amzn-SageMaker-Target-Model": target_model},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def mme_invoke(
    server: TritonProcess, name_hash: str, target_model: str, inputs: list[object]
) -> object:
    """Invoke a loaded model with Triton's binary protocol; returns tritonclient's InferResult."""
    import tritonclient.http as httpclient

    body, header_length = httpclient.InferenceServerClient.generate_request_body(inputs)
    request = urllib.request.Request(
        server.url + f"/models/{name_hash}/invoke",
        data=body,
        headers={
            "X-Amzn-SageMaker-Target-Model": target_model,
            "Content-Type": "application/vnd.sagemaker-triton.binary+json;"
            f"json-header-size={header_length}",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        content_type = response.headers.get("Content-Type", "")
        payload = response.read()
    size = int(content_type.split("=")[-1]) if "json-header-size=" in content_type else None
    return httpclient.InferenceServerClient.parse_response_body(payload, header_length=size)
