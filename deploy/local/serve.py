"""`deploy serve`: run a local endpoint in the foreground until SIGINT/SIGTERM."""

from __future__ import annotations

import logging
import signal
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TypeVar

from deploy.errors import LocalEndpointError
from deploy.local.endpoint import EndpointOptions, LocalEndpoint
from deploy.local.store import MANIFEST

log = logging.getLogger(__name__)

E = TypeVar("E", bound=LocalEndpoint)


def resolve_store(location: str, *, package_dir: Path | None = None) -> str:
    """A store as given, or a model repository packaged first (`deploy package`)."""
    if location.startswith("s3://"):
        return location
    path = Path(location)
    if (path / MANIFEST).is_file() or any(path.glob("*.tar.gz")):
        return str(path)
    if not any(path.glob("*/config.pbtxt")):
        raise LocalEndpointError(
            "neither a model store (manifest.json, *.tar.gz) nor a model repository "
            "(*/config.pbtxt)",
            where=str(path),
            fix="pass the folder `deploy package` wrote, an s3:// store, or a repository",
        )
    from deploy.packaging import package_repository

    out = package_dir or Path(tempfile.mkdtemp(prefix="deploy-serve-store-"))
    log.info("packaging repository %s into %s", path, out)
    package_repository(path, out)
    return str(out)


def serve_forever(
    store: str, options: EndpointOptions, ready: threading.Event | None = None
) -> None:
    """Start the endpoint, log its URL, block until SIGINT/SIGTERM, stop it."""

    def started(endpoint: LocalEndpoint) -> None:
        log.info(
            "endpoint %r serving %s at %s (tritonserver log: %s)",
            endpoint.endpoint_name,
            endpoint.store.location,
            endpoint.url,
            endpoint.supervisor.log_path,
        )

    serve_until_signal(lambda: LocalEndpoint(store, options=options), started, ready)


def serve_until_signal(
    open_endpoint: Callable[[], E],
    started: Callable[[E], None],
    ready: threading.Event | None = None,
) -> None:
    """Open and start an endpoint, call `started`, block until SIGINT/SIGTERM (or
    tritonserver gives up restarting), then stop it and restore the signal handlers."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    endpoint = open_endpoint()
    try:
        endpoint.start()
        started(endpoint)
        if ready is not None:
            ready.set()
        while not stop.wait(0.5):
            supervisor = endpoint.supervisor
            if not supervisor.ready and supervisor.restarts >= supervisor.max_restarts:
                raise LocalEndpointError(
                    "tritonserver keeps crashing; the endpoint stops",
                    where=str(supervisor.log_path),
                    fix="read the log named here",
                )
    finally:
        log.info("stopping endpoint %r", endpoint.endpoint_name)
        endpoint.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
