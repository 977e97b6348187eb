"""`deploy up/status/down --local`: the local endpoint as a deployment provider.

Implements `deploy.lifecycle.provider.Provider` so `deploy up --local` runs
the same stages as `deploy up` on AWS, for each hosting mode the local endpoint
serves without S3 (`HostingMode.local`). "Upload" links the package's archives
into a store folder under `.deploy/local/<endpoint>/store`, "provision" starts
`deploy serve --hosting MODE` as a detached background process (on that store;
a router layout's one archive is extracted first, under `served/`, and a new
archive restarts the endpoint, as a new SageMaker Model would), and "publish"
writes the manifest where the mode keeps it. The running endpoint is recorded in the
state file of `deploy.local.state` (which `deploy serve` also writes), so
`status` and `down` see an endpoint started either way.

Hosting components: as on SageMaker, the plan has one action per component, and
the components are made before the manifest is published (so the smoke test
calls each by its InferenceComponentName) and deleted after. Here they are the
store's `components.json` (`deploy.local.modes.components.write_created`), each
with its model's archive and the stage's `min_copies`, which the endpoint reads.
The endpoint runs with the stage's settings (`DEPLOY_STAGE`).
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
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from deploy.client import manifest as contract
from deploy.config import STAGE_ENV
from deploy.errors import LocalEndpointError
from deploy.hosting import MODES, HostingMode, StoredFile, default_mode
from deploy.hosting.component_sizing import Component
from deploy.lifecycle.actions import CreateComponent, UpdateComponent
from deploy.lifecycle.components import ComponentChange
from deploy.lifecycle.manifest_writes import ManifestBasis, file_version, publish_file
from deploy.lifecycle.plan import InfraSpec
from deploy.lifecycle.provider import (
    DataPlane,
    EndpointView,
    InfraPlan,
    Reporter,
    UploadOutcome,
)
from deploy.local.http import metrics
from deploy.local.http.wire import MANIFEST_ROUTE
from deploy.local.state import (
    LOCAL_HOST,
    STATE_DIR,
    LocalState,
    alive,
    check_port_free,
    endpoint_dir,
    read_state,
    state_path,
    triton_log_path,
    write_state,
)
from deploy.local.triton.supervisor import free_port


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
    region_source: str | None = None  # no region: this machine
    # The modes the local endpoint serves with no S3 (async keeps its requests there).
    hostings: tuple[str, ...] = tuple(
        name for name, mode in MODES.items() if mode.local and not mode.local.through_s3
    )

    def __init__(
        self,
        endpoint_name: str = "local",
        *,
        state_dir: Path = STATE_DIR,
        port: int = 0,
        max_loaded_models: int | None = None,
        start_timeout_s: float = 60.0,
        mode: HostingMode | None = None,
        stage: str | None = None,
        scale_to_zero_after: float | None = None,
    ) -> None:
        self.mode = mode or default_mode()
        # Hosting components: idle copies of min_copies 0 unload (`deploy serve` flag).
        self.scale_to_zero_after = scale_to_zero_after
        self.stage = stage  # the deploy.toml stage `deploy serve` reads (None: its default)
        self.archive_key: str | None = None  # router layouts: the archive to serve
        self.endpoint_name = endpoint_name
        self.state_dir = state_dir
        self.port = port  # 0: any free port
        self.max_loaded_models = max_loaded_models
        self.start_timeout_s = start_timeout_s
        self.store_dir = endpoint_dir(endpoint_name, state_dir) / "store"
        # What the next manifest publish replaces: the first read since the last publish.
        self.manifest_basis: ManifestBasis | None = None
        # Router layouts: each archive served, extracted (the newest is kept).
        self.served_dir = endpoint_dir(endpoint_name, state_dir) / "served"
        self.state_path = state_path(endpoint_name, state_dir)
        self.log_path = endpoint_dir(endpoint_name, state_dir) / "serve.log"
        self.triton_log_path = triton_log_path(endpoint_name, state_dir)

    # -- state ---------------------------------------------------------------
    def state(self) -> LocalState | None:
        """The running endpoint (started by `deploy up --local` or `deploy serve`), or None."""
        return read_state(self.endpoint_name, self.state_dir)

    def _ours(self) -> LocalState | None:
        """The running endpoint, refusing one that serves another store (`deploy serve`)."""
        state = self.state()
        if state is not None and not self._serves_ours(Path(state.store).resolve()):
            raise LocalEndpointError(
                f"endpoint {self.endpoint_name!r} at {state.url} is `deploy serve` of "
                f"{state.store}, not the store `deploy up --local` publishes to",
                where=f"local endpoint {self.endpoint_name} (pid {state.pid})",
                fix="stop it (`deploy down --local`, or Ctrl-C where it runs), "
                "or pass another --endpoint-name",
            )
        return state

    def _serves_ours(self, store: Path) -> bool:
        return store in (self.store_dir.resolve(), *self.served_dir.resolve().glob("*"))

    @property
    def _router(self) -> bool:
        return self.mode.local is not None and self.mode.local.router

    def _served(self) -> Path:
        """What the endpoint serves: the store, or the archive extracted (router layouts)."""
        if not self._router:
            return self.store_dir
        if self.archive_key is None:
            raise LocalEndpointError(
                f"hosting {self.mode.name} serves one archive, and none was packaged",
                where=f"local endpoint {self.endpoint_name}",
                fix="run `deploy up --local` without skipping packaging",
            )
        return self.served_dir / Path(self.archive_key).name.removesuffix(".tar.gz")

    # -- Provider protocol -------------------------------------------------------
    def unavailable(self) -> str | None:
        return None

    def published_manifest(self) -> dict[str, Any] | None:
        path = self.store_dir / self.mode.manifest_key
        if self.manifest_basis is None:
            self.manifest_basis = ManifestBasis(file_version(path))
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
        current = self._ours()
        if current is None:
            check_port_free(LOCAL_HOST, self.port)  # before anything is uploaded
            action: Literal["create", "update", "none"] = "create"
        elif Path(current.store).resolve() != self._served().resolve():
            action = "update"  # a new archive: the endpoint restarts on it
        else:
            action = "none"
        return InfraPlan(
            action=action,
            current=None,
            changes=(),
            resources=(
                {"type": "local endpoint", "name": self.endpoint_name, "at": str(self.store_dir)},
            ),
        )

    def use_model_archive(self, key: str) -> None:
        if self._router:
            self.archive_key = key
            return
        raise LocalEndpointError(
            "the local provider serves one archive per model (multi-model)",
            where=f"local endpoint {self.endpoint_name}",
            fix="serve a router layout with `deploy serve --hosting single-model REPO`",
        )

    def require_provisioning_tools(self, resources: Sequence[str]) -> None:
        return None  # `deploy serve` on this machine: checked by `deploy up --local` itself

    def upload(self, files: Sequence[StoredFile], reporter: Reporter) -> list[UploadOutcome]:
        outcomes = []
        reporter.upload_started(len(files), sum(file.path.stat().st_size for file in files))
        for file in files:
            source = file.path
            destination = self.store_dir / file.key
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
            outcomes.append(UploadOutcome(file.key, size, 1, 0, False))
        reporter.upload_finished()
        return outcomes

    def provision_resources(self, resources: Sequence[str], reporter: Reporter) -> None:
        """Start the endpoint (the one resource `plan_infra` lists); a running one serves an
        older archive (`plan_infra` said update), so it stops first."""
        if resources:
            if self._ours() is not None:
                self.stop()
            self.start(timeout_s=self.start_timeout_s)

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
        """Publish if the manifest is still the version read first (manifest_writes)."""
        path = self.store_dir / self.mode.manifest_key
        basis = self.manifest_basis or ManifestBasis(file_version(path))
        lock = self.store_dir.parent / "manifest.lock"
        self.manifest_basis = publish_file(path, document, basis, lock)

    # -- inference components (hosting components) ---------------------------------
    def plan_components(self, desired: Sequence[Component]) -> tuple[ComponentChange, ...]:
        """Each component against the one the store's `components.json` holds: create,
        update (another archive, or other copy bounds) or delete."""
        from deploy.local.modes.components import read_created

        made = read_created(self.store_dir)
        changes = []
        for component in sorted(desired, key=lambda c: c.model):
            now = made.get(component.name)
            if now is None:
                changes.append(
                    ComponentChange(component.name, component.model, "create", ("new",), component)
                )
                continue
            respec = now.target_model != component.archive_key
            rescale = now.min_copies != component.spec.min_copies
            reasons = [f"archive {component.archive_key} (was {now.target_model})"] * respec
            reasons += [f"min_copies {component.spec.min_copies} (was {now.min_copies})"] * rescale
            if reasons:
                changes.append(
                    ComponentChange(
                        component.name,
                        component.model,
                        "update",
                        tuple(reasons),
                        component,
                        respec=respec,
                        rescale=rescale,
                    )
                )
        wanted = {component.name for component in desired}
        for name in sorted(set(made) - wanted):
            changes.append(
                ComponentChange(
                    name, made[name].model, "delete", ("its model is no longer in the repository",)
                )
            )
        return tuple(changes)

    def apply_components(
        self, actions: Sequence[CreateComponent | UpdateComponent], reporter: Reporter
    ) -> None:
        """Record the created and updated components, then wait until the running
        endpoint serves each with its archive (as `deploy up` waits for InService)."""
        from deploy.local.modes.components import Component as Made
        from deploy.local.modes.components import read_created, write_created

        if not actions:
            return
        made = read_created(self.store_dir)
        for action in actions:
            component = action.component
            made[action.name] = Made(
                action.name, component.model, component.archive_key, component.spec.min_copies
            )
        write_created(self.store_dir, made)
        self._wait_components({a.name: a.component.archive_key for a in actions})

    def _wait_components(self, targets: dict[str, str]) -> None:
        state = self._ours()
        if state is None:
            return  # it reads them when it starts
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            with contextlib.suppress(OSError, ValueError):
                status, body = _get(state.url, "/models")
                listed = json.loads(body).get("components", {}) if status == 200 else {}
                served = {name: entry.get("target_model") for name, entry in listed.items()}
                if all(served.get(name) == key for name, key in targets.items()):
                    return
            if time.monotonic() > deadline:
                raise LocalEndpointError(
                    f"the local endpoint did not take component(s) {', '.join(sorted(targets))} "
                    f"within {self.start_timeout_s:g} s (--timeout); the manifest was not "
                    "published",
                    where=state.log,
                    fix="read the log named here, then re-run `deploy up --local`",
                )
            time.sleep(0.2)

    def delete_components(self, names: Sequence[str], reporter: Reporter) -> None:
        from deploy.local.modes.components import read_created, write_created

        made = read_created(self.store_dir)
        write_created(self.store_dir, {n: c for n, c in made.items() if n not in names})

    def store_bucket(self) -> str | None:
        return None  # a folder on this machine

    # -- background process ------------------------------------------------------
    def start(self, *, timeout_s: float = 60.0) -> LocalState:
        """Start `deploy serve` on the store in the background (once)."""
        existing = self._ours()
        if existing is not None:
            return existing
        self.store_dir.mkdir(parents=True, exist_ok=True)
        check_port_free(LOCAL_HOST, self.port)
        served = self._extracted() if self._router else self.store_dir
        port = self.port or free_port()
        command = [
            sys.executable,
            "-m",
            "deploy",
            "serve",
            str(served.resolve()),
            "--hosting",
            self.mode.name,
            "--port",
            str(port),
            "--endpoint-name",
            self.endpoint_name,
            "--state-dir",
            str(self.state_dir.resolve()),
        ]
        if self.max_loaded_models:
            command += ["--max-loaded-models", str(self.max_loaded_models)]
        if self.scale_to_zero_after is not None:
            command += ["--scale-to-zero-after", f"{self.scale_to_zero_after:g}"]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # posix_spawn, not Popen: nothing here waits for the process, it outlives this
        # command (its own session, so no terminal signal reaches it).
        environment = dict(os.environ)
        if self.stage is not None:
            environment[STAGE_ENV] = self.stage  # its [stages.X] settings (min_copies)
        pid = os.posix_spawn(
            sys.executable,
            command,
            environment,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (
                    os.POSIX_SPAWN_OPEN,
                    1,
                    str(self.log_path),
                    os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                    0o666,
                ),
                (os.POSIX_SPAWN_DUP2, 1, 2),
            ],
            setsid=True,
        )
        # Recorded now so `down` can stop it while it starts; `deploy serve` rewrites
        # the record (same pid) once it listens.
        state = LocalState(
            endpoint_name=self.endpoint_name,
            pid=pid,
            port=port,
            url=f"http://{LOCAL_HOST}:{port}",
            log=str(self.log_path.resolve()),
            store=str(served.resolve()),
            started_at=time.time(),
            triton_log=str(self.triton_log_path.resolve()),
        )
        write_state(state, self.state_dir)
        try:
            self._wait_ready(state, timeout_s)
        except LocalEndpointError:
            self.stop()
            raise
        return state

    def check_idle_setting(self) -> None:
        """Refuse a --scale-to-zero-after other than the running endpoint's (it keeps
        the setting it started with); nothing to check when none runs."""
        if self.scale_to_zero_after is None:
            return
        state = self._ours()
        if state is None:
            return
        running: object = None
        with contextlib.suppress(OSError, ValueError):
            status, body = _get(state.url, "/models")
            if status == 200:
                running = json.loads(body).get("scale_to_zero_after")
        if running != self.scale_to_zero_after:
            raise LocalEndpointError(
                f"endpoint {self.endpoint_name!r} at {state.url} is running with "
                f"--scale-to-zero-after {_seconds(running)}, "
                f"not {self.scale_to_zero_after:g}; a running endpoint keeps the setting "
                "it started with",
                where=f"local endpoint {self.endpoint_name} (pid {state.pid})",
                fix="`deploy down --local`, then run `deploy up --local` again",
            )

    def _extracted(self) -> Path:
        """The router archive extracted under `served/` (once); older ones removed."""
        from deploy.local.models.archive import extract_archive

        served = self._served()
        if not served.is_dir():
            assert self.archive_key is not None  # `_served` refuses none
            partial = served.with_name(served.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.parent.mkdir(parents=True, exist_ok=True)
            archive = self.store_dir / self.archive_key
            extract_archive(archive, partial, name=self.archive_key)
            partial.rename(served)
        for other in self.served_dir.iterdir():
            if other != served:
                shutil.rmtree(other, ignore_errors=True)
        return served

    def _wait_ready(self, state: LocalState, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not alive(state.pid):
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
            f"the local endpoint did not answer /ping within {timeout_s:g} s (--timeout)",
            where=state.log,
            fix="read the log named here",
        )

    def status(self) -> dict[str, Any]:
        """The endpoint's record, its `/models` listing, and `models`: each logical
        name of the manifest it serves with its current TargetModel and load state;
        `calls`: its `/metrics` per (model, TargetModel): calls, errors, p50/p99."""
        state = self.state()
        if state is None:
            return {"endpoint_name": self.endpoint_name, "status": "NotRunning"}
        document: dict[str, Any] = {"status": "InService", **asdict(state)}
        try:
            status, body = _get(state.url, "/models")
            manifest_status, manifest_body = _get(state.url, MANIFEST_ROUTE)
            metrics_status, metrics_body = _get(state.url, "/metrics")
        except OSError as exc:
            document["status"] = f"Unreachable ({exc})"
            return document
        if status == 200:
            document.update(json.loads(body))
        manifest = None
        if manifest_status == 200:
            # A manifest the endpoint cannot vouch for lists no models (as none at all).
            with contextlib.suppress(contract.ManifestFormatError):
                manifest = contract.loads(manifest_body, state.url + MANIFEST_ROUTE)
        document["models"] = _models(manifest, document.get("loaded", []))
        if metrics_status == 200:
            try:
                samples = metrics.parse(metrics_body.decode("utf-8"))
            except (metrics.ExpositionError, UnicodeDecodeError, ValueError) as exc:
                raise LocalEndpointError(
                    f"the local endpoint's /metrics is not the Prometheus text format: {exc}",
                    where=state.url + "/metrics",
                    fix="stop it (deploy down --local) and start it again with this version",
                ) from exc
            document["calls"] = metrics.per_model(samples)
        return document

    def stop(self, *, timeout_s: float = 20.0) -> LocalState | None:
        """SIGINT the endpoint, SIGKILL after `timeout_s`; what was stopped, or None."""
        state = self.state()
        if state is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.pid, signal.SIGINT)
        deadline = time.monotonic() + timeout_s
        while alive(state.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if alive(state.pid):
            try:
                os.killpg(state.pid, signal.SIGKILL)  # `deploy up --local`'s: its own group
            except ProcessLookupError:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(state.pid, signal.SIGKILL)
        self.state_path.unlink(missing_ok=True)
        return state

    def _view(self, state: LocalState) -> EndpointView:
        return EndpointView(
            name=self.endpoint_name,
            status="InService",
            config_name="local",
            instance_type="local",
            instance_count=1,
            extra={"url": state.url, "pid": state.pid, "log": state.log},
        )


def _models(manifest: contract.Manifest | None, loaded: list[Any]) -> list[dict[str, Any]]:
    """Logical models (manifest order by name) with their TargetModel and load state;
    loaded TargetModels the manifest no longer names follow, with no name."""
    by_target = {m["target_model"]: m for m in loaded if isinstance(m, dict)}
    loaded_names = {m for m in loaded if isinstance(m, str)}  # single-model: model names
    rows = []
    for name, entry in sorted((manifest.models if manifest is not None else {}).items()):
        target = entry.target_model
        model = by_target.pop(target, None)
        rows.append(
            {
                "name": name,
                "target_model": target,
                "loaded": model is not None or name in loaded_names,
                "bytes": model["bytes"] if model else None,
                "load_seconds": model["load_seconds"] if model else None,
            }
        )
    for target, model in sorted(by_target.items()):
        rows.append(
            {
                "name": None,
                "target_model": target,
                "loaded": True,
                "bytes": model["bytes"],
                "load_seconds": model["load_seconds"],
            }
        )
    return rows


def _seconds(value: object) -> str:
    """A listed --scale-to-zero-after as it is typed (2, not 2.0), or "unset"."""
    return f"{value:g}" if isinstance(value, (int, float)) else "unset"
