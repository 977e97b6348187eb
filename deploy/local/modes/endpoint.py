"""One running local endpoint: supervisor + platform + front end.

The front end runs its own event loop (uvloop when installed) in a thread,
so the endpoint can be embedded (tests, `deploy up --local`'s smoke test)
or run in the foreground (`deploy serve`). tritonserver is started from the
calling thread: its death signal fires when that thread ends, so start the
endpoint from a thread that lives as long as the endpoint (the main one).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deploy.client import manifest as contract
from deploy.errors import LocalEndpointError
from deploy.local.http import wire
from deploy.local.http.connections import ConnectionLimits
from deploy.local.http.frontend import FrontEnd
from deploy.local.models.archive import DEFAULT_MAX_EXTRACTED_BYTES
from deploy.local.models.platform import ModelPlatform
from deploy.local.models.store import open_store
from deploy.local.triton.guard import Clients
from deploy.local.triton.supervisor import TritonSupervisor

log = logging.getLogger(__name__)


@dataclass
class EndpointOptions:
    endpoint_name: str = "local"
    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port
    triton_port: int | None = None
    max_models: int | None = None
    max_bytes: int | None = None
    max_payload: int = wire.DEFAULT_MAX_PAYLOAD
    max_archive_bytes: int = DEFAULT_MAX_EXTRACTED_BYTES
    model_wait: float = 120.0
    invoke_timeout: float = 60.0
    verbose: bool = False
    auto_complete_config: bool = False  # Triton's config auto-completion (slower loads)
    triton_log: Path | None = None  # None: in the work folder (removed on stop)
    connection_limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    # Who may connect to tritonserver's loopback port: this process (the front end)
    # only, or any process of this user (benchmarks that call Triton directly).
    triton_clients: Clients = "endpoint"


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class LocalEndpoint:
    """A SageMaker multi-model endpoint on this machine."""

    def __init__(
        self,
        store: str | Path,
        *,
        work_dir: Path | None = None,
        options: EndpointOptions | None = None,
    ) -> None:
        self.options = options or EndpointOptions()
        self.store = open_store(store)
        self._own_work_dir = work_dir is None
        self.work_dir = work_dir or Path(tempfile.mkdtemp(prefix="deploy-local-"))
        self.supervisor = TritonSupervisor(
            self.work_dir / "triton",
            port=self.options.triton_port,
            verbose=self.options.verbose,
            auto_complete=self.options.auto_complete_config,
            log_path=self.options.triton_log,
            clients=self.options.triton_clients,
        )
        self.platform = ModelPlatform(
            self.store,
            self.work_dir / "models",
            self.supervisor,
            max_models=self.options.max_models,
            max_bytes=self.options.max_bytes,
            max_archive_bytes=self.options.max_archive_bytes,
            auto_complete=self.options.auto_complete_config,
        )
        self.supervisor.on_crash.append(self.platform.server_crashed)
        self.supervisor.on_restart.append(self.platform.server_restarted)
        self.supervisor.on_exit.append(self.platform.close)
        self.frontend = FrontEnd(
            self.platform,
            lambda: self.supervisor.ready,
            lambda: self.supervisor.crashes,
            endpoint_name=self.options.endpoint_name,
            max_payload=self.options.max_payload,
            model_wait=self.options.model_wait,
            invoke_timeout=self.options.invoke_timeout,
            log_path=str(self.supervisor.log_path),
            manifest=self._served_manifest,
            limits=self.options.connection_limits,
        )
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False

    @property
    def url(self) -> str:
        return f"http://{self.options.host}:{self.port}"

    @property
    def endpoint_name(self) -> str:
        return self.options.endpoint_name

    def start(self) -> LocalEndpoint:
        self.supervisor.start()
        loop = _new_loop()
        started: asyncio.Future[int] = loop.create_future()

        async def serve() -> None:
            try:
                port = await self.frontend.start(self.options.host, self.options.port)
            except OSError as exc:
                started.set_exception(exc)
                return
            started.set_result(port)

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.create_task(serve())
            loop.run_forever()
            loop.run_until_complete(self.frontend.close())
            loop.close()

        self._loop = loop

        # Calls in flight when tritonserver dies fail at once instead of waiting out
        # the invoke timeout.
        def abort_calls_in_flight() -> None:
            loop.call_soon_threadsafe(
                self.frontend.upstream.abort_all, "tritonserver died while serving the call"
            )

        self.supervisor.on_crash.append(abort_calls_in_flight)
        self._thread = threading.Thread(target=run, name="local-endpoint", daemon=True)
        self._thread.start()
        done = threading.Event()
        loop.call_soon_threadsafe(lambda: started.add_done_callback(lambda _: done.set()))
        done.wait(30)
        if not started.done() or started.exception() is not None:
            self.stop()
            raise LocalEndpointError(
                f"cannot listen on {self.options.host}:{self.options.port}: "
                f"{started.exception() if started.done() else 'timed out'}",
                where="local endpoint",
                fix="pick another --port",
            )
        self.port = started.result()
        log.info("local endpoint %r at %s", self.endpoint_name, self.url)
        return self

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self.supervisor.stop()
        if self._own_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def _served_manifest(self) -> contract.Manifest | None:
        """The store's manifest as the endpoint serves it (GET /deploy/manifest.json)."""
        return self.store.manifest()

    def listing(self) -> dict[str, Any]:
        document = self.platform.listing()
        document["endpoint_name"] = self.endpoint_name
        document["url"] = self.url
        return document

    def __enter__(self) -> LocalEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
