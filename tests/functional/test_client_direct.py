"""The direct InvokeEndpoint transport against botocore's own: the same request
on the wire (path, headers, body, SigV4 signature) and the same SDK errors for
the same error answers.

Both transports call a scripted local HTTP server; the signing clock is frozen
so that the two signatures can be compared byte for byte.
"""

from __future__ import annotations

import datetime
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import numpy as np
import pytest

from deploy.client import ClientError, Endpoint, RetryPolicy
from deploy.client._direct import DirectInvoker
from deploy.client.codec import encode_input, encode_response

INPUTS = {"INPUT0": np.arange(4, dtype=np.float32)}
ONCE = RetryPolicy(max_attempts=1)
FROZEN = datetime.datetime(2026, 1, 2, 3, 4, 5)


@dataclass
class Server:
    url: str = ""
    # Scripted answers: (status, headers, body); none left answers 200 with a Triton body.
    answers: list[tuple[int, dict[str, str], bytes]] = field(default_factory=list)
    seen: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    # Close each connection after answering, without saying so (an idle timeout).
    drop_idle: bool = False


def handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            server.bodies.append(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            server.seen.append({k.lower(): v for k, v in self.headers.items()})
            server.paths.append(self.path)
            if server.answers:
                status, headers, payload = server.answers.pop(0)
            else:
                encoded = encode_response([encode_input("OUTPUT0", INPUTS["INPUT0"] * 2)])
                status, headers = 200, {"Content-Type": encoded.content_type}
                payload = encoded.body
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            if server.drop_idle:
                self.close_connection = True

    return Handler


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # One signing time for both transports: their signatures must then be equal.
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda *a, **k: FROZEN)
    state = Server()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler(state))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield state
    httpd.shutdown()
    httpd.server_close()


def test_wire_request_equals_botocores(server: Server) -> None:
    for transport in ("direct", "boto3"):
        with Endpoint("my-ep", endpoint_url=server.url, retries=ONCE, transport=transport) as ep:
            np.testing.assert_array_equal(ep.infer("m.tar.gz", INPUTS)["OUTPUT0"], [0, 2, 4, 6])
    direct, boto = server.seen
    assert server.paths == ["/endpoints/my-ep/invocations"] * 2
    assert server.bodies[0] == server.bodies[1]
    # botocore adds its invocation-id header; the direct request must not have gone
    # through botocore at all.
    assert "amz-sdk-invocation-id" in boto and "amz-sdk-invocation-id" not in direct
    for name in (
        "host",
        "content-type",
        "content-length",
        "x-amzn-sagemaker-target-model",
        "x-amz-date",
        "authorization",
    ):
        assert direct[name] == boto[name], name
    assert direct["x-amz-date"] == "20260102T030405Z"
    assert (
        "SignedHeaders=content-type;host;x-amz-date;x-amzn-sagemaker-target-model"
        in (direct["authorization"])
    )


def test_every_header_member_and_the_resolved_url_sign_as_botocore(server: Server) -> None:
    """No endpoint_url: the URL comes from botocore's resolver; the optional
    header members (Accept, CustomAttributes, InferenceId) sign as botocore's."""
    session = boto3.Session(region_name="eu-west-1")
    runtime = session.client("sagemaker-runtime")
    captured: dict[str, Any] = {}

    def capture(request: Any, **_: Any) -> None:
        captured["url"] = request.url
        captured["headers"] = {
            k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()
        }
        raise RuntimeError("captured")  # nothing leaves this machine

    runtime.meta.events.register("before-send.sagemaker-runtime.InvokeEndpoint", capture)
    body = b"\x00\x01body"
    with pytest.raises(RuntimeError, match="captured"):
        runtime.invoke_endpoint(
            EndpointName="my-ep",
            Body=body,
            ContentType="application/octet-stream",
            Accept="application/json",
            TargetModel="m.tar.gz",
            CustomAttributes="trace=1",
            InferenceId="id-7",
        )
    with Endpoint("my-ep", session=session) as ep:
        invoker = ep._direct_invoker()
        assert isinstance(invoker, DirectInvoker)
        assert invoker.url == captured["url"]
        assert (
            invoker.url
            == "https://runtime.sagemaker.eu-west-1.amazonaws.com/endpoints/my-ep/invocations"
        )
        headers = invoker.headers(
            memoryview(body),
            "application/octet-stream",
            target_model="m.tar.gz",
            accept="application/json",
            custom_attributes="trace=1",
            inference_id="id-7",
        )
    expected = captured["headers"]
    for name in (
        "Content-Type",
        "Accept",
        "X-Amzn-SageMaker-Target-Model",
        "X-Amzn-SageMaker-Custom-Attributes",
        "X-Amzn-SageMaker-Inference-Id",
        "X-Amz-Date",
        "Authorization",
    ):
        assert headers[name] == expected[name], name


