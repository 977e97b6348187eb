"""`deploy serve`: run a local endpoint in the foreground until SIGINT/SIGTERM.

While it serves, the endpoint is recorded in the state file
(`deploy.local.state`) so `deploy status/invoke/down --local` find it; the
record goes when it stops. A repository given instead of a store is packaged
into a temporary folder that is removed on exit, SIGTERM and SIGINT included.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TypeVar

from deploy.errors import LocalEndpointError
from deploy.local.models.store import MANIFEST
from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint
from deploy.local.state import (
    STATE_DIR,
    LocalState,
    read_state,
    remove_state,
    rotate_log,
    triton_log_path,
    write_state,
)

log = logging.getLogger(__name__)

E = TypeVar("E", bound=LocalEndpoint)


def is_store(location: str) -> bool:
    """An s3:// store or a folder `deploy package` wrote (not a repository to package)."""
    if location.startswith("s3://"):
        return True
    path = Path(location)
    return (path / MANIFEST).is_file() or any(path.glob("*.tar.gz"))


def _needs_packaging(location: str) -> bool:
    if is_store(location):
        return False
    path = Path(location)
    # A model folder holds config.pbtxt or numbered version folders: python models
    # whose config comes from auto_complete_config have only the latter.
    if not any(path.glob("*/config.pbtxt")) and not any(
        version.name.isdigit() for version in path.glob("[!.]*/*") if version.is_dir()
    ):
        raise LocalEndpointError(
            "neither a model store (manifest.json, *.tar.gz) nor a model repository "
            "(*/config.pbtxt or */<version>/)",
            where=str(path),
            fix="pass the folder `deploy package` wrote, an s3:// store, or a repository",
        )
    return True


def resolve_store(location: str, *, package_dir: Path | None = None) -> str:
    """A store as given, or a model repository packaged first (`deploy package`).

    Without `package_dir` the package goes to a new temporary folder that the
    caller owns; `store_for` removes it."""
    if not _needs_packaging(location):
        return location
    from deploy.packaging import package_repository

    out = package_dir or Path(tempfile.mkdtemp(prefix="deploy-serve-store-"))
    log.info("packaging repository %s into %s", location, out)
    package_repository(Path(location), out)
    return str(out)


@contextlib.contextmanager
def store_for(location: str, *, package_dir: Path | None = None) -> Iterator[str]:
    """`resolve_store`, removing a temporary package folder when the block ends."""
    temporary: Path | None = None
    if package_dir is None and _needs_packaging(location):
        temporary = Path(tempfile.mkdtemp(prefix="deploy-serve-store-"))
    try:
        yield resolve_store(location, package_dir=package_dir or temporary)
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
            log.info("removed the temporary store %s", temporary)


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt (as SIGINT does), so `finally` blocks run
    while the endpoint is not yet serving (packaging, starting)."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def serve_forever(
    location: str,
    options: EndpointOptions,
    ready: threading.Event | None = None,
    *,
    package_dir: Path | None = None,
    state_dir: Path | None = STATE_DIR,
) -> None:
    """Start the endpoint, record it, block until SIGINT/SIGTERM, stop it.

    `state_dir=None` records nothing and keeps tritonserver's log in the work
    folder (removed on stop)."""
    with _sigterm_interrupts():
        prepare_record(options, state_dir)
        with store_for(location, package_dir=package_dir) as store:

            def started(endpoint: LocalEndpoint) -> None:
                log.info(
                    "endpoint %r serving %s at %s",
                    endpoint.endpoint_name,
                    endpoint.store.location,
                    endpoint.url,
                )
                log.info("tritonserver log: %s", endpoint.supervisor.log_path)
                if state_dir is not None:
                    record(endpoint, endpoint.store.location, state_dir)

            serve_until_signal(
                lambda: LocalEndpoint(store, options=options),
                started,
                ready,
                state_dir=state_dir,
            )


def prepare_record(options: EndpointOptions, state_dir: Path | None) -> None:
    """Refuse a second endpoint of the same name; put tritonserver's log beside the
    state file, where it outlives the endpoint."""
    if state_dir is None:
        return
    running = read_state(options.endpoint_name, state_dir)
    # `deploy up --local` records the process it spawns before it runs: that is us.
    if running is not None and running.pid != os.getpid():
        raise LocalEndpointError(
            f"endpoint {options.endpoint_name!r} already runs at {running.url} (pid {running.pid})",
            where=f"local endpoint {options.endpoint_name}",
            fix="stop it with `deploy down --local`, or pass another --endpoint-name",
        )
    if options.triton_log is None:
        options.triton_log = rotate_log(triton_log_path(options.endpoint_name, state_dir).resolve())


def record(endpoint: LocalEndpoint, store: str, state_dir: Path) -> LocalState:
    """Write this process's endpoint into the state file."""
    previous = read_state(endpoint.endpoint_name, state_dir)
    own_log = previous.log if previous is not None and previous.pid == os.getpid() else ""
    state = LocalState(
        endpoint_name=endpoint.endpoint_name,
        pid=os.getpid(),
        port=endpoint.port,
        url=endpoint.url,
        log=own_log,
        store=store,
        started_at=time.time(),
        triton_log=str(endpoint.supervisor.log_path.resolve()),
    )
    write_state(state, state_dir)
    return state


def serve_until_signal(
    open_endpoint: Callable[[], E],
    started: Callable[[E], None],
    ready: threading.Event | None = None,
    *,
    state_dir: Path | None = None,
) -> None:
    """Open and start an endpoint, call `started`, block until SIGINT/SIGTERM (or
    tritonserver gives up restarting), then stop it, remove its record from
    `state_dir` and restore the signal handlers."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    endpoint: E | None = None
    try:
        endpoint = open_endpoint()
        endpoint.start()
        started(endpoint)
        if ready is not None:
            ready.set()
        while not stop.wait(0.5):
            supervisor = endpoint.supervisor
            if supervisor.gave_up:
                raise LocalEndpointError(
                    f"tritonserver crashed more than {supervisor.max_restarts} times within "
                    f"{supervisor.restart_window:g}s; the endpoint stops",
                    where=str(supervisor.log_path),
                    fix="read the log named here",
                )
    finally:
        if endpoint is not None:
            log.info("stopping endpoint %r", endpoint.endpoint_name)
            endpoint.stop()
            if state_dir is not None:
                remove_state(endpoint.endpoint_name, os.getpid(), state_dir)
            if endpoint.options.triton_log is not None:
                log.info("tritonserver log kept: %s", endpoint.options.triton_log)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
