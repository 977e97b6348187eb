"""Runs tritonserver as SageMaker runs it in multi-model mode, and keeps it running.

Modelled on pytriton's `server/triton_server.py`: one start per supervisor,
the child dies with its parent (PR_SET_PDEATHSIG), stop is SIGINT, then
SIGKILL after a timeout, logs go to a file, readiness is `GET /ping` on the
SageMaker port. A crash (any exit not asked for) restarts the server on the
same port (another if that was taken meanwhile) and then runs the
`on_restart` callbacks, which reload the models that were loaded. The
restart budget is a rate: more than `max_restarts` crashes within
`restart_window` seconds and the supervisor gives up (a server that crashes
now and then keeps being restarted). Exit callbacks run once, when the
supervisor stops for good.

The SageMaker port listens on 127.0.0.1 and admits only this process (see
`guard.py`). Another user may have bound that port first, so nothing is sent
to it, `/ping` included, before the listener on it is shown to be the
child's (`listener.py`); when it is another's, the server moves to a free
port, which is not a crash. Clients connect through `verified()` and
`still_verified()`: a connection opened while the verified child runs
reached it, since while it runs no other user can take the port.

Each server process gets its own prefix for the python backend's
shared-memory regions, and the regions of a server that exited are removed:
a crashed Triton never removes them itself, and they fill /dev/shm. The
guard makes them mode 0600.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import http.client
import logging
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from pathlib import Path

from deploy.errors import LocalEndpointError
from deploy.local.triton.guard import Clients, guard_environment
from deploy.local.triton.install import (
    TritonInstall,
    find_triton,
    prepare_backends,
    stub_working_directory,
    triton_environment,
)
from deploy.local.triton.listener import Holder, describe, holder, port_bound

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
SHM_DIR = Path("/dev/shm")
# The python backend's default prefix; ours add a per-process token after it, so
# `rm /dev/shm/triton_python_backend_shm_region_*` still matches them.
SHM_PREFIX = "triton_python_backend_shm_region_"
# Ports tried in one (re)start while other processes hold each one in turn.
PORT_MOVES = 16


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    # SIGKILL, not SIGTERM: tritonserver must not outlive a crashed parent.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _running(pid: int) -> bool:
    """Not exited, read from /proc: Popen.poll() answers "running" while the
    watcher thread is blocked in wait() on the same process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _reap_group(pgid: int) -> None:
    """SIGKILL what is left of a finished tritonserver's process group (its stubs)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def remove_shm_regions(prefix: str) -> list[str]:
    """Delete /dev/shm files whose names start with `prefix`; returns their names."""
    removed = []
    with contextlib.suppress(OSError):
        for path in SHM_DIR.glob(f"{prefix}*"):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path.name)
    return removed


def ping(port: int, timeout: float = 1.0) -> bool:
    """True when the SageMaker frontend on `port` answers `/ping` with 200."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", "/ping")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


