"""The front door's routing, manifest cache and error mapping, with API Gateway v2 events.

The SageMaker runtime is a stand-in here that computes addsub from the binary
request it receives; the real endpoint is exercised in
tests/functional/test_infra_front_door_local.py. Error parsing uses a real
botocore client against a local HTTP server answering like SageMaker.
"""

from __future__ import annotations

import base64
import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest

from deploy_handlers.front_door import app as front_door_app
from deploy_handlers.front_door.app import FrontDoor
from deploy_handlers.front_door.binary import BINARY_CONTENT_TYPE
from deploy_handlers.front_door.manifest import ManifestCache

EVENTS = Path(__file__).resolve().parents[1] / "events"
TARGET = "addsub-1f3c5a7e9b2d4c6a.tar.gz"
MANIFEST = {
    "format": 1,
    "hosting": "multi-model",
    "models": {
        "addsub": {
            "name": "addsub",
            "target_model": TARGET,
            "kind": "model",
            "backend": "python",
            "platform": "",
            "max_batch_size": 8,
            "inputs": [
                {"name": "INPUT0", "datatype": "FP32", "shape": [4]},
                {"name": "INPUT1", "datatype": "FP32", "shape": [4]},
            ],
            "outputs": [
                {"name": "OUTPUT0", "datatype": "FP32", "shape": [4]},
                {"name": "OUTPUT1", "datatype": "FP32", "shape": [4]},
            ],
        }
    },
}


