"""`timeout=` bounds a whole call, against servers that drip or garble answers.

A small asyncio server answers InvokeEndpoint one byte at a time (in the
status line and headers, or in the body), or with bytes that are not HTTP.
Both clients must give up when `timeout` (or what the retry policy's
`total_timeout` leaves) runs out, and raise only `deploy.client` errors.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deploy.client import (
    AsyncEndpoint,
    ClientError,
    Endpoint,
    EndpointError,
    InferenceTimeoutError,
    RetryPolicy,
)
from deploy.client.codec import encode_input, encode_response

INPUTS = {"INPUT0": np.arange(4, dtype=np.float32)}
ONCE = RetryPolicy(max_attempts=1)
DRIP_S = 0.25  # one byte this often: every read succeeds, the answer never ends
STOP_DRIPPING_S = 30.0
# How far past its timeout a call may end: the thread hand-offs and a TLS teardown on a
# loaded machine, far below the 30 s a call without the deadline would take.
SLACK_S = 1.5


def content_length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 0


class DripServer:
    """Answers each request as `mode` says; `requests` counts them."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.mode = "ok"
        self.requests = 0
        self.loop = asyncio.new_event_loop()
        self._tls = tls
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self._thread.start()
        started.wait(10)

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._answer, "127.0.0.1", 0, ssl=self._tls)
        )
        self.port = self.server.sockets[0].getsockname()[1]
        started.set()
        self.loop.run_forever()

    @property
    def url(self) -> str:
        return f"{'https' if self._tls else 'http'}://127.0.0.1:{self.port}"

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(content_length(head))
                if head.startswith(b"GET "):  # the SDK looking for a manifest: none here
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    continue
                self.requests += 1
                if not await self._reply(writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def _reply(self, writer: asyncio.StreamWriter) -> bool:
        encoded = encode_response([encode_input("OUTPUT0", INPUTS["INPUT0"] * 2)])
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Type: {encoded.content_type}\r\n"
            f"Content-Length: {len(encoded.body)}\r\n\r\n"
        ).encode()
        if self.mode == "ok":
            writer.write(head + encoded.body)
            await writer.drain()
            return True
        if self.mode == "garbage":
            writer.write(b"SPAM/9.9 what is this\r\n\r\n")
        elif self.mode == "bad-header":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\n")
        elif self.mode in ("drip-head", "drip-body"):
            if self.mode == "drip-head":
                head, rest = b"HTTP/1.1 200 OK\r\nX-Slow: ", b"a" * 10_000
            else:
                head, rest = head, encoded.body + b"\0" * 10_000
            writer.write(head)
            stop = time.monotonic() + STOP_DRIPPING_S
            for byte in rest:
                if time.monotonic() > stop:
                    break
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(DRIP_S)
        await writer.drain()
        return False

    def close(self) -> None:
        async def shutdown() -> None:
            self.server.close()
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def server() -> Iterator[DripServer]:
    running = DripServer()
    yield running
    running.close()


def sync_call(url: str, **options: Any) -> Any:
    with Endpoint("ep", endpoint_url=url, **options) as endpoint:
        return endpoint.infer("m.tar.gz", INPUTS)


def async_call(url: str, **options: Any) -> Any:
    async def run() -> Any:
        async with AsyncEndpoint("ep", endpoint_url=url, **options) as endpoint:
            return await endpoint.infer("m.tar.gz", INPUTS)

    return asyncio.run(run())


def sync_timed(server: DripServer, mode: str, **options: Any) -> tuple[float, Exception]:
    """How long a call against `mode` took and what it raised, after a first call
    that set the client up (creating a boto3 client is not the server's time)."""
    with Endpoint("ep", endpoint_url=server.url, **options) as endpoint:
        server.mode = "ok"
        endpoint.infer("m.tar.gz", INPUTS)
        server.mode = mode
        started = time.monotonic()
        try:
            endpoint.infer("m.tar.gz", INPUTS)
        except Exception as exc:
            return time.monotonic() - started, exc
    raise AssertionError("the call succeeded")


def async_timed(server: DripServer, mode: str, **options: Any) -> tuple[float, Exception]:
    async def run() -> tuple[float, Exception]:
        async with AsyncEndpoint("ep", endpoint_url=server.url, **options) as endpoint:
            server.mode = "ok"
            await endpoint.infer("m.tar.gz", INPUTS)
            server.mode = mode
            started = time.monotonic()
            try:
                await endpoint.infer("m.tar.gz", INPUTS)
            except Exception as exc:
                return time.monotonic() - started, exc
        raise AssertionError("the call succeeded")

    return asyncio.run(run())


CALLS = [pytest.param(sync_call, id="sync"), pytest.param(async_call, id="async")]
TIMED = [pytest.param(sync_timed, id="sync"), pytest.param(async_timed, id="async")]


