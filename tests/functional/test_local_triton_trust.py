"""Only our own tritonserver is trusted: a port squatter and the python backend's shared memory.

GIVEN another Unix user on the machine (uid 65534, through `setpriv`)
WHEN it binds tritonserver's SageMaker port on 127.0.0.1 first, with a fake
server that answers `/ping` and forges model outputs, before the endpoint
starts or while tritonserver restarts after a crash
THEN the supervisor sees that the listener is not its child's, moves
tritonserver to another port, and the squatter is never sent anything: no
ping, no model path, no request body; invocations answer the real outputs.
AND the python backend's /dev/shm regions, which hold request and response
tensors, are mode 0600: the other user cannot open them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint
from deploy.local.triton.listener import Holder, holder, listeners
from deploy.local.triton.supervisor import TritonSupervisor, free_port, ping
from tests.functional.local_models import (
    addsub_files,
    invoke,
    runtime_client,
    write_archive,
    write_folder,
)
from tests.functional.test_local_triton_isolation import crash_with_nested_json, post

OTHER_USER = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
A = np.arange(8, dtype=np.float32).reshape(2, 4)
B = np.ones((2, 4), dtype=np.float32)

# A server of the other user: it binds the port as soon as it can (spinning while
# someone holds it), answers /ping 200 and every POST with forged outputs, and
# writes each request it gets (line, headers, body) to stdout, one JSON per line.
SQUATTER = r"""
import http.server, json, sys, time
FORGED = json.dumps({"model_name": "forged", "outputs": [
    {"name": n, "datatype": "FP32", "shape": [2, 4], "data": [666.0] * 8}
    for n in ("OUTPUT0", "OUTPUT1")]}).encode()

class Handler(http.server.BaseHTTPRequestHandler):
    def record(self):
        size = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(size).decode("latin-1")
        print(json.dumps({"request": self.requestline, "headers": dict(self.headers),
                          "body": body}), flush=True)

    def answer(self, body):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.record(); self.answer(b"")

    def do_POST(self):
        self.record(); self.answer(FORGED)

    def log_message(self, *args):
        pass

server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler, False)
while True:
    try:
        server.server_bind()
        break
    except OSError:
        time.sleep(0.001)
server.server_activate()
print("LISTENING", flush=True)
server.serve_forever()
"""


class Squatter:
    """The fake server, run as the other user; what it was sent is in `log`."""

    def __init__(self, port: int, log: Path) -> None:
        self.port = port
        self.log = log
        with log.open("wb") as output:  # an inherited descriptor: no path for 65534 to open
            self.process = subprocess.Popen(
                [*OTHER_USER, sys.executable, "-c", SQUATTER, str(port)],
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd="/",
            )

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()

    def wait_listening(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while "LISTENING" not in self.lines():
            assert self.process.poll() is None, self.lines()
            assert time.monotonic() < deadline, "the squatter never got the port"
            time.sleep(0.01)
        # It really is the other user's listener that holds the port.
        assert [listener.uid for listener in listeners(self.port)] == [65534]

    def requests(self) -> list[str]:
        return [line for line in self.lines() if line != "LISTENING"]

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture
def squatted_port(tmp_path: Path) -> Iterator[Squatter]:
    squatter = Squatter(free_port(), tmp_path / "squatter.log")
    try:
        yield squatter
    finally:
        squatter.stop()


def test_listener_of_another_user_is_not_the_childs(squatted_port: Squatter) -> None:
    squatted_port.wait_listening()
    # A listener held by this process counts as this process's, not another's.
    assert holder(os.getpid(), squatted_port.port)[0] is Holder.OTHER
    with socket.create_server(("127.0.0.1", 0)) as own:
        port = own.getsockname()[1]
        assert holder(os.getpid(), port)[0] is Holder.CHILD
    assert holder(os.getpid(), port)[0] is Holder.NOBODY


# Run as the other user: its own child listens; the checks need no privilege.
CHECK_AS_USER = r"""
import os, signal, socket, time
from deploy.local.triton.listener import holder
ready, tell = os.pipe()
child = os.fork()
if child == 0:
    server = socket.create_server(("127.0.0.1", 0))
    os.write(tell, b"%8d" % server.getsockname()[1])
    time.sleep(60)
    os._exit(0)
