"""Large request bodies stream through the front end to tritonserver.

GIVEN `deploy serve` (its own process, a real tritonserver) and models that sum,
or count the calls they executed
WHEN a client sends half of a large body and pauses
THEN tritonserver has already read it (its `rchar` in /proc grows); a body the
JSON depth check refuses midway, or one that stalls, is answered 400 or 408,
tritonserver never answers its half request, and the endpoint serves on.

What tritonserver has read is read from /proc/PID/io (the bytes its read
calls returned: libevent reads sockets with readv), so the test needs to read
that file (the same user, or root).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from deploy.client import encode
from deploy.packaging import package_repository

pytestmark = [pytest.mark.triton, pytest.mark.slow]

INVOKE = "/endpoints/local/invocations"
BODY_TIMEOUT = 3.0
FLOATS = 1_200_000  # 4.8 MB of FP32
MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.calls = 0

    def execute(self, requests):
        replies = []
        for request in requests:
            self.calls += 1
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            y = {answer}
            replies.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", y)]))
        return replies
"""
CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_FP32 dims: [-1] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [-1] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""
MODELS = {
    "sum": "np.array([x.sum(dtype=np.float64)], dtype=np.float32)",
    "count": "np.array([self.calls], dtype=np.float32)",  # calls executed, this one included
}


