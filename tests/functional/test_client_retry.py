"""Retries, timeouts and signing against a tiny scripted HTTP server.

The server answers InvokeEndpoint with a scripted sequence (429, 503, a
dropped connection, then 200 with a real Triton binary body); the SDK talks
to it through a real boto3 client (sync) and aiohttp + SigV4 (async).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from deploy.client import (
    AsyncEndpoint,
    Endpoint,
    InferenceTimeoutError,
    ModelError,
    RetriesExhaustedError,
    RetryPolicy,
)
from deploy.client.codec import encode_input, encode_response

FAST = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.02, total_timeout=10)
INPUTS = {"INPUT0": np.arange(4, dtype=np.float32)}
OUTPUT = np.arange(4, dtype=np.float32) * 2


@dataclass
class Reply:
    status: int = 200
    code: str | None = None
    members: dict[str, Any] = field(default_factory=dict)
    drop: bool = False
    delay: float = 0.0


@dataclass
class Script:
    replies: list[Reply] = field(default_factory=list)
    seen: list[dict[str, str]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)


def make_handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            script.seen.append({k.lower(): v for k, v in self.headers.items()})
            script.bodies.append(body)
            script.paths.append(self.path)
            reply = script.replies.pop(0) if script.replies else Reply()
            time.sleep(reply.delay)
            if reply.drop:
                self.close_connection = True
                self.connection.close()
                return
            if reply.status == 200:
                encoded = encode_response([encode_input("OUTPUT0", OUTPUT)])
                payload, content_type = encoded.body, encoded.content_type
                headers = [("Content-Type", content_type)]
            else:
                document = {"__type": reply.code, "message": f"scripted {reply.status}"}
                document.update(reply.members)
                payload = json.dumps(document).encode()
                headers = [("Content-Type", "application/json")]
                if reply.code:
                    headers.append(("x-amzn-ErrorType", reply.code))
            self.send_response(reply.status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Script]]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    script = Script()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(script))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    httpd.shutdown()
    httpd.server_close()


def signature_is_valid(script: Script, index: int) -> bool:
    """Recompute the request's SigV4 signature with botocore from what arrived."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    headers = script.seen[index]
    fields = dict(
        part.strip().split("=", 1) for part in headers["authorization"].split(" ", 1)[1].split(",")
    )
    signed = fields["SignedHeaders"].split(";")
    request = AWSRequest(
        method="POST",
        url=f"http://{headers['host']}{script.paths[index]}",
        data=script.bodies[index],
        headers={name: headers[name] for name in signed},
    )
    request.context["timestamp"] = headers["x-amz-date"]
    auth = SigV4Auth(Credentials("testing", "testing"), "sagemaker", "us-east-1")
    expected = auth.signature(
        auth.string_to_sign(request, auth.canonical_request(request)), request
    )
    return bool(expected == fields["Signature"])


def endpoint(url: str, **kw: Any) -> Endpoint:
    return Endpoint("ep", endpoint_url=url, retries=kw.pop("retries", FAST), **kw)


def test_throttling_cold_load_503_and_reset_are_retried(server: tuple[str, Script]) -> None:
    url, script = server
    script.replies = [
        Reply(429, "ThrottlingException"),
        Reply(429, "ModelNotReadyException"),
        Reply(503, "ServiceUnavailable"),
        Reply(drop=True),
    ]
    with endpoint(url, retries=RetryPolicy(6, 0.01, 0.02, 10)) as ep:
        result = ep.infer("m.tar.gz", INPUTS)
    np.testing.assert_array_equal(result["OUTPUT0"], OUTPUT)
    assert len(script.seen) == 5
    assert {s["x-amzn-sagemaker-target-model"] for s in script.seen} == {"m.tar.gz"}
    assert all(s["authorization"].startswith("AWS4-HMAC-SHA256") for s in script.seen)
    assert all(signature_is_valid(script, index) for index in range(len(script.seen)))
    assert script.bodies[0] == script.bodies[-1]
    script.bodies[0] += b" "  # the check itself must notice a changed payload
    assert not signature_is_valid(script, 0)


def test_507_from_the_model_is_retried(server: tuple[str, Script]) -> None:
    url, script = server
    members = {"OriginalStatusCode": 507, "OriginalMessage": "out of memory"}
    script.replies = [Reply(424, "ModelError", members)]
    with endpoint(url) as ep:
        assert "OUTPUT0" in ep.infer("m.tar.gz", INPUTS)
    assert len(script.seen) == 2


