"""The front door's per-model metrics: one EMF record per inference request.

API Gateway events go through the real handler (`FrontDoor.handle`); the
endpoint is a stand-in that answers like Triton's addsub model, or a local
HTTP server answering InvokeEndpoint errors as SageMaker does, called through
real botocore. Each record is checked against the EMF specification
(`tests/emf_spec.py`) and against what the request did.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest

from deploy.client import model_metrics
from deploy_handlers.front_door.app import FrontDoor
from deploy_handlers.front_door.manifest import ManifestCache
from tests.emf_spec import check_emf
from tests.unit.test_handlers_front_door import (
    TARGET,
    AddSubRuntimeStandIn,
    SageMakerStandIn,
    StoreStandIn,
    event,
    make,
)

ROOT = Path(__file__).resolve().parents[2]


def emitted(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """The EMF records among the handler's stdout lines, each checked against the spec."""
    lines = capsys.readouterr().out.strip().splitlines()
    return [check_emf(line) for line in lines if '"_aws"' in line]


def test_an_inference_request_emits_one_emf_record_under_its_logical_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    runtime = AddSubRuntimeStandIn()
    door = make(runtime=runtime)
    door.handle(event("ready.json"))  # health and metadata requests call no model:
    door.handle(event("metadata.json"))  # no metrics
    answer = door.handle(event("infer.json"))
    assert answer["statusCode"] == 200
    (record,) = emitted(capsys)
    (directive,) = record["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "Deploy/Models"
    assert directive["Dimensions"] == [
        ["Endpoint", "Model"],
        ["Endpoint", "Model", "TargetModel"],
    ]
    assert {m["Name"]: m["Unit"] for m in directive["Metrics"]} == {
        "Requests": "Count",
        "Latency": "Milliseconds",
        "ClientErrors": "Count",
        "ModelErrors": "Count",
        "Throttles": "Count",
        "RequestBytes": "Bytes",
        "ResponseBytes": "Bytes",
    }
    assert (record["Endpoint"], record["Model"], record["TargetModel"]) == (
        "deploy-triton",
        "addsub",
        TARGET,
    )
    assert record["Requests"] == 1
    assert (record["ClientErrors"], record["ModelErrors"], record["Throttles"]) == (0, 0, 0)
    assert record["RequestBytes"] == len(runtime.calls[0]["Body"])
    assert record["ResponseBytes"] > 0
    assert 0 <= record["Latency"] <= record["latency_ms"] + 1
    # The same line is the request's log line (one line per request, not two).
    assert record["message"] == "request" and record["status"] == 200


def test_a_refused_request_counts_as_a_client_error_of_its_model(
    capsys: pytest.CaptureFixture[str],
) -> None:
    runtime = AddSubRuntimeStandIn()
    bad = event("infer.json")
    bad["body"] = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32"}]})
    assert make(runtime=runtime).handle(bad)["statusCode"] == 400
    (record,) = emitted(capsys)
    assert runtime.calls == []
    assert (record["Model"], record["TargetModel"]) == ("addsub", TARGET)
    assert (record["ClientErrors"], record["ModelErrors"], record["Throttles"]) == (1, 0, 0)
    assert record["RequestBytes"] == len(bad["body"])
    assert record["ResponseBytes"] == 0


def test_an_unknown_model_is_counted_under_one_fixed_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Callers choose the names: each distinct dimension value would be a new metric."""
    unknown = event("infer.json")
    unknown["pathParameters"] = {"model": "no-such-model-7f3a"}
    assert make().handle(unknown)["statusCode"] == 404
    (record,) = emitted(capsys)
    assert (record["Model"], record["TargetModel"]) == ("(unknown)", "(none)")
    assert record["ClientErrors"] == 1


class _SageMakerErrors(BaseHTTPRequestHandler):
    """InvokeEndpoint errors as SageMaker answers them, by endpoint name."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        if "/throttled/" in self.path:
            status, error_type, body = 429, "ThrottlingException", {"message": "Rate exceeded"}
        elif "/broken/" in self.path:
            status, error_type = 424, "ModelError"
            body = {
                "Message": "Received server error (500) from primary",
                "OriginalMessage": json.dumps({"error": "Python model raised"}),
                "OriginalStatusCode": 500,
            }
        else:
            status, error_type, body = 400, "ValidationError", {"message": "Inspect your request"}
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
def errors_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SageMakerErrors)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("endpoint", "status", "counted"),
    [
        ("throttled", 429, "Throttles"),
        ("broken", 500, "ModelErrors"),
        ("refusing", 400, "ClientErrors"),
    ],
)
def test_endpoint_errors_are_counted_by_class_through_real_botocore(
    errors_url: str, endpoint: str, status: int, counted: str, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = boto3.client(
        "sagemaker-runtime",
        endpoint_url=errors_url,
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
    assert door.handle(event("infer.json"))["statusCode"] == status
    (record,) = emitted(capsys)
    assert record["Endpoint"] == endpoint
    assert {name: record[name] for name in model_metrics.ERROR_METRICS} == {
        name: int(name == counted) for name in model_metrics.ERROR_METRICS
    }


def test_the_lambda_carries_an_exact_copy_of_the_metric_names_module() -> None:
    """The bundle holds deploy_handlers/ only: the SDK's module is copied as it is."""
    canonical = (ROOT / "deploy" / "client" / "model_metrics.py").read_bytes()
    copy = (ROOT / "deploy_handlers" / "front_door" / "model_metrics.py").read_bytes()
    assert copy == canonical, "copy deploy/client/model_metrics.py to deploy_handlers/front_door/"