def event(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return loaded


class StoreStandIn:
    def __init__(self, document: dict[str, Any] | None = None) -> None:
        self.document = document if document is not None else MANIFEST
        self.reads = 0

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:  # noqa: N803 (boto3 names)
        self.reads += 1
        assert (Bucket, Key) == ("store", "models/manifest.json")
        return {"Body": io.BytesIO(json.dumps(self.document).encode())}


class AddSubRuntimeStandIn:
    """Parses the binary request with numpy and answers like Triton's addsub model."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def invoke_endpoint(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        size = int(kwargs["ContentType"].rsplit("=", 1)[1])
        header = json.loads(kwargs["Body"][:size])
        offset, tensors = size, {}
        for tensor in header["inputs"]:
            n = tensor["parameters"]["binary_data_size"]
            raw = kwargs["Body"][offset : offset + n]
            tensors[tensor["name"]] = np.frombuffer(raw, "<f4").reshape(tensor["shape"])
            offset += n
        out = {
            "OUTPUT0": tensors["INPUT0"] + tensors["INPUT1"],
            "OUTPUT1": tensors["INPUT0"] - tensors["INPUT1"],
        }
        head = {
            "model_name": kwargs["TargetModel"],
            "outputs": [
                {
                    "name": name,
                    "datatype": "FP32",
                    "shape": list(value.shape),
                    "parameters": {"binary_data_size": value.nbytes},
                }
                for name, value in out.items()
            ],
        }
        head_bytes = json.dumps(head).encode()
        return {
            "Body": io.BytesIO(head_bytes + b"".join(v.tobytes() for v in out.values())),
            "ContentType": f"{BINARY_CONTENT_TYPE};json-header-size={len(head_bytes)}",
        }


class SageMakerStandIn:
    def __init__(self, status: str = "InService") -> None:
        self.status = status

    def describe_endpoint(self, *, EndpointName: str) -> dict[str, Any]:  # noqa: N803
        return {"EndpointName": EndpointName, "EndpointStatus": self.status}


def make(runtime: Any = None, store: Any = None, sagemaker: Any = None) -> FrontDoor:
    return FrontDoor(
        runtime=runtime or AddSubRuntimeStandIn(),
        sagemaker=sagemaker or SageMakerStandIn(),
        manifest=ManifestCache(store or StoreStandIn(), "store", "models/manifest.json"),
        endpoint_name="deploy-triton",
    )


@pytest.mark.parametrize("fixture", ["infer.json", "infer_base64.json"])
def test_infer_event_round_trips_through_the_binary_protocol(fixture: str) -> None:
    runtime = AddSubRuntimeStandIn()
    response = make(runtime=runtime).handle(event(fixture))

    assert response["statusCode"] == 200, response["body"]
    assert response["headers"]["content-type"] == "application/json"
    body = json.loads(response["body"])
    assert body["model_name"] == "addsub"
    outputs = {o["name"]: o for o in body["outputs"]}
    assert outputs["OUTPUT0"] == {
        "name": "OUTPUT0",
        "datatype": "FP32",
        "shape": [1, 4],
        "data": [1.5, 2.5, 3.5, 4.5],
    }
    assert outputs["OUTPUT1"]["data"] == [0.5, 1.5, 2.5, 3.5]
    (call,) = runtime.calls
    assert call["EndpointName"] == "deploy-triton"
    assert call["TargetModel"] == TARGET
    assert call["ContentType"].startswith(BINARY_CONTENT_TYPE + ";json-header-size=")


class Counting:
    """A msgspec decoder or encoder, counting the bytes that go through it."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.sizes: list[int] = []

    def decode(self, data: Any) -> Any:
        self.sizes.append(len(data))
        return self.real.decode(data)

    def encode(self, document: Any) -> bytes:
        written: bytes = self.real.encode(document)
        self.sizes.append(len(written))
        return written


def test_the_json_path_parses_and_writes_with_msgspec(monkeypatch: pytest.MonkeyPatch) -> None:
    import msgspec

    from deploy_handlers.front_door import fast_json

    assert isinstance(fast_json.DECODER, msgspec.json.Decoder)
    assert isinstance(fast_json.ENCODER, msgspec.json.Encoder)
    loaded, dumped = Counting(fast_json.DECODER), Counting(fast_json.ENCODER)
    monkeypatch.setattr(fast_json, "DECODER", loaded)
    monkeypatch.setattr(fast_json, "ENCODER", dumped)
    request = event("infer.json")

    response = make(runtime=AddSubRuntimeStandIn()).handle(request)

    assert response["statusCode"] == 200, response["body"]
    # The request body, the endpoint's answer header; the binary header, the answer.
    assert len(request["body"]) in loaded.sizes and len(loaded.sizes) == 2
    assert len(dumped.sizes) == 2 and dumped.sizes[-1] == len(response["body"])


class EchoBinaryRuntimeStandIn:
    """Answers a binary request with its own tensor bytes as OUTPUT0, in the binary protocol."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def invoke_endpoint(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        size = int(kwargs["ContentType"].rsplit("=", 1)[1])
        tensor = kwargs["Body"][size:]
        header = json.dumps(
            {
                "model_name": TARGET,
                "outputs": [
                    {
                        "name": "OUTPUT0",
                        "datatype": "UINT8",
                        "shape": [len(tensor)],
                        "parameters": {"binary_data_size": len(tensor)},
                    }
                ],
            }
        ).encode()
        return {
            "Body": io.BytesIO(header + tensor),
            "ContentType": f"{BINARY_CONTENT_TYPE};json-header-size={len(header)}",
        }


def test_binary_tensors_pass_through_unparsed_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    from deploy_handlers.front_door import fast_json

    loaded = Counting(fast_json.DECODER)
    monkeypatch.setattr(fast_json, "DECODER", loaded)
    tensor = np.random.default_rng(7).integers(0, 256, 1 << 20, dtype=np.uint8).tobytes()
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "UINT8",
                    "shape": [len(tensor)],
                    "parameters": {"binary_data_size": len(tensor)},
                }
            ],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}],
        }
    ).encode()
    request = event("infer_base64.json")
    request["headers"]["content-type"] = f"{BINARY_CONTENT_TYPE};json-header-size={len(header)}"
    request["body"] = base64.b64encode(header + tensor).decode("ascii")
    runtime = EchoBinaryRuntimeStandIn()

    response = make(runtime=runtime).handle(request)

    assert response["statusCode"] == 200, response["body"][:300]
    (call,) = runtime.calls
    assert call["Body"] == header + tensor and call["TargetModel"] == TARGET
    assert call["ContentType"] == f"{BINARY_CONTENT_TYPE};json-header-size={len(header)}"
    answer = base64.b64decode(response["body"])
    size = int(response["headers"]["content-type"].rsplit("=", 1)[1])
    assert answer[size:] == tensor
    assert json.loads(answer[:size])["model_name"] == "addsub"
    # Only the two JSON headers were parsed, never the megabyte after them.
    assert len(loaded.sizes) == 2 and max(loaded.sizes) < 1000


def test_metadata_event_describes_the_model_from_the_manifest() -> None:
    response = make().handle(event("metadata.json"))
    assert response["statusCode"] == 200
    body = json.loads(response["body"])
    assert body["name"] == "addsub"
    assert body["platform"] == "python"
    assert body["inputs"][0] == {"name": "INPUT0", "datatype": "FP32", "shape": [-1, 4]}
    assert [o["name"] for o in body["outputs"]] == ["OUTPUT0", "OUTPUT1"]


@pytest.mark.parametrize(("status", "code"), [("InService", 200), ("Updating", 503)])
def test_ready_event_follows_the_endpoint_status(status: str, code: int) -> None:
    response = make(sagemaker=SageMakerStandIn(status)).handle(event("ready.json"))
    assert response["statusCode"] == code


def test_unknown_model_is_404_after_rereading_a_stale_manifest_once() -> None:
    store = StoreStandIn()
    now = [0.0]
    door = FrontDoor(
        runtime=AddSubRuntimeStandIn(),
        sagemaker=SageMakerStandIn(),
        manifest=ManifestCache(store, "store", "models/manifest.json", clock=lambda: now[0]),
        endpoint_name="deploy-triton",
    )
    assert door.handle(event("metadata.json"))["statusCode"] == 200
    missing = event("metadata.json")
    missing["pathParameters"] = {"model": "nope"}
    # GIVEN a manifest read 10 s ago, WHEN a model it lacks is asked for,
    now[0] = 10.0
    response = door.handle(missing)
    # THEN the manifest is read again once, and the answer is 404
    assert response["statusCode"] == 404
    assert "unknown model 'nope'" in json.loads(response["body"])["error"]
    assert store.reads == 2
    # and a second miss within a second does not read it again
    now[0] = 10.5
    assert door.handle(missing)["statusCode"] == 404
    assert store.reads == 2


def test_manifest_is_cached_between_requests() -> None:
    store = StoreStandIn()
    door = make(store=store)
    for _ in range(3):
        assert door.handle(event("metadata.json"))["statusCode"] == 200
    assert store.reads == 1


def test_unreadable_manifest_is_503() -> None:
    response = make(store=StoreStandIn({"no": "models"})).handle(event("metadata.json"))
    assert response["statusCode"] == 503


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("not json", "Expecting value"),
        ("[1, 2]", "JSON object"),
        (
            '{"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2], "data": [1]}]}',
            "holds 2",
        ),
    ],
)
def test_bad_requests_are_400_and_never_reach_the_endpoint(body: str, message: str) -> None:
    runtime = AddSubRuntimeStandIn()
    bad = event("infer.json")
    bad["body"] = body
    response = make(runtime=runtime).handle(bad)
    assert response["statusCode"] == 400
    assert message in json.loads(response["body"])["error"]
    assert runtime.calls == []


class TruncatingRuntimeStandIn(AddSubRuntimeStandIn):
    """Answers with one byte missing from the last tensor."""

    def invoke_endpoint(self, **kwargs: Any) -> dict[str, Any]:
        answer = super().invoke_endpoint(**kwargs)
        answer["Body"] = io.BytesIO(answer["Body"].read()[:-1])
        return answer


def test_unreadable_endpoint_response_is_502() -> None:
    response = make(runtime=TruncatingRuntimeStandIn()).handle(event("infer.json"))
    assert response["statusCode"] == 502
    assert "could not be read" in json.loads(response["body"])["error"]


def test_unknown_route_is_404() -> None:
    other = event("ready.json")
    other["routeKey"] = "GET /v2"
    assert make().handle(other)["statusCode"] == 404


def test_logs_are_one_json_object_per_request(capsys: pytest.CaptureFixture[str]) -> None:
    make().handle(event("infer.json"))
    line = capsys.readouterr().out.strip().splitlines()[-1]
    record = json.loads(line)
    assert record["message"] == "request"
    assert record["route"] == "POST /v2/models/{model}/infer"
    assert record["status"] == 200
    assert record["request_id"] == "Jd1kqhR5IAMEVxA="
    assert record["latency_ms"] >= 0


class _SageMakerErrors(BaseHTTPRequestHandler):
    """Answers InvokeEndpoint the way SageMaker does when the container returns 400."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        if self.path.endswith("/throttled/invocations"):
            status, error_type = 429, "ThrottlingException"
            body = {"message": "Rate exceeded"}
        else:
            status, error_type = 424, "ModelError"
            body = {
                "ErrorCode": "CLIENT_ERROR_FROM_MODEL",
                "Message": "Received client error (400) from primary",
                "OriginalMessage": json.dumps({"error": "unexpected shape for input 'INPUT0'"}),
                "OriginalStatusCode": 400,
            }
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("x-amzn-ErrorType", error_type)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def sagemaker_errors_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SageMakerErrors)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("endpoint", "status", "message"),
    [
        ("deploy-triton", 400, "unexpected shape for input 'INPUT0'"),
        ("throttled", 429, "ThrottlingException"),
    ],
)
def test_endpoint_errors_map_through_real_botocore(
    sagemaker_errors_url: str, endpoint: str, status: int, message: str
) -> None:
    runtime = boto3.client(
        "sagemaker-runtime",
        endpoint_url=sagemaker_errors_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=boto3.session.Config(retries={"max_attempts": 1}),
    )
    door = FrontDoor(
        runtime=runtime,
        sagemaker=SageMakerStandIn(),
        manifest=ManifestCache(StoreStandIn(), "store", "models/manifest.json"),
        endpoint_name=endpoint,
    )
    response = door.handle(event("infer.json"))
    assert response["statusCode"] == status
    assert message in json.loads(response["body"])["error"]


def test_lambda_entry_point_reads_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(front_door_app, "_front_door", None)
    for name in ("ENDPOINT_NAME", "MODEL_STORE_BUCKET", "MANIFEST_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(KeyError, match="MODEL_STORE_BUCKET"):
        front_door_app.handler(event("ready.json"), None)


def test_the_lambda_parses_the_manifest_with_an_exact_copy_of_the_contract_module() -> None:
    """The bundle holds deploy_handlers/ only, so it carries deploy/client/manifest.py as is."""
    root = Path(__file__).resolve().parents[2]
    canonical = (root / "deploy" / "client" / "manifest.py").read_bytes()
    copy = (root / "deploy_handlers" / "front_door" / "manifest_format.py").read_bytes()
    assert copy == canonical, "copy deploy/client/manifest.py to deploy_handlers/front_door/"


def test_a_manifest_breaking_the_contract_is_503_naming_the_field() -> None:
    broken = json.loads(json.dumps(MANIFEST))
    broken["models"]["addsub"]["inputs"][0]["datatype"] = "FLOAT"
    response = make(store=StoreStandIn(broken)).handle(event("metadata.json"))
    assert response["statusCode"] == 503
