"""Session-wide fixtures shared by every test package.

`local_endpoint` is one running local SageMaker multi-model endpoint (the
real tritonserver behind the real front end) serving the packaged example
repository, started on first use and stopped at the end of the session.
The machine is small: every test that needs an endpoint shares this one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "model_packages" / "examples"

# Tests read no deploy.toml unless they pass one: the repository's own stages
# (deploy.toml at the root) must not leak into what a test expects. The missing
# file's folder names the project, so the default endpoint name is `deploy-triton`.
os.environ["DEPLOY_CONFIG"] = str(
    Path(__file__).resolve().parent / "deploy-triton" / "no-such-deploy.toml"
)


@dataclass
class LocalEndpointHandle:
    """What tests need to call the shared endpoint."""

    url: str  # http://127.0.0.1:PORT (pass as endpoint_url)
    endpoint_name: str
    store_dir: Path  # the package folder with manifest.json
    manifest: dict[str, Any]  # parsed manifest.json ({} without packaging)
    endpoint: Any  # the deploy.local.modes.endpoint.LocalEndpoint itself

    def target_model(self, name: str) -> str:
        return str(self.manifest["models"][name]["target_model"])


def _package_examples(store: Path) -> dict[str, Any]:
    try:
        from deploy.packaging import package_repository
    except ImportError:  # packaging not installed in this checkout: an empty store
        store.mkdir(parents=True, exist_ok=True)
        return {}

    package_repository(EXAMPLES, store)
    document: dict[str, Any] = json.loads((store / "manifest.json").read_text())
    return document


@pytest.fixture(scope="session")
def local_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEndpointHandle]:
    from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint

    root = tmp_path_factory.mktemp("local-endpoint")
    store = root / "store"
    manifest = _package_examples(store)
    endpoint = LocalEndpoint(
        store, work_dir=root / "work", options=EndpointOptions(endpoint_name="local")
    ).start()
    try:
        yield LocalEndpointHandle(endpoint.url, endpoint.endpoint_name, store, manifest, endpoint)
    finally:
        endpoint.stop()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """One moto server (S3, SageMaker, CloudFormation, ...) for the session; its URL.

    Tests point boto3 at it with AWS_ENDPOINT_URL (monkeypatched) and keep their
    resources apart by name (stage, bucket).
    """
    import socket

    from moto.server import ThreadedMotoServer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="session")
def triton_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the pinned nvidia-pytriton and numpy wheels for this machine.

    Downloaded once per session with the very `pip download` command that
    `deploy` prints for machines without a package index.
    """
    import shlex
    import subprocess
    import sys

    from deploy.local.triton.wheel import download_command, this_target

    folder = tmp_path_factory.mktemp("triton-wheels")
    command = shlex.split(download_command(this_target(), dest=str(folder)))
    assert command[0] == "pip"
    subprocess.run([sys.executable, "-m", *command, "--quiet"], check=True, timeout=900)
    return folder


@pytest.fixture(scope="session")
def triton_cache_home(triton_wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An XDG_CACHE_HOME whose deploy/triton holds the unpacked tritonserver and stub site.

    Set it as XDG_CACHE_HOME (and keep nvidia-pytriton out of the environment)
    for a `deploy serve` that runs the cached tritonserver, as an installed
    `deploy` does.
    """
    from deploy.local.triton.wheel import ensure_cached

    home = tmp_path_factory.mktemp("xdg-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(home))
        ensure_cached(source=triton_wheels)
    return home


@pytest.fixture(autouse=True)
def _one_commands_repository_code_choice() -> Iterator[None]:
    """A command run in-process (CliRunner) records `--no-repo-code` in os.environ for the
    processes it starts; the next test is another command."""
    from deploy.box.policy import ENV

    yield
    for name in (ENV, ENV + "_SOURCE"):
        os.environ.pop(name, None)