port = int(os.read(ready, 8))
print(holder(child, port)[0].name, holder(1, port)[0].name)
os.kill(child, signal.SIGKILL)
os.waitpid(child, 0)
"""


def test_listener_checks_work_for_an_unprivileged_user() -> None:
    result = subprocess.run(
        [*OTHER_USER, sys.executable, "-c", CHECK_AS_USER],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd="/",
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert result.stdout.split() == ["CHILD", "OTHER"], result.stdout + result.stderr


@pytest.mark.triton
@pytest.mark.slow
def test_endpoint_moves_off_a_port_another_user_took_first(
    squatted_port: Squatter, tmp_path: Path
) -> None:
    # GIVEN the other user's fake server on the port the endpoint is told to use
    squatted_port.wait_listening()
    store = tmp_path / "store"
    write_archive(store / "tests" / "addsub.tar.gz", addsub_files("addsub"))
    options = EndpointOptions(endpoint_name="local", triton_port=squatted_port.port)
    # WHEN the endpoint starts and is invoked
    endpoint = LocalEndpoint(store, work_dir=tmp_path / "work", options=options).start()
    try:
        _, outputs = invoke(
            runtime_client(endpoint.url), "local", "tests/addsub.tar.gz", {"INPUT0": A, "INPUT1": B}
        )
        # THEN the answer is the model's, from tritonserver on another port
        np.testing.assert_array_equal(outputs["OUTPUT0"], A + B)
        np.testing.assert_array_equal(outputs["OUTPUT1"], A - B)
        assert endpoint.supervisor.port != squatted_port.port
    finally:
        endpoint.stop()
    # AND the squatter, still holding its port, was sent nothing at all
    log = squatted_port.log.read_text(errors="replace")
    assert str(tmp_path) not in log and "INPUT0" not in log
    assert squatted_port.requests() == []
    assert [listener.uid for listener in listeners(squatted_port.port)] == [65534]


@pytest.mark.triton
@pytest.mark.slow
def test_endpoint_moves_off_a_port_taken_while_tritonserver_restarts(tmp_path: Path) -> None:
    # GIVEN a serving endpoint, and the other user waiting for tritonserver's port
    store = tmp_path / "store"
    write_archive(store / "tests" / "addsub.tar.gz", addsub_files("addsub"))
    endpoint = LocalEndpoint(
        store, work_dir=tmp_path / "work", options=EndpointOptions(endpoint_name="local")
    ).start()
    supervisor = endpoint.supervisor
    runtime = runtime_client(endpoint.url)
    squatter = Squatter(supervisor.port, tmp_path / "squatter.log")
    try:
        invoke(runtime, "local", "tests/addsub.tar.gz", {"INPUT0": A, "INPUT1": B})
        first_port = supervisor.port
        time.sleep(0.5)  # the squatter spins on bind() while tritonserver holds the port
        assert squatter.lines() == []
        # WHEN tritonserver crashes, and the squatter takes the port it freed
        crash_with_nested_json(supervisor)
        squatter.wait_listening()
        # THEN invocations answer the real outputs, from tritonserver on another port
        deadline = time.monotonic() + 60
        while True:
            try:
                _, outputs = invoke(
                    runtime, "local", "tests/addsub.tar.gz", {"INPUT0": A, "INPUT1": B}
                )
                break
            except runtime.exceptions.ServiceUnavailable:  # still restarting
                assert time.monotonic() < deadline
                time.sleep(0.05)
        np.testing.assert_array_equal(outputs["OUTPUT0"], A + B)
        np.testing.assert_array_equal(outputs["OUTPUT1"], A - B)
        # AND the squatter was never pinged nor sent anything
        assert squatter.requests() == []
        assert supervisor.port != first_port and supervisor.restarts == 1
        assert supervisor.pid is not None
        assert holder(supervisor.pid, supervisor.port)[0] is Holder.CHILD
        assert ping(supervisor.port) and not supervisor.gave_up
    finally:
        endpoint.stop()
        squatter.stop()


@pytest.mark.triton
@pytest.mark.slow
def test_a_connection_is_trusted_only_while_the_verified_server_runs(tmp_path: Path) -> None:
    # GIVEN a verified tritonserver, and the token a client takes before connecting
    supervisor = TritonSupervisor(tmp_path / "triton", max_restarts=2, restart_window=600.0)
    supervisor.start()
    try:
        port, token = supervisor.verified()
        assert port == supervisor.port and supervisor.still_verified(token)
        # WHEN it crashes
        crash_with_nested_json(supervisor)
        # THEN a connection opened with that token is not trusted, even once the
        # replacement runs (the port may have been another's in between)
        assert not supervisor.still_verified(token)
        assert supervisor.wait_ready(60)
        assert not supervisor.still_verified(token)
        assert supervisor.still_verified(supervisor.verified()[1])
    finally:
        supervisor.stop()
    # AND none is trusted after a stop
    with pytest.raises(ConnectionRefusedError):
        supervisor.verified()


@pytest.mark.triton
@pytest.mark.slow
def test_a_port_bound_without_listening_is_left_without_counting_a_crash(tmp_path: Path) -> None:
    # GIVEN the other user holding the port with a bound socket that never listens
    port = free_port()
    holding = subprocess.Popen(
        [
            *OTHER_USER,
            sys.executable,
            "-c",
            "import socket, sys, time\n"
            "s = socket.socket()\n"
            f"s.bind(('127.0.0.1', {port}))\n"
            "print('BOUND', flush=True)\n"
            "time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    supervisor = TritonSupervisor(tmp_path / "triton", port=port)
    try:
        assert holding.stdout is not None and holding.stdout.readline() == "BOUND\n"
        # WHEN tritonserver is started on it (its bind fails and it exits)
        supervisor.start()
        # THEN it runs on another port, and that is no crash
        assert supervisor.port != port and ping(supervisor.port)
        assert supervisor.crashes == 0 and supervisor.restarts == 0
    finally:
        supervisor.stop()
        holding.kill()
        holding.communicate()


# Run as the other user: try to read every region; report what happened, per region.
READ_REGIONS = r"""
import json, os, stat, sys
from pathlib import Path
report = {}
for path in sorted(Path("/dev/shm").glob(sys.argv[1] + "*")):
    mode = oct(stat.S_IMODE(path.stat().st_mode))
    try:
        with path.open("rb") as region:
            region.read(64)
        report[path.name] = [mode, "READ"]
    except PermissionError:
        report[path.name] = [mode, "PermissionError"]