def test_model_errors_are_not_retried(server: tuple[str, Script]) -> None:
    url, script = server
    members = {"OriginalStatusCode": 400, "OriginalMessage": "unexpected shape for input"}
    script.replies = [Reply(424, "ModelError", members)]
    with endpoint(url) as ep, pytest.raises(ModelError, match="unexpected shape") as caught:
        ep.infer("m.tar.gz", INPUTS)
    assert caught.value.status == 400
    assert len(script.seen) == 1


def test_retries_run_out(server: tuple[str, Script]) -> None:
    url, script = server
    script.replies = [Reply(503, "ServiceUnavailable")] * 10
    with endpoint(url) as ep, pytest.raises(RetriesExhaustedError, match="after 4 attempts"):
        ep.infer("m.tar.gz", INPUTS)
    assert len(script.seen) == 4


# The per-call timeout also bounds the first call's manifest lookup: 1.5 s leaves a
# loaded machine room for it (0.3 s did not, once), and the answer comes after 4 s.
SLOW_ANSWER_S = 4.0
CALL_TIMEOUT_S = 1.5


def test_per_call_timeout_is_not_retried(server: tuple[str, Script]) -> None:
    url, script = server
    script.replies = [Reply(delay=SLOW_ANSWER_S)]
    with (
        endpoint(url, timeout=CALL_TIMEOUT_S) as ep,
        pytest.raises(InferenceTimeoutError, match=r"no complete answer within timeout=1\.5s"),
    ):
        ep.infer("m.tar.gz", INPUTS)
    assert len(script.seen) == 1


def test_total_timeout_bounds_the_sequence(server: tuple[str, Script]) -> None:
    url, script = server
    script.replies = [Reply(503, "ServiceUnavailable")] * 50
    policy = RetryPolicy(max_attempts=50, base_delay=0.2, max_delay=0.2, total_timeout=0.5)
    started = time.monotonic()
    with endpoint(url, retries=policy) as ep, pytest.raises(InferenceTimeoutError):
        ep.infer("m.tar.gz", INPUTS)
    assert time.monotonic() - started < 2.0
    assert len(script.seen) < 50


def test_async_retries_and_signs(server: tuple[str, Script]) -> None:
    url, script = server
    script.replies = [Reply(429, "ModelNotReadyException"), Reply(drop=True), Reply(503)]

    async def run() -> Any:
        async with AsyncEndpoint("ep", endpoint_url=url, retries=FAST) as ep:
            first = await ep.infer("m.tar.gz", INPUTS)
            both = await asyncio.gather(*(ep.infer("m.tar.gz", INPUTS) for _ in range(3)))
            return [first, *both]

    results = asyncio.run(run())
    for result in results:
        np.testing.assert_array_equal(result["OUTPUT0"], OUTPUT)
    assert len(script.seen) == 7
    assert all(s["authorization"].startswith("AWS4-HMAC-SHA256") for s in script.seen)
    assert all("/sagemaker/aws4_request" in s["authorization"] for s in script.seen)
    assert all(signature_is_valid(script, index) for index in range(len(script.seen)))
    assert script.seen[0]["x-amzn-sagemaker-target-model"] == "m.tar.gz"


def test_async_model_error_and_timeout(server: tuple[str, Script]) -> None:
    url, script = server
    members = {"OriginalStatusCode": 400, "OriginalMessage": "bad input"}
    script.replies = [Reply(424, "ModelError", members), Reply(delay=SLOW_ANSWER_S)]

    async def run() -> None:
        async with AsyncEndpoint(
            "ep", endpoint_url=url, retries=FAST, timeout=CALL_TIMEOUT_S
        ) as ep:
            with pytest.raises(ModelError, match="bad input"):
                await ep.infer("m.tar.gz", INPUTS)
            with pytest.raises(InferenceTimeoutError, match="no complete answer within"):
                await ep.infer("m.tar.gz", INPUTS)

    asyncio.run(run())
    assert len(script.seen) == 2


def test_unsigned_without_credentials(
    server: tuple[str, Script], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    url, script = server
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with endpoint(url) as ep:
        assert "OUTPUT0" in ep.infer("m.tar.gz", INPUTS)
    assert "authorization" not in script.seen[0]
