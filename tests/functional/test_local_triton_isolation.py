"""tritonserver behind the local endpoint: reachable by the front end only, crashes contained.

GIVEN a supervised tritonserver (the real one, in SageMaker multi-model mode)
THEN its SageMaker port listens on the loopback address only and answers
only the process the front end runs in; a crash (a deeply nested JSON body
segfaults Triton 2.51) frees the server's shared memory; and the restart
budget is a rate, so occasional crashes never stop the endpoint for good.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.local.triton.supervisor import TritonSupervisor, ping
from tests.functional.local_models import addsub_files, write_folder

pytestmark = [pytest.mark.triton, pytest.mark.slow]

LISTEN = "0A"


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (tritonserver and its python-backend stubs)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def socket_inodes(pids: list[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        with contextlib.suppress(OSError):  # a stub may exit meanwhile
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = str(fd.readlink())
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
    return inodes


def listening_addresses(pids: list[int]) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state held by `pids`, from /proc/net."""
    inodes = socket_inodes(pids)
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != LISTEN or fields[9] not in inodes:
                continue
            address, port = fields[1].split(":")
            raw = bytes.fromhex(address)
            # The kernel prints each 32-bit word in host order.
            words = [raw[i : i + 4][::-1] for i in range(0, len(raw), 4)]
            packed = b"".join(words)
            family = socket.AF_INET if len(packed) == 4 else socket.AF_INET6
            found.append((socket.inet_ntop(family, packed), int(port, 16)))
    return found


def non_loopback_address() -> str | None:
    """This machine's address on its default route, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent for a UDP connect
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


def post(port: int, path: str, body: bytes, target: str = "x.tar.gz") -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request(
            "POST",
            path,
            body=body,
            headers={"Content-Type": "application/json", "X-Amzn-SageMaker-Target-Model": target},
        )
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def crash_with_nested_json(supervisor: TritonSupervisor) -> None:
    """Triton 2.51's SageMaker frontend segfaults parsing ~200k nested arrays."""
    crashes = supervisor.crashes
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        post(supervisor.port, "/models", b"[" * 200_000)
    deadline = time.monotonic() + 30
    while supervisor.crashes == crashes and time.monotonic() < deadline:
        time.sleep(0.05)
    assert supervisor.crashes == crashes + 1


@pytest.fixture
def supervisor(tmp_path: Path) -> Iterator[TritonSupervisor]:
    server = TritonSupervisor(tmp_path / "triton", max_restarts=1, restart_window=600.0)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_sagemaker_port_listens_on_loopback_only(supervisor: TritonSupervisor) -> None:
    assert supervisor.pid is not None
    listening = listening_addresses(process_tree(supervisor.pid))
    assert listening, "tritonserver listens on no TCP socket"
    assert all(address in ("127.0.0.1", "::1") for address, _ in listening), listening
    assert supervisor.port in {port for _, port in listening}
    address = non_loopback_address()
    if address is not None:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((address, supervisor.port), timeout=5).close()
    assert ping(supervisor.port)


def test_only_the_front_ends_process_is_answered(supervisor: TritonSupervisor) -> None:
    # GIVEN another process of the same user on this machine
    other = (
        "import http.client, sys\n"
        f"c = http.client.HTTPConnection('127.0.0.1', {supervisor.port}, timeout=10)\n"
        "try:\n"
        "    c.request('GET', '/models')\n"
        "    print('ANSWERED', c.getresponse().status)\n"
        "except (OSError, http.client.HTTPException) as exc:\n"
        "    print('REFUSED', type(exc).__name__)\n"
    )
    # WHEN it calls Triton's SageMaker port THEN the connection is closed unanswered
    result = subprocess.run(
        [sys.executable, "-c", other], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.startswith("REFUSED"), result.stdout
    assert "deploy guard: closed a connection" in supervisor.log_path.read_text(errors="replace")
    # AND this process (where the front end runs) is still answered
    assert ping(supervisor.port)
    assert (
        post(supervisor.port, "/models", b'{"model_name": "a", "url": "/nowhere/a/model"}')[0]
        == 400
    )


def test_shared_memory_of_a_crashed_server_is_removed(
    supervisor: TritonSupervisor, tmp_path: Path
) -> None:
    # GIVEN a loaded python model: its stub talks to Triton through /dev/shm regions
    model_dir = write_folder(tmp_path / "models" / "h1" / "model", addsub_files("shm_model"))
    body = json.dumps({"model_name": "h1", "url": str(model_dir)}).encode()
    assert post(supervisor.port, "/models", body, "shm_model.tar.gz")[0] == 200
    assert supervisor.pid is not None
    regions = {
        line.split()[-1]
        for pid in process_tree(supervisor.pid)
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
        if "/dev/shm/triton_python_backend_shm_region_" in line
    }
    assert regions and all(Path(region).exists() for region in regions)

    # WHEN tritonserver segfaults
    crash_with_nested_json(supervisor)

    # THEN it is restarted and the dead server's regions are gone
    assert supervisor.wait_ready(60)
    assert not [region for region in regions if Path(region).exists()]


def test_restart_budget_is_a_rate_not_a_lifetime_count(tmp_path: Path) -> None:
    # GIVEN a budget of one restart per 3 seconds
    supervisor = TritonSupervisor(tmp_path / "triton", max_restarts=1, restart_window=3.0)
    exits: list[str] = []
    supervisor.on_exit.append(lambda: exits.append("exit"))
    supervisor.start()
    try:
        # WHEN it crashes twice, further apart than the window
        crash_with_nested_json(supervisor)
        assert supervisor.wait_ready(60)
        time.sleep(3.2)
        crash_with_nested_json(supervisor)
        # THEN it is restarted both times
        assert supervisor.wait_ready(60)
        assert supervisor.restarts == 2 and not supervisor.gave_up and exits == []
        assert ping(supervisor.port)
    finally:
        supervisor.stop()


def test_crashing_faster_than_the_budget_gives_up(supervisor: TritonSupervisor) -> None:
    exits: list[str] = []
    supervisor.on_exit.append(lambda: exits.append("exit"))
    crash_with_nested_json(supervisor)
    assert supervisor.wait_ready(60)
    crash_with_nested_json(supervisor)
    deadline = time.monotonic() + 30
    while not exits and time.monotonic() < deadline:
        time.sleep(0.05)
    assert supervisor.gave_up and exits == ["exit"]
    assert not supervisor.ready