print(json.dumps(report))
"""


@pytest.mark.triton
@pytest.mark.slow
def test_python_backend_shared_memory_is_private_to_the_user(tmp_path: Path) -> None:
    # GIVEN a python model loaded and serving: its stub talks to Triton through /dev/shm
    supervisor = TritonSupervisor(tmp_path / "triton")
    supervisor.start()
    try:
        model_dir = write_folder(tmp_path / "models" / "h1" / "model", addsub_files("shm_model"))
        body = json.dumps({"model_name": "h1", "url": str(model_dir)}).encode()
        assert post(supervisor.port, "/models", body, "shm_model.tar.gz")[0] == 200
        request = json.dumps(
            {
                "inputs": [
                    {"name": n, "datatype": "FP32", "shape": [2, 4], "data": A.ravel().tolist()}
                    for n in ("INPUT0", "INPUT1")
                ]
            }
        ).encode()
        status, answer = post(supervisor.port, "/models/h1/invoke", request, "shm_model.tar.gz")
        assert status == 200, answer
        # WHEN the other user tries to read the regions
        result = subprocess.run(
            [*OTHER_USER, sys.executable, "-c", READ_REGIONS, supervisor.shm_prefix],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            cwd="/",
        )
        report = json.loads(result.stdout)
        # THEN every region is the user's alone, and the other user cannot open it
        assert report, "the python model has no shared-memory region"
        assert all(outcome == ["0o600", "PermissionError"] for outcome in report.values()), report
    finally:
        supervisor.stop()