@dataclass
class Served:
    port: int
    pid: int
    targets: dict[str, str]

    def triton_pid(self) -> int:
        """tritonserver's pid: a descendant of `deploy serve` (through its guard)."""
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(entry.name))
        todo = list(children.get(self.pid, []))
        while todo:
            pid = todo.pop()
            if Path(f"/proc/{pid}/comm").read_text().strip() == "tritonserver":
                return pid
            todo.extend(children.get(pid, []))
        raise AssertionError("no tritonserver under deploy serve")

    def triton_read(self) -> int:
        """Bytes tritonserver's read calls have returned so far."""
        io = Path(f"/proc/{self.triton_pid()}/io").read_text()
        return int(next(line for line in io.splitlines() if line.startswith("rchar:")).split()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("streaming")
    repository, store = root / "repo", root / "store"
    for name, answer in MODELS.items():
        (repository / name / "1").mkdir(parents=True)
        (repository / name / "config.pbtxt").write_text(CONFIG.format(name=name))
        (repository / name / "1" / "model.py").write_text(MODEL.format(answer=answer))
    manifest = package_repository(repository, store).manifest
    targets = {name: manifest.models[name].target_model for name in MODELS}
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    command = [
        *(sys.executable, "-m", "deploy", "serve", str(store), "--port", str(port)),
        *("--body-timeout", str(BODY_TIMEOUT)),
    ]
    with (root / "serve.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=root, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=1) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail(f"deploy serve did not start: {(root / 'serve.log').read_text()}")
        served = Served(port, process.pid, targets)
        for name in MODELS:  # loaded: only calls to loaded models stream
            status, _ = call(served, name, *binary(np.ones(4, np.float32)))
            assert status == 200
        yield served
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def binary(x: np.ndarray) -> tuple[bytes, str]:
    request = encode({"X": x})
    return bytes(request.body), request.content_type


def head(target: str, content_type: str, size: int) -> bytes:
    return (
        f"POST {INVOKE} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
        f"X-Amzn-SageMaker-Target-Model: {target}\r\nContent-Length: {size}\r\n\r\n"
    ).encode()


def read_answer(sock: socket.socket) -> tuple[int, bytes]:
    """One HTTP answer off a keep-alive connection: status and body."""
    sock.settimeout(30)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    top, body = data.split(b"\r\n\r\n", 1)
    length = next(
        int(line.split(b":", 1)[1])
        for line in top.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside a body"
        body += chunk
    return int(top[9:12]), body


def call(served: Served, name: str, body: bytes, content_type: str) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        sock.sendall(head(served.targets[name], content_type, len(body)) + body)
        return read_answer(sock)


def output(answer: bytes) -> list[float]:
    """Y from a binary answer (JSON header, then the tensor's bytes)."""
    document = json.loads(answer[: answer.index(b"}]}") + 3])
    values: list[float] = np.frombuffer(
        answer[-4 * document["outputs"][0]["shape"][0] :], np.float32
    ).tolist()
    return values


def calls_executed(served: Served) -> int:
    status, answer = call(served, "count", *binary(np.ones(1, np.float32)))
    assert status == 200, answer
    return int(output(answer)[0]) - 1  # this call counted itself


def send_half_and_wait(served: Served, sock: socket.socket, message: bytes, body: int) -> int:
    """Send the head and half the body; what tritonserver read of it meanwhile."""
    half = len(message) - body // 2
    before = served.triton_read()
    sock.sendall(message[:half])
    deadline = time.monotonic() + 5  # on a loaded machine the front end may lag
    read = 0
    while time.monotonic() < deadline and read < body // 2 - 65536:
        time.sleep(0.1)
        read = served.triton_read() - before
    return read


def test_half_a_body_reaches_tritonserver_before_the_rest_is_sent(served: Served) -> None:
    """Tensor bytes full of '[' stream too: only the binary body's JSON header is
    judged by the depth check."""
    x = np.frombuffer(b"[" * 4 * FLOATS, dtype=np.float32)
    body, content_type = binary(x)
    message = head(served.targets["sum"], content_type, len(body)) + body
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        read = send_half_and_wait(served, sock, message, len(body))
        assert read >= len(body) // 2 - 65536, (
            f"tritonserver read {read} bytes of the first {len(body) // 2} sent; "
            "the front end held the body back"
        )
        sock.sendall(message[len(message) - len(body) // 2 :])
        status, answer = read_answer(sock)
        assert status == 200, answer
        assert output(answer) == pytest.approx([float(x.sum(dtype=np.float64))], rel=1e-6)
        # The same connection serves the next large call.
        ones, content_type = binary(np.ones(FLOATS, np.float32))
        sock.sendall(head(served.targets["sum"], content_type, len(ones)))
        sock.sendall(ones)
        status, answer = read_answer(sock)
        assert status == 200 and output(answer) == [float(FLOATS)]


def test_json_refused_midway_is_answered_400_and_never_executed(served: Served) -> None:
    """A 4.8 MB JSON body whose tail nests 100 levels deep: its start is already at
    tritonserver when the tail arrives. The client gets the depth error; the half
    request tritonserver holds is dropped with its connection, never executed,
    and the connection it came on serves the next call."""
    executed = calls_executed(served)
    values = ",".join(["0.5"] * FLOATS)
    body = (
        f'{{"inputs": [{{"name": "X", "shape": [{FLOATS}], "datatype": "FP32", '
        f'"data": [{values}]}}], "parameters": {{"deep": {"[" * 100}{"]" * 100}}}}}'
    ).encode()
    message = head(served.targets["count"], "application/json", len(body)) + body
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        read = send_half_and_wait(served, sock, message, len(body))
        assert read >= len(body) // 2 - 65536, f"tritonserver read {read} bytes before the tail"
        sock.sendall(message[len(message) - len(body) // 2 :])
        status, answer = read_answer(sock)
        assert status == 400, answer
        assert json.loads(answer)["__type"] == "ValidationError"
        assert "more than 64 levels" in json.loads(answer)["message"]
        good, content_type = binary(np.full(FLOATS, 2, np.float32))
        sock.sendall(head(served.targets["sum"], content_type, len(good)) + good)
        status, answer = read_answer(sock)
        assert status == 200 and output(answer) == [2.0 * FLOATS]
    time.sleep(0.5)  # a half request answered late would show by now
    assert calls_executed(served) == executed + 1  # calls_executed itself, nothing else


def test_body_that_stalls_midway_is_answered_408_and_its_call_dropped(served: Served) -> None:
    executed = calls_executed(served)
    body, content_type = binary(np.ones(FLOATS, np.float32))
    message = head(served.targets["count"], content_type, len(body)) + body
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        read = send_half_and_wait(served, sock, message, len(body))
        assert read >= len(body) // 2 - 65536, f"tritonserver read {read} bytes"
        sock.settimeout(BODY_TIMEOUT + 5)
        data = b""
        while chunk := sock.recv(65536):  # the answer, then the end: closed
            data += chunk
    assert data.startswith(b"HTTP/1.1 408 "), data[:300]
    assert b"request body did not arrive" in data
    time.sleep(0.5)
    assert calls_executed(served) == executed + 1
    # The model's pin went with the call: a large call to it is served.
    status, answer = call(served, "count", body, content_type)
    assert status == 200, answer


def test_oversized_body_is_refused_without_reaching_tritonserver(served: Served) -> None:
    size = 6 * 1024 * 1024 + 1  # SageMaker's 6 MB payload limit, the default
    before = served.triton_read()
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        content_type = "application/octet-stream"
        sock.sendall(head(served.targets["sum"], content_type, size) + b"\0" * size)
        status, answer = read_answer(sock)
    assert status == 413, answer
    assert served.triton_read() - before < 65536


def test_pipelined_large_bodies_are_answered_in_order(served: Served) -> None:
    """A second request behind a first on one connection is read whole (it waits
    its turn); both are answered, in order."""
    first, content_type = binary(np.full(FLOATS // 4, 1, np.float32))
    second, _ = binary(np.full(FLOATS // 4, 3, np.float32))
    target = served.targets["sum"]
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        sock.sendall(
            head(target, content_type, len(first))
            + first
            + head(target, content_type, len(second))
            + second
        )
        answers = [read_answer(sock), read_answer(sock)]
    assert [status for status, _ in answers] == [200, 200]
    assert [output(body) for _, body in answers] == [[FLOATS / 4], [3 * FLOATS / 4]]