class TritonSupervisor:
    """One tritonserver process in SageMaker multi-model mode.

    `on_crash` callbacks run (from the watcher thread) when the server died
    unexpectedly; `on_restart` callbacks run once the replacement is ready;
    `on_exit` callbacks run once when the supervisor stops or gives up.
    """

    # Models Triton loads at start (--load-model); none here, they arrive one by one.
    load_models: tuple[str, ...] = ()

    def __init__(
        self,
        workdir: Path,
        *,
        port: int | None = None,
        startup_timeout: float = 60.0,
        stop_timeout: float = 10.0,
        max_restarts: int = 5,
        restart_window: float = 60.0,
        verbose: bool = False,
        install: TritonInstall | None = None,
        environment: dict[str, str] | None = None,
        auto_complete: bool = False,
        log_path: Path | None = None,
        clients: Clients = "endpoint",
    ) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.log_path = log_path or workdir / "tritonserver.log"
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.max_restarts = max_restarts  # per restart_window seconds
        self.restart_window = restart_window
        self.clients = clients
        self.verbose = verbose
        # Off by default: the python backend's auto-complete pass starts an extra stub
        # per load (~1.2 s of a ~1.4 s load here). Models that need it are refused by
        # name at extraction (adapters.py) unless the endpoint runs with it on.
        self.auto_complete = auto_complete
        self.restarts = 0
        self.crashes = 0  # unexpected exits seen (the front end compares it per call)
        self.gave_up = False  # crashed more than max_restarts times in restart_window
        self._crash_times: deque[float] = deque()
        self.shm_prefix = ""  # the running server's shared-memory region prefix
        self.on_crash: list[Callable[[], None]] = []
        self.on_restart: list[Callable[[], None]] = []
        self.on_exit: list[Callable[[], None]] = []
        self._install = install
        self.environment = dict(environment or {})  # added to triton_environment()
        self._process: subprocess.Popen[bytes] | None = None
        self._starts = 0  # processes started, the current one's number
        # The running process shown to hold the port, its port and start number.
        self._trusted: tuple[subprocess.Popen[bytes], int, int] | None = None
        self._lock = threading.Lock()
        self._started = False
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._exited = False
        self._watcher: threading.Thread | None = None

    # -- public -----------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def ready(self) -> bool:
        """Answering /ping, and the process has not exited since (checked now)."""
        process = self._process
        return self._ready.is_set() and process is not None and _running(process.pid)

    def verified(self) -> tuple[int, int]:
        """The port of the running tritonserver that was shown to hold it, and a token
        for `still_verified`. ConnectionRefusedError while there is none (restarting).

        Connect to the port, then send nothing unless `still_verified(token)`: a
        child that ran before and after the connect held the port all along, so the
        connection reached it and not a process that took the port meanwhile."""
        trusted = self._trusted
        if trusted is None or not self._alive(trusted[0]):
            raise ConnectionRefusedError(errno.ECONNREFUSED, "tritonserver is not running")
        return trusted[1], trusted[2]

    def still_verified(self, token: int) -> bool:
        """True while the tritonserver that `verified()` gave `token` for runs."""
        trusted = self._trusted
        return trusted is not None and trusted[2] == token and self._alive(trusted[0])

    @staticmethod
    def _alive(process: subprocess.Popen[bytes]) -> bool:
        """Not exited: a zombie counts as exited (it no longer holds the port). One
        syscall that reaps nothing, since it runs on every new connection."""
        if process.returncode is not None:  # reaped by the watcher
            return False
        try:
            flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
            return os.waitid(os.P_PID, process.pid, flags) is None
        except ChildProcessError:  # reaped just now
            return False

    def wait_ready(self, timeout: float) -> bool:
        """Block until the server is ready (or `timeout` seconds pass)."""
        return self._ready.wait(timeout)

    def start(self) -> None:
        """Start tritonserver and wait until it answers `/ping`."""
        with self._lock:
            if self._started:
                raise LocalEndpointError(
                    "this tritonserver supervisor was already started",
                    where=f"tritonserver on port {self.port}",
                    fix="create a new supervisor, or stop() this one and use a new one",
                )
            self._started = True
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._launch()
        self._watcher = threading.Thread(target=self._watch, name="triton-watch", daemon=True)
        self._watcher.start()

    def stop(self) -> None:
        """SIGINT, then SIGKILL after `stop_timeout`; runs the exit callbacks once."""
        self._stopping.set()
        self._ready.clear()
        self._trusted = None
        with self._lock:
            process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                log.warning("tritonserver ignored SIGINT for %ss; killing it", self.stop_timeout)
                process.kill()
                process.wait()
        if process is not None:
            _reap_group(process.pid)
            remove_shm_regions(self.shm_prefix)
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(self.stop_timeout)
        self._run_exit_callbacks()

    # -- internals ----------------------------------------------------------
    def _repository(self) -> Path:
        """Triton's --model-repository: an empty one (models arrive by `POST /models`)."""
        repository = self.workdir / "empty-repository"
        repository.mkdir(parents=True, exist_ok=True)
        return repository

    def _command(self, install: TritonInstall) -> list[str]:
        repository = self._repository()
        backends = prepare_backends(install, self.workdir / "backends")
        return [
            str(install.binary),
            f"--model-repository={repository}",
            f"--backend-directory={backends}",
            "--model-control-mode=explicit",
            *(f"--load-model={model}" for model in self.load_models),
            "--model-namespacing=true",
            "--allow-sagemaker=true",
            f"--sagemaker-port={self.port}",
            "--allow-grpc=false",
            "--allow-http=false",
            "--allow-metrics=false",
            *([] if self.auto_complete else ["--disable-auto-complete-config"]),
            # SageMaker's own defaults for the python backend's shared memory.
            "--backend-config=python,shm-default-byte-size=16777216",
            "--backend-config=python,shm-growth-byte-size=1048576",
            f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}",
            f"--log-verbose={1 if self.verbose else 0}",
        ]

    def _spawn(self) -> None:
        install = self._install or find_triton()
        self._install = install
        self.shm_prefix = f"{SHM_PREFIX}deploy{uuid.uuid4().hex[:12]}_"
        command = self._command(install)
        environment = triton_environment(
            install, self.environment, backends=self.workdir / "backends"
        )
        environment.update(guard_environment(self.port, clients=self.clients, base=environment))
        log_file = self.log_path.open("ab")
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=environment,
                # The stub's sys.path starts with its cwd: an empty folder (triton.py).
                cwd=stub_working_directory(self.workdir / "backends"),
                preexec_fn=_die_with_parent,  # prctl must run in the child
                # Its own process group: the python-backend stubs it forks can be
                # reaped with it (they inherit its sockets; alive, they keep
                # clients' connections open after a crash).
                start_new_session=True,
            )
        except OSError as exc:
            raise LocalEndpointError(
                f"cannot start tritonserver: {exc}",
                where=str(install.binary),
                fix="check that the file is executable and its filesystem not mounted noexec",
            ) from exc
        finally:
            log_file.close()
        with self._lock:
            self._process = process
            self._starts += 1
        log.info("tritonserver pid %s on port %s (log %s)", process.pid, self.port, self.log_path)

    def _launch(self) -> None:
        """Start tritonserver and wait until it is ready, on another port while another
        process holds the one chosen."""
        for _ in range(PORT_MOVES):
            self._spawn()
            if self._wait_until_ready():
                return
            process = self._process
            assert process is not None  # set by _spawn
            process.kill()
            process.wait()
            _reap_group(process.pid)
            remove_shm_regions(self.shm_prefix)
            taken, self.port = self.port, free_port()
            log.warning("port %s is taken; tritonserver moves to port %s", taken, self.port)
        raise LocalEndpointError(
            f"another process took each of the {PORT_MOVES} ports tritonserver was started on",
            where=str(self.log_path),
            fix="find the process that binds free loopback ports (ss -ltnp) and stop it",
        )

    def _wait_until_ready(self) -> bool:
        """True once the child listens on the port and answers `/ping`; False when
        another process holds the port. The ping goes only to a listener shown to be
        the child's, and counts only if the child still holds it afterwards (had it
        died in between, the answer may have come from whoever took the port)."""
        deadline = time.monotonic() + self.startup_timeout
        process = self._process
        assert process is not None  # set by _spawn
        while time.monotonic() < deadline:
            found, others = holder(process.pid, self.port)
            if found is Holder.OTHER:
                log.warning(
                    "port %s, chosen for tritonserver, is held by another process: %s",
                    self.port,
                    describe(others),
                )
                return False
            if process.poll() is not None:
                if port_bound(self.port):  # bound, not listening: the child's bind failed
                    log.warning(
                        "port %s, chosen for tritonserver, is bound by another process", self.port
                    )
                    return False
                raise LocalEndpointError(
                    f"tritonserver exited with code {process.returncode} while starting",
                    where=str(self.log_path),
                    fix="read the log named here; a missing library is usual",
                )
            if (
                found is Holder.CHILD
                and ping(self.port)
                and holder(process.pid, self.port)[0] is Holder.CHILD
                and _running(process.pid)
            ):
                self._trusted = (process, self.port, self._starts)
                self._ready.set()
                return True
            time.sleep(0.05)
        process.kill()
        process.wait()
        raise LocalEndpointError(
            f"tritonserver did not answer /ping within {self.startup_timeout:.0f}s",
            where=str(self.log_path),
            fix="read the log named here",
        )

    def _over_budget(self) -> bool:
        """Record a crash; True when more than max_restarts fell within restart_window."""
        now = time.monotonic()
        self._crash_times.append(now)
        while self._crash_times and self._crash_times[0] < now - self.restart_window:
            self._crash_times.popleft()
        return len(self._crash_times) > self.max_restarts

    def _watch(self) -> None:
        while not self._stopping.is_set():
            process = self._process
            assert process is not None
            code = process.wait()
            self._trusted = None
            if not self._stopping.is_set():
                self.crashes += 1
            self._ready.clear()
            _reap_group(process.pid)
            removed = remove_shm_regions(self.shm_prefix)
            if self._stopping.is_set():
                break
            log.error(
                "tritonserver exited unexpectedly with code %s (%d shared-memory regions removed)",
                code,
                len(removed),
            )
            self._call(self.on_crash)
            if self._over_budget():
                self.gave_up = True
                log.error(
                    "tritonserver crashed %d times within %gs; giving up",
                    len(self._crash_times),
                    self.restart_window,
                )
                break
            self.restarts += 1
            try:
                self._launch()
            except LocalEndpointError as exc:
                log.error("restarting tritonserver failed: %s", exc)
                continue
            log.info("tritonserver restarted (restart %s)", self.restarts)
            self._call(self.on_restart)
        if not self._stopping.is_set():
            self._run_exit_callbacks()

    def _call(self, callbacks: list[Callable[[], None]]) -> None:
        for callback in list(callbacks):
            try:
                callback()
            except Exception:
                log.exception("supervisor callback %r failed", callback)

    def _run_exit_callbacks(self) -> None:
        with self._lock:
            if self._exited:
                return
            self._exited = True
        self._call(self.on_exit)

    def __enter__(self) -> TritonSupervisor:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.stop()
