"""An endpoint answering with 100k-deep JSON gets an SDK error, never RecursionError.

GIVEN a loopback server in the place of the endpoint that answers every call
with a JSON body nested 100,000 deep (as an error answer, or as a 200),
WHEN each client (direct transport, boto3 transport, asyncio) calls it,
THEN the call raises a `deploy.client` error. botocore's own parser raises
RecursionError on such an error body; the SDK maps it.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Literal

import numpy as np
import pytest

from deploy.client import AsyncEndpoint, ClientError, Endpoint, ResponseFormatError

DEPTH = 100_000
DEEP = b"[" * DEPTH + b"]" * DEPTH
INPUTS = {"INPUT0": np.zeros(4, dtype=np.float32)}
MODEL = "m-0123456789abcdef.tar.gz"  # a TargetModel: no manifest needed


class DeepServer:
    """Answers every POST with `status` and the deep body; GETs (the manifest) with 404."""

    def __init__(self, status: bytes) -> None:
        self.status = status
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = connection.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            while len(body) < length:
                chunk = connection.recv(65536)
                if not chunk:
                    return
                body += chunk
            status, answer = (self.status, DEEP) if head.startswith(b"POST") else (b"404", b"")
            connection.sendall(
                b"HTTP/1.1 %s Whatever\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (status, len(answer)) + answer
            )

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[DeepServer]:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    served = DeepServer(request.param)
    yield served
    served.close()


@pytest.mark.parametrize("server", [b"400", b"200"], indirect=True)
@pytest.mark.parametrize("transport", ["direct", "boto3"])
def test_both_transports_map_deep_answers(
    server: DeepServer, transport: Literal["direct", "boto3"]
) -> None:
    with (
        Endpoint("deep", endpoint_url=server.url, transport=transport, retries=1) as endpoint,
        pytest.raises(ClientError) as raised,
    ):
        endpoint.infer(MODEL, INPUTS)
    if server.status == b"200":
        assert isinstance(raised.value, ResponseFormatError)
        assert "nested too deeply" in str(raised.value)


@pytest.mark.parametrize("server", [b"400", b"200"], indirect=True)
def test_the_asyncio_endpoint_maps_deep_answers(server: DeepServer) -> None:
    async def call() -> None:
        async with AsyncEndpoint("deep", endpoint_url=server.url, retries=1) as endpoint:
            await endpoint.infer(MODEL, INPUTS)

    with pytest.raises(ClientError):
        asyncio.run(call())
