"""The front end under hostile requests: deep JSON, slow and half-open clients,
large heads, a full connection table, pipelining.

GIVEN a real endpoint (tritonserver behind the front end)
WHEN a client sends what would crash tritonserver or tie up the front end
THEN it gets a clear error (400, 408, 431, 503) and everyone else is served.

The connection tests run `deploy serve` in its own process with short timeouts,
a connection limit of 200 and a file limit of 1,024 (where, before these
bounds, half-open connections starved real callers).
"""

from __future__ import annotations

import http.client
import json
import re
import resource
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deploy.local.triton.supervisor import free_port
from tests.functional.local_models import encode, invoke, runtime_client

pytestmark = [pytest.mark.triton, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
A = np.arange(8, dtype=np.float32).reshape(2, 4)
HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 3.0
IDLE_TIMEOUT = 1.5
MAX_CONNECTIONS = 200
FILE_LIMIT = 1024
INVOKE = "/endpoints/local/invocations"


class Served:
    def __init__(self, process: subprocess.Popen[bytes], port: int, target: str) -> None:
        self.process = process
        self.port = port
        self.target = target
        self.url = f"http://127.0.0.1:{port}"

    def rss_kib(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1))  # type: ignore[union-attr]


def _limit_files() -> None:  # runs in the child before exec
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from deploy.packaging import package_repository

    store = tmp_path_factory.mktemp("limits") / "store"
    package_repository(ROOT / "model_packages" / "examples", store)
    target = json.loads((store / "manifest.json").read_text())["models"]["addsub"]["target_model"]
    port = free_port()
    log = store.parent / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "deploy",
                "serve",
                str(store),
                "--port",
                str(port),
                "--header-timeout",
                str(HEADER_TIMEOUT),
                "--body-timeout",
                str(BODY_TIMEOUT),
                "--idle-timeout",
                str(IDLE_TIMEOUT),
                "--max-connections",
                str(MAX_CONNECTIONS),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            preexec_fn=_limit_files,
        )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if http_get(port, "/ping")[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail(f"deploy serve did not start:\n{log.read_text()[-2000:]}")
        served = Served(process, port, target)
        invoke(runtime_client(served.url), "local", target, {"INPUT0": A, "INPUT1": A})
        yield served
    finally:
        process.send_signal(2)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def http_get(port: int, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def raw_request(target: str, body: bytes, content_type: str = "application/json") -> bytes:
    head = (
        f"POST {INVOKE} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
        f"X-Amzn-SageMaker-Target-Model: {target}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def json_body(inputs: dict[str, np.ndarray]) -> bytes:
    return json.dumps(
        {
            "inputs": [
                {"name": n, "shape": list(a.shape), "datatype": "FP32", "data": a.tolist()}
                for n, a in inputs.items()
            ]
        }
    ).encode()


def read_until_closed(sock: socket.socket, timeout: float) -> tuple[bytes, bool, float]:
    """Everything the server sends; whether it closed; seconds until it did."""
    started = time.monotonic()
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        return data, False, time.monotonic() - started
    except ConnectionResetError:
        pass
    return data, True, time.monotonic() - started


def statuses(data: bytes) -> list[int]:
    return [int(s) for s in re.findall(rb"HTTP/1\.1 (\d{3}) ", data)]


# -- JSON tritonserver would choke on -------------------------------------------------------


def test_deeply_nested_json_is_refused_and_tritonserver_stays_up(local_endpoint: Any) -> None:
    runtime = runtime_client(local_endpoint.url)
    target = local_endpoint.target_model("addsub")
    invoke(runtime, "local", target, {"INPUT0": A, "INPUT1": A})
    supervisor = local_endpoint.endpoint.supervisor
    pid, crashes = supervisor.pid, supervisor.crashes
    deep = b"[" * 200_000 + b"]" * 200_000  # 400 KB, ~200k levels
    header = b'{"inputs": ' + b"[" * 100 + b"]" * 100 + b"}"
    attacks = [
        (deep, "application/json"),
        (deep, None),  # no Content-Type: Triton parses the whole body as JSON
        (
            header + b"\0" * 16,
            f"application/vnd.sagemaker-triton.binary+json;json-header-size={len(header)}",
        ),
    ]
    for body, content_type in attacks:
        extra = {"ContentType": content_type} if content_type else {}
        with pytest.raises(runtime.exceptions.ValidationError, match="more than 64 levels"):
            runtime.invoke_endpoint(EndpointName="local", TargetModel=target, Body=body, **extra)
    time.sleep(0.5)  # a crash would show by now
    assert (supervisor.pid, supervisor.crashes) == (pid, crashes)
    invoke(runtime, "local", target, {"INPUT0": A, "INPUT1": A})


def test_json_nested_by_shape_and_brackets_in_strings_still_serve(local_endpoint: Any) -> None:
    """The limit counts structure only: v2 `data` nested by shape, and strings full of
    brackets, pass; a binary body's tensor bytes are never read as JSON."""
    runtime = runtime_client(local_endpoint.url)
    target = local_endpoint.target_model("addsub")
    body = json_body({"INPUT0": A, "INPUT1": A})  # data nested as [[...], [...]]
    answer = runtime.invoke_endpoint(
        EndpointName="local", TargetModel=target, Body=body, ContentType="application/json"
    )
    outputs = {o["name"]: o["data"] for o in json.loads(answer["Body"].read())["outputs"]}
    assert outputs["OUTPUT0"] == (A + A).ravel().tolist()
    strings = local_endpoint.target_model("strings")
    document = {
        "inputs": [{"name": "TEXT", "shape": [1], "datatype": "BYTES", "data": ["[" * 500]}]
    }
    answer = runtime.invoke_endpoint(
        EndpointName="local",
        TargetModel=strings,
        Body=json.dumps(document).encode(),
        ContentType="application/json",
    )
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    brackets = np.frombuffer(b"[" * 32, dtype=np.float32).reshape(2, 4)  # tensor bytes '[[[['
    raw, content_type = encode({"INPUT0": brackets, "INPUT1": brackets})
    answer = runtime.invoke_endpoint(
        EndpointName="local", TargetModel=target, Body=raw, ContentType=content_type
    )
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_json_header_size_outside_the_body_is_refused(local_endpoint: Any) -> None:
    runtime = runtime_client(local_endpoint.url)
    target = local_endpoint.target_model("addsub")
    body, content_type = encode({"INPUT0": A, "INPUT1": A})
    prefix = content_type.rsplit("=", 1)[0]
    for size, message in [
        (str(len(body) + 1), f"at most {len(body)} bytes"),
        ("99999999999999999999", f"at most {len(body)} bytes"),
        ("-5", "not a whole number"),
    ]:
        with pytest.raises(runtime.exceptions.ValidationError, match=message):
            runtime.invoke_endpoint(
                EndpointName="local",
                TargetModel=target,
                Body=body,
                ContentType=f"{prefix}={size}",
            )


# -- slow, idle and half-open clients --------------------------------------------------------


def test_half_sent_head_is_answered_408_and_closed(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        sock.sendall(f"POST {INVOKE} HTTP/1.1\r\nHost: x\r\nContent-Ty".encode())
        data, closed, after = read_until_closed(sock, HEADER_TIMEOUT + 5)
    assert closed and statuses(data) == [408]
    assert b"request head did not arrive within 1s" in data
    assert HEADER_TIMEOUT <= after < HEADER_TIMEOUT + 2


def test_connection_that_sends_nothing_is_closed_quietly(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        data, closed, after = read_until_closed(sock, HEADER_TIMEOUT + 5)
    assert closed and data == b""
    assert HEADER_TIMEOUT <= after < HEADER_TIMEOUT + 2


def test_head_dripped_byte_by_byte_is_cut_off(served: Served) -> None:
    head = f"POST {INVOKE} HTTP/1.1\r\nHost: x\r\nX-Slow: {'a' * 200}\r\n".encode()
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        for byte in head:  # one byte every 50 ms keeps each read short, never the head
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            if select.select([sock], [], [], 0.05)[0]:
                break
        data, closed, _ = read_until_closed(sock, 5)
    assert closed and statuses(data) == [408]
    assert time.monotonic() - started < HEADER_TIMEOUT + 3


def test_half_sent_body_is_answered_408(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        sock.sendall(raw_request(served.target, b"x" * 100)[:-50])
        data, closed, after = read_until_closed(sock, BODY_TIMEOUT + 5)
    assert closed and statuses(data) == [408]
    assert b"request body did not arrive" in data
    assert BODY_TIMEOUT <= after < BODY_TIMEOUT + 2


def test_idle_keep_alive_connection_is_closed(served: Served) -> None:
    body = json_body({"INPUT0": A, "INPUT1": A})
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        sock.sendall(raw_request(served.target, body))
        data, closed, after = read_until_closed(sock, IDLE_TIMEOUT + 5)
    assert statuses(data) == [200]
    assert closed and IDLE_TIMEOUT - 0.5 <= after < IDLE_TIMEOUT + 2


def test_half_open_connections_do_not_starve_a_caller(served: Served) -> None:
    """3,000 connections that send half a head, 200 allowed, 1,024 files: a real
    caller is still answered at once, and every half-open one is closed."""
    opened: list[socket.socket] = []
    try:
        for _ in range(3000):
            sock = socket.create_connection(("127.0.0.1", served.port), timeout=5)
            sock.sendall(f"POST {INVOKE} HTTP/1.1\r\nHost: x\r\n".encode())
            opened.append(sock)
        started = time.monotonic()
        runtime = runtime_client(served.url)
        _, outputs = invoke(runtime, "local", served.target, {"INPUT0": A, "INPUT1": A})
        np.testing.assert_array_equal(outputs["OUTPUT0"], A + A)
        assert time.monotonic() - started < HEADER_TIMEOUT
        deadline = time.monotonic() + HEADER_TIMEOUT + 5
        still_open = {sock.fileno(): sock for sock in opened}
        poller = select.poll()  # select() stops at descriptor 1023
        for fd in still_open:
            poller.register(fd, select.POLLIN)
        while still_open and time.monotonic() < deadline:
            for fd, _ in poller.poll(200):
                try:
                    chunk = still_open[fd].recv(65536)
                except ConnectionResetError:
                    chunk = b""
                if not chunk or b"Connection: close" in chunk:  # evicted, or 408
                    poller.unregister(fd)
                    del still_open[fd]
        assert not still_open
    finally:
        for sock in opened:
            sock.close()


def test_connections_beyond_the_limit_get_503_when_all_are_busy(served: Served) -> None:
    busy: list[socket.socket] = []
    partial = raw_request(served.target, b"x" * 100)[:-50]  # heads in, bodies pending
    try:
        for _ in range(MAX_CONNECTIONS):
            sock = socket.create_connection(("127.0.0.1", served.port), timeout=5)
            sock.sendall(partial)
            busy.append(sock)
        time.sleep(0.2)  # all of them read their heads
        with socket.create_connection(("127.0.0.1", served.port)) as extra:
            extra.sendall(raw_request(served.target, json_body({"INPUT0": A, "INPUT1": A})))
            data, closed, _ = read_until_closed(extra, 5)
        assert closed and statuses(data) == [503]
        assert b"limit of 200 connections" in data
    finally:
        for sock in busy:
            sock.close()
    # Once they are gone, callers are served again.
    runtime = runtime_client(served.url)
    invoke(runtime, "local", served.target, {"INPUT0": A, "INPUT1": A})


# -- large heads and pipelining --------------------------------------------------------------


def test_large_head_is_answered_431_without_buffering_it(served: Served) -> None:
    before = served.rss_kib()
    chunk = b"a" * 65536
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        sock.sendall(f"POST {INVOKE} HTTP/1.1\r\nHost: x\r\nX-Big: ".encode())
        sent = 0
        while sent < 64 * 1024 * 1024 and not select.select([sock], [], [], 0)[0]:
            try:
                sock.sendall(chunk)
            except OSError:
                break
            sent += len(chunk)
        grown = served.rss_kib() - before
        data, closed, _ = read_until_closed(sock, 5)
    assert closed and statuses(data) == [431]
    assert b"exceed 65536 bytes" in data
    assert grown < 16 * 1024  # KiB; the whole head would be 64 MiB
    for _ in range(3):  # in one read too
        with socket.create_connection(("127.0.0.1", served.port)) as sock:
            sock.sendall(f"GET /ping HTTP/1.1\r\nX-Big: {'a' * 70000}\r\n\r\n".encode())
            data, closed, _ = read_until_closed(sock, 5)
        assert closed and statuses(data) == [431]


def test_pipelined_requests_are_answered_in_order_up_to_a_malformed_one(served: Served) -> None:
    bodies = [json_body({"INPUT0": A * k, "INPUT1": A}) for k in (1, 2, 3)]
    good = b"".join(raw_request(served.target, body) for body in bodies)
    malformed = b"GET /bad\x00path HTTP/1.1\r\n\r\n"
    after = raw_request(served.target, bodies[0])  # never read
    with socket.create_connection(("127.0.0.1", served.port)) as sock:
        sock.sendall(good + malformed + after)
        data, closed, _ = read_until_closed(sock, 10)
    assert closed and statuses(data) == [200, 200, 200, 400]
    answers = [json.loads(b) for b in re.findall(rb'\{"model_name".*?\]\}\]\}', data)]
    assert [a["outputs"][0]["data"] for a in answers] == [
        (A * k + A).ravel().tolist() for k in (1, 2, 3)
    ]
    assert b"malformed HTTP request" in data
