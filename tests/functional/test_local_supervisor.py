"""The tritonserver supervisor, with real processes and real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from deploy.errors import LocalEndpointError
from deploy.local.triton.supervisor import TritonSupervisor, ping

pytestmark = [pytest.mark.triton]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purpose.
    with Path(f"/proc/{pid}/stat").open() as stat:
        return stat.read().split()[2] != "Z"


def wait_until(predicate: object, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_start_ping_stop_with_sigint_and_exit_callbacks_once(tmp_path: Path) -> None:
    calls: list[str] = []
    supervisor = TritonSupervisor(tmp_path)
    supervisor.on_exit.append(lambda: calls.append("exit"))
    supervisor.start()
    pid = supervisor.pid
    assert pid is not None and ping(supervisor.port)
    with pytest.raises(LocalEndpointError, match="already started"):
        supervisor.start()
    supervisor.stop()
    supervisor.stop()
    assert not alive(pid)
    assert calls == ["exit"]
    assert "Signal (2) received" in supervisor.log_path.read_text(errors="replace")


def test_stop_kills_a_server_that_ignores_sigint(tmp_path: Path) -> None:
    supervisor = TritonSupervisor(tmp_path, stop_timeout=1.0)
    supervisor.start()
    pid = supervisor.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # a stopped process cannot act on SIGINT
    started = time.monotonic()
    supervisor.stop()
    assert time.monotonic() - started < 10
    assert not alive(pid)


def test_crash_restarts_on_the_same_port_and_calls_back(tmp_path: Path) -> None:
    events: list[str] = []
    supervisor = TritonSupervisor(tmp_path)
    supervisor.on_crash.append(lambda: events.append("crash"))
    supervisor.on_restart.append(lambda: events.append("restart"))
    supervisor.start()
    try:
        first = supervisor.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        assert wait_until(lambda: events == ["crash", "restart"])
        assert supervisor.pid != first
        assert supervisor.ready and ping(supervisor.port)
        assert supervisor.restarts == 1
    finally:
        supervisor.stop()


def test_tritonserver_dies_with_its_parent(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from deploy.local.triton.supervisor import TritonSupervisor
        supervisor = TritonSupervisor(Path({str(tmp_path)!r}))
        supervisor.start()
        print(supervisor.pid, flush=True)
        time.sleep(600)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert alive(child)
        parent.kill()
        parent.wait()
        assert wait_until(lambda: not alive(child)), "tritonserver outlived its parent"
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