@pytest.mark.parametrize("timed", TIMED)
@pytest.mark.parametrize(("mode", "timeout"), [("drip-body", 3.0), ("drip-head", 1.5)])
def test_timeout_bounds_a_dripping_answer(
    server: DripServer, timed: Any, mode: str, timeout: float
) -> None:
    elapsed, error = timed(server, mode, timeout=timeout, retries=ONCE)
    assert isinstance(error, InferenceTimeoutError), repr(error)
    assert f"timeout={timeout}s" in str(error)
    # The server drips for STOP_DRIPPING_S (30 s): ending within a second and a half of
    # the timeout shows the deadline held, with room for a loaded 2-core machine.
    assert timeout - 0.1 <= elapsed < timeout + SLACK_S


@pytest.mark.parametrize("timed", TIMED)
def test_total_timeout_bounds_retries_of_a_dripping_answer(server: DripServer, timed: Any) -> None:
    policy = RetryPolicy(max_attempts=5, total_timeout=1.0)
    elapsed, error = timed(server, "drip-body", timeout=30.0, retries=policy)
    assert isinstance(error, InferenceTimeoutError), repr(error)
    assert elapsed < 1.5


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("mode", ["garbage", "bad-header"])
def test_malformed_answers_are_client_errors(server: DripServer, call: Any, mode: str) -> None:
    server.mode = mode
    with pytest.raises(ClientError) as caught:
        call(server.url, timeout=5.0, retries=RetryPolicy(max_attempts=2, base_delay=0.01))
    assert isinstance(caught.value, EndpointError), repr(caught.value)
    assert server.requests == 2  # a broken answer is retried like a dropped connection
    server.mode = "ok"
    np.testing.assert_array_equal(call(server.url)["OUTPUT0"], INPUTS["INPUT0"] * 2)


@pytest.fixture
def tls_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DripServer]:
    """A TLS server whose self-signed certificate is the CA bundle (AWS_CA_BUNDLE)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    monkeypatch.setenv("AWS_CA_BUNDLE", str(cert_file))
    running = DripServer(tls=context)
    yield running
    running.close()


@pytest.mark.parametrize(
    ("call", "timed"),
    [
        pytest.param(sync_call, sync_timed, id="sync"),
        pytest.param(async_call, async_timed, id="async"),
    ],
)
def test_tls_calls_verify_with_the_ca_bundle_and_keep_the_deadline(
    tls_server: DripServer, call: Any, timed: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    elapsed, error = timed(tls_server, "drip-body", timeout=1.5, retries=ONCE)
    assert isinstance(error, InferenceTimeoutError), repr(error)
    assert elapsed < 1.5 + SLACK_S
    monkeypatch.delenv("AWS_CA_BUNDLE")  # an unknown certificate is refused
    tls_server.mode = "ok"
    with pytest.raises(EndpointError):
        call(tls_server.url, retries=ONCE)


class ForwardProxy:
    """An HTTP forward proxy (absolute-form request lines), one request per connection."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []
        self._server = DripServer()  # reuse its loop thread
        self.port = asyncio.run_coroutine_threadsafe(self._start(), self._server.loop).result(10)

    async def _start(self) -> int:
        self._proxy = await asyncio.start_server(self._forward, "127.0.0.1", 0)
        return int(self._proxy.sockets[0].getsockname()[1])

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            method, url, version = head.split(b"\r\n", 1)[0].split(b" ")
            self.seen.append(url)
            authority, _, path = url.split(b"://", 1)[1].partition(b"/")
            host, port = authority.split(b":")
            body = await reader.readexactly(content_length(head))
            upstream_reader, upstream = await asyncio.open_connection(host.decode(), int(port))
            rest = head.split(b"\r\n", 1)[1].replace(b"Connection: keep-alive", b"")
            upstream.write(b" ".join([method, b"/" + path, version]) + b"\r\n" + rest + body)
            answer_head = await upstream_reader.readuntil(b"\r\n\r\n")
            size = content_length(answer_head)
            writer.write(answer_head + await upstream_reader.readexactly(size))
            await writer.drain()
            upstream.close()
        finally:
            writer.close()

    def close(self) -> None:
        self._server.loop.call_soon_threadsafe(self._proxy.close)
        self._server.close()


def test_a_proxy_from_the_environment_is_still_used(
    server: DripServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = ForwardProxy()
    try:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        result = sync_call(server.url, retries=ONCE)
        np.testing.assert_array_equal(result["OUTPUT0"], INPUTS["INPUT0"] * 2)
        assert f"{server.url}/endpoints/ep/invocations".encode() in proxy.seen
    finally:
        proxy.close()
