"""Whoever serves the manifest cannot hold a call past its timeout or fill memory.

GIVEN a loopback HTTP server in the place of the local endpoint (which serves
GET /deploy/manifest.json), or of the AWS control plane, that drips its answer
one byte a second or sends a manifest far over the 16 MiB limit,
WHEN the SDK looks for the manifest on a call with `timeout=3`,
THEN the call ends in about 3 s with `InferenceTimeoutError`, or with a
`ManifestError` naming the limit after reading little more than the limit.
The same limit holds for a manifest on S3 (the moto server), refused from
its announced length before its body is read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator

import boto3
import numpy as np
import pytest

from deploy.client import (
    AsyncEndpoint,
    Endpoint,
    InferenceTimeoutError,
    ManifestError,
    RetryPolicy,
)
from deploy.client.manifest import MAX_MANIFEST_BYTES

INPUTS = {"INPUT0": np.arange(4, dtype=np.float32)}
ONCE = RetryPolicy(max_attempts=1)
MANIFEST = json.dumps(
    {
        "format": 1,
        "hosting": "multi-model",
        "models": {
            "addsub": {
                "name": "addsub",
                "target_model": "addsub-1f3c5a7e9b2d4c6a.tar.gz",
                "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}],
                "outputs": [],
            }
        },
    }
).encode()
STOP_AFTER_S = 20.0  # the drip gives up in the end, so the old code finishes too
HUGE = 400 * 1024 * 1024


class Server:
    """Answers every request on a plain socket as `mode` says; counts body bytes sent."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sent = 0
        self.requests: list[bytes] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = connection.recv(65536)
                if not chunk:
                    return
                head += chunk
            self.requests.append(head.split(b"\r\n", 1)[0])
            # The client hanging up ends the answer: what it did not read stays unsent.
            with contextlib.suppress(OSError):
                self._reply(connection)

    def _reply(self, connection: socket.socket) -> None:
        if self.mode in ("drip-body", "drip-head"):
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            body = MANIFEST
            if self.mode == "drip-body":
                head += b"Content-Length: %d\r\n\r\n" % len(body)
                connection.sendall(head)
                rest = body
            else:
                rest = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
            stop = time.monotonic() + STOP_AFTER_S
            for byte in rest:
                if time.monotonic() > stop or self._stop.is_set():
                    return
                connection.sendall(bytes([byte]))
                time.sleep(1.0)
            return
        announced = self.mode == "huge-announced"
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        head += b"Content-Length: %d\r\n" % HUGE if announced else b"Connection: close\r\n"
        connection.sendall(head + b"\r\n")
        chunk = b"[" + b" " * 65535
        while self.sent < HUGE and not self._stop.is_set():
            connection.sendall(chunk)
            self.sent += len(chunk)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    served = Server(request.param)
    yield served
    served.close()


@pytest.mark.parametrize("server", ["drip-body", "drip-head"], indirect=True)
def test_a_dripped_manifest_ends_the_call_at_its_timeout(server: Server, no_aws: None) -> None:
    started = time.monotonic()
    with (
        Endpoint("local", endpoint_url=server.url, timeout=3, retries=ONCE) as endpoint,
        pytest.raises(InferenceTimeoutError) as raised,
    ):
        endpoint.infer("addsub", INPUTS)
    elapsed = time.monotonic() - started
    assert 2.5 < elapsed < 5.0, elapsed
    assert server.requests == [b"GET /deploy/manifest.json HTTP/1.1"]  # nothing was invoked
    message = str(raised.value)
    assert "/deploy/manifest.json did not arrive within timeout=3s" in message
    assert "pass manifest=" in message


@pytest.mark.parametrize("server", ["drip-body"], indirect=True)
def test_the_asyncio_endpoint_keeps_the_same_deadline(server: Server, no_aws: None) -> None:
    async def call() -> None:
        async with AsyncEndpoint(
            "local", endpoint_url=server.url, timeout=3, retries=ONCE
        ) as endpoint:
            await endpoint.infer("addsub", INPUTS)

    started = time.monotonic()
    with pytest.raises(InferenceTimeoutError):
        asyncio.run(call())
    assert time.monotonic() - started < 5.0


@pytest.mark.parametrize("server", ["drip-body"], indirect=True)
def test_the_control_plane_is_held_to_the_deadline_too(
    server: Server, no_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DescribeEndpoint answered one byte a second (a proxy or an S3-compatible
    # endpoint in AWS_ENDPOINT_URL): discovery stops at the call's timeout.
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
    started = time.monotonic()
    with (
        Endpoint("remote", timeout=3, retries=ONCE) as endpoint,
        pytest.raises(InferenceTimeoutError, match="did not arrive within timeout=3s"),
    ):
        endpoint.model_info("addsub")
    assert time.monotonic() - started < 5.0


@pytest.mark.parametrize("server", ["huge-announced", "huge-unannounced"], indirect=True)
def test_a_manifest_over_the_limit_is_refused_after_reading_little(
    server: Server, no_aws: None
) -> None:
    with (
        Endpoint("local", endpoint_url=server.url, timeout=30, retries=ONCE) as endpoint,
        pytest.raises(ManifestError) as raised,
    ):
        endpoint.infer("addsub", INPUTS)
    message = str(raised.value)
    assert f"over the {MAX_MANIFEST_BYTES}-byte limit of a manifest" in message
    assert "/deploy/manifest.json" in message
    time.sleep(0.5)  # the server's last send fails once the client has hung up
    if server.mode == "huge-announced":
        assert f"has {HUGE} bytes" in message
        assert server.sent < 8 * 1024 * 1024  # socket buffers at most: the body went unread
    else:
        assert f"has at least {MAX_MANIFEST_BYTES + 1} bytes" in message
        assert server.sent < MAX_MANIFEST_BYTES + 16 * 1024 * 1024


@pytest.mark.moto
def test_a_manifest_object_over_the_limit_is_refused_from_its_length(
    moto_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    session = boto3.Session(region_name="us-east-1")
    s3 = session.client("s3")
    s3.create_bucket(Bucket="huge-manifest")
    size = MAX_MANIFEST_BYTES + 1024
    s3.put_object(Bucket="huge-manifest", Key="store/manifest.json", Body=b" " * size)
    url = "s3://huge-manifest/store/manifest.json"
    with (
        Endpoint("anything", session=session, manifest=url, timeout=30) as endpoint,
        pytest.raises(ManifestError) as raised,
    ):
        endpoint.model_info("addsub")
    # The announced length alone refused it (an exact size, not "at least").
    assert f"{url}: has {size} bytes, over the {MAX_MANIFEST_BYTES}-byte limit" in str(raised.value)