def test_refreshed_credentials_are_used_on_the_next_call(server: Server) -> None:
    from botocore.credentials import Credentials

    credentials = Credentials("AKIDFIRST", "secret-1")
    session = boto3.Session(region_name="eu-west-1")
    session._session._credentials = credentials
    with Endpoint("ep", endpoint_url=server.url, session=session, retries=ONCE) as ep:
        ep.infer("m.tar.gz", INPUTS)
        credentials.access_key = "AKIDSECOND"  # what a refresh does to the same object
        ep.infer("m.tar.gz", INPUTS)
    assert "Credential=AKIDFIRST/" in server.seen[0]["authorization"]
    assert "Credential=AKIDSECOND/" in server.seen[1]["authorization"]


def _json(document: dict[str, Any]) -> bytes:
    return json.dumps(document).encode()


# (status, headers, body) as SageMaker (or a proxy in front of it) answers.
ERROR_ANSWERS = {
    "validation": (
        400,
        {"x-amzn-ErrorType": "ValidationError:http://internal.amazon.com/"},
        _json({"message": "Endpoint my-ep of account 1 not found."}),
    ),
    "validation-model-missing": (
        400,
        {"x-amzn-ErrorType": "ValidationError"},
        _json({"message": "Failed to download model data for model m.tar.gz"}),
    ),
    "model-error": (
        424,
        {"x-amzn-ErrorType": "ModelError"},
        _json(
            {
                "message": "Received client error (400) from primary",
                "OriginalStatusCode": 400,
                "OriginalMessage": '{"error":"unexpected shape for input INPUT0"}',
                "LogStreamArn": "arn:aws:logs:eu-west-1:1:log-group",
            }
        ),
    ),
    "model-error-507": (
        424,
        {"x-amzn-ErrorType": "ModelError"},
        _json({"message": "Received server error (507)", "OriginalStatusCode": 507}),
    ),
    "model-not-ready": (
        429,
        {},
        _json({"__type": "ModelNotReadyException", "message": "model is loading"}),
    ),
    "throttling": (
        400,
        {"x-amzn-ErrorType": "ThrottlingException"},
        _json({"message": "Rate exceeded"}),
    ),
    "service-unavailable": (503, {"x-amzn-ErrorType": "ServiceUnavailable"}, b"{}"),
    "internal-failure": (
        500,
        {},
        _json({"__type": "com.amazon.coral#InternalFailure", "Message": "oops"}),
    ),
    "bare-503": (503, {}, b""),
    "html-502": (502, {"Content-Type": "text/html"}, b"<html><body>Bad Gateway</body></html>"),
    "text-500": (500, {"Content-Type": "text/plain"}, b"upstream reset"),
    "413-no-type": (413, {}, _json({"message": "payload too large"})),
    "code-member": (400, {}, _json({"code": "ValidationError", "message": "bad"})),
}


def _failure(server: Server, transport: Any, answer: tuple[int, dict[str, str], bytes]) -> Any:
    server.answers.append(answer)
    with (
        Endpoint("my-ep", endpoint_url=server.url, retries=ONCE, transport=transport) as ep,
        pytest.raises(ClientError) as caught,
    ):
        ep.infer("m.tar.gz", INPUTS)
    error = caught.value
    return (
        type(error),
        str(error),
        getattr(error, "code", None),
        getattr(error, "status", None),
        getattr(error, "attempts", None),
    )


@pytest.mark.parametrize("case", sorted(ERROR_ANSWERS))
def test_errors_map_as_through_botocore(server: Server, case: str) -> None:
    answer = ERROR_ANSWERS[case]
    assert _failure(server, "direct", answer) == _failure(server, "boto3", answer)
    assert "amz-sdk-invocation-id" not in server.seen[0]
    assert "amz-sdk-invocation-id" in server.seen[1]


def test_transport_is_checked_and_an_injected_client_keeps_boto3(server: Server) -> None:
    with pytest.raises(ValueError, match="transport must be"):
        Endpoint("ep", endpoint_url=server.url, transport="http")  # type: ignore[arg-type]
    client = boto3.Session(region_name="eu-west-1").client(
        "sagemaker-runtime", endpoint_url=server.url
    )
    with Endpoint("ep", client=client, retries=ONCE) as ep:
        ep.infer("m.tar.gz", INPUTS)
        assert ep.transport == "boto3"
    assert "amz-sdk-invocation-id" in server.seen[0]


def test_a_connection_the_server_closed_is_not_reused(server: Server) -> None:
    server.drop_idle = True
    with Endpoint("ep", endpoint_url=server.url, retries=ONCE) as ep:
        for _ in range(3):  # one attempt each: a stale connection would fail the call
            np.testing.assert_array_equal(ep.infer("m.tar.gz", INPUTS)["OUTPUT0"], [0, 2, 4, 6])
            time.sleep(0.2)  # idle long enough for the server's close to arrive
    assert len(server.seen) == 3


def test_threads_sharing_an_endpoint_set_up_one_transport() -> None:
    """Eight threads' first calls build one client and one connection pool (a second,
    dropped pool leaked its sockets)."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    from deploy.client import Endpoint

    endpoint = Endpoint("local", endpoint_url="http://127.0.0.1:9", region="us-east-1")
    start = Barrier(8)

    def first_use(_: int) -> tuple[int, int]:
        start.wait()
        return id(endpoint._direct_invoker()), id(endpoint.runtime)

    with endpoint, ThreadPoolExecutor(8) as pool:
        seen = set(pool.map(first_use, range(8)))
    assert len(seen) == 1
