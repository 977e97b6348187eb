"""The unsigned direct request (the local endpoint's) is written from a head the
SDK builds itself and a body in pieces: on the wire it must be byte for byte
what `http.client` sends for the same call, and its answer's arrays view the
answer's bytes.

A raw socket server records every request's bytes and answers with a Triton
binary body; the SDK's own `http.client` path (`DirectInvoker.invoke`, the
body joined) is the reference.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pytest

from deploy.client import ClientError, Endpoint, RetryPolicy
from deploy.client.codec import encode_input, encode_response

ONCE = RetryPolicy(max_attempts=1)
ANSWER = encode_response(
    [
        encode_input("A", np.arange(5, dtype=np.float32)),
        encode_input("B", np.arange(3, dtype=np.int64)),
        encode_input("T", np.array([b"x", b"yz"], dtype=object)),
    ]
)


@dataclass
class Recorder:
    url: str = ""
    requests: list[bytes] = field(default_factory=list)


def serve(sock: socket.socket, recorder: Recorder) -> None:
    reply = (
        b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n"
        % (ANSWER.content_type.encode(), len(ANSWER.body))
        + ANSWER.body
    )
    while True:
        try:
            connection, _ = sock.accept()
        except OSError:
            return
        with connection:
            pending = b""
            while True:
                end = pending.find(b"\r\n\r\n")
                if end >= 0 and pending.startswith(b"GET "):  # manifest discovery: none here
                    pending = pending[end + 4 :]
                    connection.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    continue
                if end >= 0:
                    head = pending[:end].decode("latin-1").lower()
                    length = int(head.split("content-length: ", 1)[1].split("\r\n", 1)[0])
                    if len(pending) >= end + 4 + length:
                        recorder.requests.append(pending[: end + 4 + length])
                        pending = pending[end + 4 + length :]
                        connection.sendall(reply)
                        continue
                chunk = connection.recv(1 << 20)
                if not chunk:
                    break
                pending += chunk


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    state = Recorder()
    sock = socket.create_server(("127.0.0.1", 0))
    thread = threading.Thread(target=serve, args=(sock, state), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    yield state
    sock.close()
    thread.join(5)


@pytest.mark.parametrize("values", [4, 100_000])  # one write, and the body after the head
@pytest.mark.parametrize("target", ["m-1.tar.gz", None])
def test_the_request_is_what_http_client_sends(
    recorder: Recorder, values: int, target: str | None
) -> None:
    inputs = {"X": np.arange(values, dtype=np.float32)}
    with Endpoint("my-ep", endpoint_url=recorder.url, retries=ONCE) as endpoint:
        ready = endpoint._prepare("m-1.tar.gz", inputs, None, target, None, None)
        if target is None:
            ready.route = type(ready.route)("m", None, None)  # no TargetModel header
        endpoint._invoke(ready, 30.0)
        assert ready._request is None  # sent from its pieces: never joined
        direct = endpoint._direct_invoker()
        assert direct is not None and direct.credentials is None
        # The reference: the same call through http.client, the body joined.
        direct.invoke(
            ready.request.body, ready.content_type, 30.0, target_model=ready.route.target_model
        )
    fast, reference = recorder.requests
    assert fast == reference
    head = fast.split(b"\r\n\r\n", 1)[0].decode()
    assert head.startswith("POST /endpoints/my-ep/invocations HTTP/1.1\r\nHost: 127.0.0.1:")
    assert ("X-Amzn-SageMaker-Target-Model: m-1.tar.gz" in head) == (target is not None)


def test_a_header_value_http_client_refuses_is_still_refused(recorder: Recorder) -> None:
    """A target model with a line break must not add a header: it goes the
    http.client way, which refuses it, as before."""
    inputs = {"X": np.zeros(2, np.float32)}
    with Endpoint("my-ep", endpoint_url=recorder.url, retries=ONCE) as endpoint:
        with pytest.raises(ClientError):
            endpoint.infer("m", inputs, target_model="m.tar.gz\r\nX-Injected: 1")
        endpoint.infer("m.tar.gz", inputs)
    assert len(recorder.requests) == 1 and b"X-Injected" not in recorder.requests[0]


def test_outputs_are_read_only_views_of_the_answer(recorder: Recorder) -> None:
    inputs = {"X": np.zeros(2, np.float32)}
    with Endpoint("my-ep", endpoint_url=recorder.url, retries=ONCE) as endpoint:
        for _ in range(2):  # the first answer, and one whose layout is known
            result = endpoint.infer("m.tar.gz", inputs)
            a, b, t = result["A"], result["B"], result["T"]
            np.testing.assert_array_equal(a, np.arange(5, dtype=np.float32))
            np.testing.assert_array_equal(b, np.arange(3))
            answer = np.frombuffer(underlying(a), np.uint8)
            assert answer.nbytes == len(ANSWER.body) and underlying(b) is underlying(a)
            for array in (a, b):
                assert np.shares_memory(array, answer)
                assert not array.flags.writeable and not array.flags.owndata
            with pytest.raises(ValueError, match="read-only"):
                a[0] = 1
            assert t.dtype == object and list(t) == [b"x", b"yz"]  # BYTES: a copy
            assert np.array(a).flags.writeable  # a copy, for callers who write


def underlying(array: np.ndarray) -> object:
    """The object whose memory an array views (through views and memoryviews)."""
    found: object = array
    while isinstance(found, np.ndarray):
        found = found.base
    if isinstance(found, memoryview):
        found = found.obj
    assert isinstance(found, bytes), type(found)
    return found
