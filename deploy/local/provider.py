"""`deploy up/status/down --local`: the local endpoint as a deployment provider.

Implements `deploy.lifecycle.provider.Provider` so `deploy up --local` runs
the same stages as `deploy up` on AWS. "Upload" links the package's archives
into a store folder under `.deploy/local/<endpoint>/store`, "provision"
starts `deploy serve` on that store as a detached background process, and
"publish" writes the manifest there. The process is recorded in the state
file `.deploy/local/<endpoint>.json` (pid, port, url, log, store), which
`status` reads and `down` uses to stop it.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from deploy._files import atomic_write_bytes, pid_exists
from deploy.errors import LocalEndpointError
from deploy.lifecycle.plan import InfraSpec, ModelChange
from deploy.lifecycle.provider import (
    DataPlane,
    EndpointView,
    InfraPlan,
    Reporter,
    UploadOutcome,
)
from deploy.local.store import MANIFEST
from deploy.local.supervisor import free_port

STATE_DIR = Path(".deploy") / "local"


@dataclass
class LocalState:
    endpoint_name: str
    pid: int
    port: int
    url: str
    log: str
    store: str
    started_at: float


def _alive(pid: int) -> bool:
    if not pid_exists(pid):
        return False
    # A zombie child of this process counts as gone.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def _get(url: str, path: str, timeout: float = 2.0) -> tuple[int, bytes]:
    host, _, port = url.removeprefix("http://").partition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


class LocalProvider:
    """A background local endpoint named `endpoint_name`, rooted at `state_dir`."""

    name = "local"

    def __init__(
        self,
        endpoint_name: str = "local",
        *,
        state_dir: Path = STATE_DIR,
        port: int | None = None,
        max_loaded_models: int | None = None,
    ) -> None:
        self.endpoint_name = endpoint_name
        self.state_dir = state_dir
        self.port = port
        self.max_loaded_models = max_loaded_models
        self.store_dir = state_dir / endpoint_name / "store"
        self.state_path = state_dir / f"{endpoint_name}.json"
        self.log_path = state_dir / endpoint_name / "serve.log"

    # -- state ---------------------------------------------------------------
    def state(self) -> LocalState | None:
        """The recorded background endpoint, or None (removing a stale record)."""
        if not self.state_path.is_file():
            return None
        try:
            state = LocalState(**json.loads(self.state_path.read_text(encoding="utf-8")))
        except (ValueError, TypeError) as exc:
            raise LocalEndpointError(
                f"state file is unreadable: {exc}",
                where=str(self.state_path),
                fix="stop the process by hand if it runs, then delete the file",
            ) from exc
        if not _alive(state.pid):
            self.state_path.unlink(missing_ok=True)
            return None
        return state

    # -- Provider protocol -------------------------------------------------------
    def published_manifest(self) -> dict[str, Any] | None:
        path = self.store_dir / MANIFEST
        if not path.is_file():
            return None
        document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return document

    def stored_sha256(self, target_models: Iterable[str]) -> dict[str, str | None]:
        result: dict[str, str | None] = {}
        for target_model in target_models:
            path = self.store_dir / target_model
            if not path.is_file():
                result[target_model] = None
                continue
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
            result[target_model] = digest.hexdigest()
        return result

    def plan_infra(self, desired: InfraSpec) -> InfraPlan:
        current = self.state()
        return InfraPlan(
            action="none" if current is not None else "create",
            current=None,
            changes=(),
            resources=(
                {"type": "local endpoint", "name": self.endpoint_name, "at": str(self.store_dir)},
            ),
        )

    def upload(
        self, package_dir: Path, changes: Sequence[ModelChange], reporter: Reporter
    ) -> list[UploadOutcome]:
        outcomes = []
        sources = [package_dir / change.target_model for change in changes]
        reporter.upload_started(len(sources), sum(p.stat().st_size for p in sources))
        for change, source in zip(changes, sources, strict=True):
            destination = self.store_dir / change.target_model
            destination.parent.mkdir(parents=True, exist_ok=True)
            partial = destination.with_name(destination.name + ".partial")
            partial.unlink(missing_ok=True)
            try:
                os.link(source, partial)  # same file system: no copy
            except OSError:
                shutil.copyfile(source, partial)
            partial.replace(destination)
            size = destination.stat().st_size
            reporter.uploaded(size)
            outcomes.append(UploadOutcome(change.target_model, size, 1, 0, False))
        reporter.upload_finished()
        return outcomes

    def provision(self, infra: InfraPlan, desired: InfraSpec, reporter: Reporter) -> None:
        self.start()

    def wait(self, *, timeout_s: float, reporter: Reporter) -> EndpointView:
        state = self.state()
        if state is None:
            raise LocalEndpointError(
                "the local endpoint is not running",
                where=f"local endpoint {self.endpoint_name}",
                fix="run `deploy up --local`",
            )
        self._wait_ready(state, timeout_s)
        return self._view(state)

    def data_plane(self) -> DataPlane:
        state = self.state()
        url = state.url if state else None
        return DataPlane(endpoint_name=self.endpoint_name, region="us-east-1", endpoint_url=url)

    def publish_manifest(self, document: bytes) -> None:
        atomic_write_bytes(self.store_dir / MANIFEST, document)

    # -- background process ------------------------------------------------------
    def start(self, *, timeout_s: float = 60.0) -> LocalState:
        """Start `deploy serve` on the store in the background (once)."""
        existing = self.state()
        if existing is not None:
            return existing
        self.store_dir.mkdir(parents=True, exist_ok=True)
        port = self.port or free_port()
        command = [
            sys.executable,
            "-m",
            "deploy",
            "serve",
            str(self.store_dir.resolve()),
            "--port",
            str(port),
            "--endpoint-name",
            self.endpoint_name,
        ]
        if self.max_loaded_models:
            command += ["--max-loaded-models", str(self.max_loaded_models)]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # posix_spawn, not Popen: nothing here waits for the process, it outlives this
        # command (its own session, so no terminal signal reaches it).
        pid = os.posix_spawn(
            sys.executable,
            command,
            dict(os.environ),
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (
                    os.POSIX_SPAWN_OPEN,
                    1,
                    str(self.log_path),
                    os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                    0o644,
                ),
                (os.POSIX_SPAWN_DUP2, 1, 2),
            ],
            setsid=True,
        )
        state = LocalState(
            endpoint_name=self.endpoint_name,
            pid=pid,
            port=port,
            url=f"http://127.0.0.1:{port}",
            log=str(self.log_path.resolve()),
            store=str(self.store_dir.resolve()),
            started_at=time.time(),
        )
        atomic_write_bytes(self.state_path, json.dumps(asdict(state), indent=2).encode("utf-8"))
        try:
            self._wait_ready(state, timeout_s)
        except LocalEndpointError:
            self.stop()
            raise
        return state

    def _wait_ready(self, state: LocalState, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not _alive(state.pid):
                raise LocalEndpointError(
                    "the local endpoint exited while starting",
                    where=state.log,
                    fix="read the log named here",
                )
            with contextlib.suppress(OSError):
                if _get(state.url, "/ping")[0] == 200:
                    return
            time.sleep(0.1)
        raise LocalEndpointError(
            f"the local endpoint did not answer /ping within {timeout_s:.0f}s",
            where=state.log,
            fix="read the log named here",
        )

    def status(self) -> dict[str, Any]:
        state = self.state()
        if state is None:
            return {"endpoint_name": self.endpoint_name, "status": "NotRunning"}
        document: dict[str, Any] = {"status": "InService", **asdict(state)}
        try:
            status, body = _get(state.url, "/models")
        except OSError as exc:
            document["status"] = f"Unreachable ({exc})"
            return document
        if status == 200:
            document.update(json.loads(body))
        return document

    def stop(self, *, timeout_s: float = 20.0) -> bool:
        """SIGINT the background endpoint, SIGKILL after `timeout_s`; False if none ran."""
        state = self.state()
        if state is None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.pid, signal.SIGINT)
        deadline = time.monotonic() + timeout_s
        while _alive(state.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(state.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(state.pid, signal.SIGKILL)
        self.state_path.unlink(missing_ok=True)
        return True

    def _view(self, state: LocalState) -> EndpointView:
        return EndpointView(
            name=self.endpoint_name,
            status="InService",
            config_name="local",
            instance_type="local",
            instance_count=1,
            extra={"url": state.url, "pid": state.pid, "log": state.log},
        )
