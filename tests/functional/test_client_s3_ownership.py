"""The SDK reads, writes and deletes only the S3 objects its manifest owns.

GIVEN a stage published on the moto server (DescribeEndpoint → model data URL
→ manifest.json in the store bucket, asynchronous prefixes beside it) and a
loopback InvokeEndpointAsync server standing for the endpoint, which either
answers honestly (it reads the request from S3 and writes the answer under
the output prefix) or names another bucket's object as its OutputLocation or
FailureLocation;
WHEN the SDK sends a request through S3,
THEN every S3 request stays in the store bucket, under the manifest's
prefixes, and carries `ExpectedBucketOwner` (the account of the endpoint's
ARN; moto ignores the header, so the requests are captured at botocore's
`before-send`), and a location elsewhere is a `ResponseFormatError` naming
it, with the victim object neither read nor deleted. An `async_lane` in
another bucket is a `ManifestError` naming it, and nothing is uploaded.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

import boto3
import numpy as np
import pytest

from deploy.client import AsyncInferenceOptions, Endpoint, ManifestError, ResponseFormatError
from deploy.client.codec import decode_request, encode_input, encode_response

pytestmark = pytest.mark.moto

ACCOUNT = "123456789012"  # moto's account: the one in its endpoint ARNs
ECR = "763104351884.dkr.ecr.us-east-1.amazonaws.com"
VICTIM_KEY = "prod/important-model.tar.gz"
MODEL = {
    "name": "double",
    "target_model": "double-0123456789abcdef.tar.gz",
    "max_batch_size": 0,
    "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [-1]}],
    "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1]}],
}
SMALL = {"INPUT0": np.arange(4, dtype=np.float32)}


@dataclass
class Stage:
    session: boto3.Session
    s3: Any
    name: str
    store: str
    victim: str
    endpoint: str  # the loopback InvokeEndpointAsync server's URL
    behaviour: dict[str, str]
    sent: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    def prefix(self, kind: str) -> str:
        return f"s3://{self.store}/async/{self.name}/{kind}/"

    def keys(self, bucket: str) -> list[str]:
        listed = self.s3.list_objects_v2(Bucket=bucket)
        return sorted(item["Key"] for item in listed.get("Contents", []))

    def victim_bytes(self) -> bytes:
        return bytes(self.s3.get_object(Bucket=self.victim, Key=VICTIM_KEY)["Body"].read())

    def client_session(self) -> boto3.Session:
        """A session whose S3 requests are recorded as botocore sends them."""
        session = boto3.Session(region_name="us-east-1")

        def record(request: Any, **_: Any) -> None:
            headers = {k.lower(): _text(v) for k, v in request.headers.items()}
            self.sent.append((request.method, request.url, headers))

        session.events.register("before-send.s3", record)
        return session


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _handler(stage: Stage) -> type[BaseHTTPRequestHandler]:
    class AsyncInvocations(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            inference = uuid.uuid4().hex
            output = f"{stage.prefix('output')}{inference}.out"
            failure = f"{stage.prefix('failure')}{inference}-error.out"
            mode = stage.behaviour["mode"]
            if mode == "honest":
                self._answer(self.headers["X-Amzn-SageMaker-InputLocation"], output)
            elif mode == "victim-output":
                output = f"s3://{stage.victim}/{VICTIM_KEY}"
            elif mode == "victim-failure":
                failure = f"s3://{stage.victim}/{VICTIM_KEY}"
            elif mode == "traversal":
                output = f"{stage.prefix('output')}../../../{VICTIM_KEY}"
            elif mode == "deep-error":  # botocore's parser raises RecursionError on it
                deep = b"[" * 100_000 + b"]" * 100_000
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(deep)))
                self.end_headers()
                self.wfile.write(deep)
                return
            body = json.dumps({"InferenceId": inference}).encode()
            self.send_response(202)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-Amzn-SageMaker-OutputLocation", output)
            self.send_header("X-Amzn-SageMaker-FailureLocation", failure)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _answer(self, input_location: str, output: str) -> None:
            bucket, _, key = input_location.removeprefix("s3://").partition("/")
            request = stage.s3.get_object(Bucket=bucket, Key=key)
            decoded = decode_request(request["Body"].read(), request["ContentType"])
            answer = encode_response([encode_input("OUTPUT0", decoded.outputs["INPUT0"] * 2)])
            out_bucket, _, out_key = output.removeprefix("s3://").partition("/")
            stage.s3.put_object(
                Bucket=out_bucket,
                Key=out_key,
                Body=answer.body,
                ContentType=answer.content_type,
            )

        def log_message(self, *_: Any) -> None:
            pass

    return AsyncInvocations


@pytest.fixture
def stage(moto_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stage]:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    session = boto3.Session(region_name="us-east-1")
    s3 = session.client("s3")
    suffix = uuid.uuid4().hex[:10]
    store, victim, name = f"store-{suffix}", f"victim-{suffix}", f"ep-{suffix}"
    for bucket in (store, victim):
        s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=victim, Key=VICTIM_KEY, Body=b"the victim's model")
    behaviour = {"mode": "honest"}
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    staged = Stage(session, s3, name, store, victim, url, behaviour)
    server.RequestHandlerClass = _handler(staged)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield staged
    finally:
        server.shutdown()
        server.server_close()


def publish(stage: Stage, **sections: Any) -> None:
    """The stage as `deploy up` leaves it: endpoint, model data URL, manifest beside it."""
    document = {"format": 1, "models": {"double": MODEL}, **sections}
    stage.s3.put_object(
        Bucket=stage.store, Key="models/manifest.json", Body=json.dumps(document).encode()
    )
    sagemaker = stage.session.client("sagemaker")
    sagemaker.create_model(
        ModelName=f"{stage.name}-model",
        ExecutionRoleArn=f"arn:aws:iam::{ACCOUNT}:role/sagemaker",
        PrimaryContainer={
            "Image": f"{ECR}/sagemaker-tritonserver:24.09-py3",
            "ModelDataUrl": f"s3://{stage.store}/models/model.tar.gz",
        },
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=f"{stage.name}-config",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": f"{stage.name}-model",
                "InitialInstanceCount": 1,
                "InstanceType": "ml.g4dn.xlarge",
            }
        ],
    )
    sagemaker.create_endpoint(EndpointName=stage.name, EndpointConfigName=f"{stage.name}-config")


def publish_async(stage: Stage) -> None:
    prefixes = {f"{kind}_prefix": stage.prefix(kind) for kind in ("input", "output", "failure")}
    publish(stage, hosting="async", async_inference=prefixes)


def endpoint(stage: Stage, **options: Any) -> Endpoint:
    # The endpoint's runtime is the loopback server; the control plane and S3 are moto's.
    # A short wait: an answer at a location the SDK refuses never shows up where it looks.
    return Endpoint(
        stage.name,
        endpoint_url=stage.endpoint,
        session=stage.client_session(),
        async_options=AsyncInferenceOptions(wait_timeout=15),
        **options,
    )


def test_every_s3_request_stays_in_the_prefixes_and_names_the_owner(stage: Stage) -> None:
    publish_async(stage)
    with endpoint(stage) as client:
        result = client.infer("double", SMALL)
    assert result["OUTPUT0"].tolist() == [0.0, 2.0, 4.0, 6.0]
    operations = {method for method, _, _ in stage.sent}
    assert {"GET", "HEAD", "PUT", "DELETE"} <= operations
    manifest = f"/{stage.store}/models/manifest.json"
    allowed = [f"/{stage.store}/async/{stage.name}/{kind}/" for kind in ("input", "output")]
    for method, url, headers in stage.sent:
        path = unquote(urlsplit(url).path)
        assert path == manifest or any(path.startswith(prefix) for prefix in allowed), (method, url)
        assert headers.get("x-amz-expected-bucket-owner") == ACCOUNT, (method, url)
    assert stage.keys(stage.store) == ["models/manifest.json"]  # request and answer cleaned up


@pytest.mark.parametrize(
    ("mode", "named"),
    [
        ("victim-output", "OutputLocation 's3://{victim}/prod/important-model.tar.gz'"),
        ("victim-failure", "FailureLocation 's3://{victim}/prod/important-model.tar.gz'"),
        ("traversal", "OutputLocation 's3://{store}/async/{name}/output/../../../prod/"),
    ],
)
def test_an_answer_naming_another_object_is_refused_untouched(
    stage: Stage, mode: str, named: str
) -> None:
    publish_async(stage)
    stage.behaviour["mode"] = mode
    with endpoint(stage) as client, pytest.raises(ResponseFormatError) as raised:
        client.infer("double", SMALL)
    message = str(raised.value)
    assert named.format(victim=stage.victim, store=stage.store, name=stage.name) in message
    assert f"not under {stage.prefix('output' if 'Output' in named else 'failure')}" in message
    assert "nothing was read or deleted" in message
    assert stage.victim_bytes() == b"the victim's model"
    touched = [(method, url) for method, url, _ in stage.sent if stage.victim in url]
    touched += [(m, u) for m, u, _ in stage.sent if "/prod/" in unquote(urlsplit(u).path)]
    assert touched == []


def test_an_async_lane_in_another_bucket_is_refused_before_any_upload(stage: Stage) -> None:
    lane = {
        "endpoint_name": f"{stage.name}-async",
        "input_prefix": f"s3://{stage.victim}/async/in/",
        "output_prefix": f"s3://{stage.victim}/async/out/",
        "failure_prefix": f"s3://{stage.victim}/async/failure/",
    }
    publish(stage, hosting="multi-model", async_lane=lane)
    large = {"INPUT0": np.zeros(2 * 1024 * 1024, dtype=np.float32)}  # 8 MB: over real time
    with endpoint(stage) as client, pytest.raises(ManifestError) as raised:
        client.infer("double", large)
    message = str(raised.value)
    assert f"s3://{stage.store}/models/manifest.json: async_lane" in message
    assert f"names bucket '{stage.victim}'" in message
    assert f"the manifest is in bucket '{stage.store}'" in message
    assert stage.keys(stage.victim) == [VICTIM_KEY]
    assert [url for _, url, _ in stage.sent if stage.victim in url] == []


def test_without_discovery_the_owner_is_not_known_and_not_sent(stage: Stage) -> None:
    # manifest= given: no DescribeEndpoint, so no ARN names the account (no extra call).
    publish_async(stage)
    url = f"s3://{stage.store}/models/manifest.json"
    with endpoint(stage, manifest=url) as client:
        assert client.infer("double", SMALL)["OUTPUT0"].tolist() == [0.0, 2.0, 4.0, 6.0]
    assert stage.sent
    assert all("x-amz-expected-bucket-owner" not in headers for _, _, headers in stage.sent)


def test_a_deeply_nested_error_answer_is_an_sdk_error(stage: Stage) -> None:
    publish_async(stage)
    stage.behaviour["mode"] = "deep-error"
    with endpoint(stage) as client, pytest.raises(ResponseFormatError, match="nested too deeply"):
        client.infer("double", SMALL)
