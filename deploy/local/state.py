"""Where a running local endpoint is recorded, so other commands can find it.

`deploy serve` and `deploy up --local` (which runs `deploy serve` in the
background) write `.deploy/local/<endpoint>.json` in the working directory
once the endpoint answers, and `deploy serve` removes it when it stops.
`deploy status --local`, `deploy invoke --local` and `deploy down --local`
read it. tritonserver's log lives beside it, at
`.deploy/local/<endpoint>/tritonserver.log`, and outlives the endpoint (the
run before is kept as `tritonserver.log.1`).

Standard library only: `deploy invoke --local` imports this without the
local endpoint's own dependencies.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

from deploy._files import atomic_write_bytes, pid_exists
from deploy.errors import LocalEndpointError

STATE_DIR = Path(".deploy") / "local"
DEFAULT_ENDPOINT = "local"
LOCAL_HOST = "127.0.0.1"
TRITON_LOG = "tritonserver.log"


@dataclass
class LocalState:
    """One running local endpoint."""

    endpoint_name: str
    pid: int  # the `deploy serve` process
    port: int
    url: str
    log: str  # that process's own output ("" when it runs on a terminal)
    store: str
    started_at: float
    triton_log: str = ""  # tritonserver's log (kept after the endpoint stops)


def state_path(endpoint_name: str, state_dir: Path = STATE_DIR) -> Path:
    return state_dir / f"{endpoint_name}.json"


def endpoint_dir(endpoint_name: str, state_dir: Path = STATE_DIR) -> Path:
    """The endpoint's own folder: its store (`deploy up --local`) and logs."""
    return state_dir / endpoint_name


def triton_log_path(endpoint_name: str, state_dir: Path = STATE_DIR) -> Path:
    return endpoint_dir(endpoint_name, state_dir) / TRITON_LOG


def alive(pid: int) -> bool:
    if not pid_exists(pid):
        return False
    # A zombie child of this process counts as gone.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def read_state(endpoint_name: str, state_dir: Path = STATE_DIR) -> LocalState | None:
    """The recorded endpoint, or None (a record whose process is gone is removed)."""
    path = state_path(endpoint_name, state_dir)
    if not path.is_file():
        return None
    try:
        state = LocalState(**json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, TypeError) as exc:
        raise LocalEndpointError(
            f"state file is unreadable: {exc}",
            where=str(path),
            fix="stop the process by hand if it runs, then delete the file",
        ) from exc
    if not alive(state.pid):
        path.unlink(missing_ok=True)
        return None
    return state


def write_state(state: LocalState, state_dir: Path = STATE_DIR) -> Path:
    path = state_path(state.endpoint_name, state_dir)
    atomic_write_bytes(path, json.dumps(asdict(state), indent=2).encode("utf-8"))
    return path


def remove_state(endpoint_name: str, pid: int, state_dir: Path = STATE_DIR) -> None:
    """Remove the record if it is `pid`'s (a newer endpoint's record stays)."""
    path = state_path(endpoint_name, state_dir)
    with contextlib.suppress(OSError, ValueError, TypeError):
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == pid:
            path.unlink()


def rotate_log(path: Path) -> Path:
    """Keep the previous run's log as `<name>.1`; returns `path`, ready to write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.replace(path.with_name(path.name + ".1"))
    return path


def check_port_free(host: str, port: int) -> None:
    """Raise a clear error when something already listens on `host:port`."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise LocalEndpointError(
                f"port {port} is in use ({exc.strerror or exc})",
                where=f"{host}:{port}",
                fix="stop what listens there (`deploy down --local` if it is an endpoint), "
                "or pass --port N (0: any free port)",
            ) from exc
