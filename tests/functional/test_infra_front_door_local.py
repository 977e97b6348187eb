"""The front door Lambda against real collaborators: the local endpoint and moto S3.

The handler's code runs unchanged; boto3's sagemaker-runtime client points at
the shared local endpoint (the real tritonserver behind the SageMaker front
end), and the manifest is read from the moto server's S3, where `deploy
package` output would be uploaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest

from deploy_handlers.front_door.app import FrontDoor
from deploy_handlers.front_door.manifest import ManifestCache

pytestmark = [pytest.mark.triton, pytest.mark.moto, pytest.mark.slow]

EVENTS = Path(__file__).resolve().parents[1] / "events"
BUCKET = "front-door-local-store"
MANIFEST_KEY = "models/manifest.json"


def _client(service: str, url: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


@pytest.fixture(scope="module")
def front_door(local_endpoint: Any, moto_server: str) -> FrontDoor:
    if not local_endpoint.manifest:
        pytest.skip("packaging is not available in this checkout: the store has no manifest")
    s3 = _client("s3", moto_server)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(
        Bucket=BUCKET,
        Key=MANIFEST_KEY,
        Body=(local_endpoint.store_dir / "manifest.json").read_bytes(),
    )
    return FrontDoor(
        runtime=_client("sagemaker-runtime", local_endpoint.url),
        sagemaker=_client("sagemaker", moto_server),
        manifest=ManifestCache(s3, BUCKET, MANIFEST_KEY),
        endpoint_name=local_endpoint.endpoint_name,
    )


def _event(name: str, model: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    event["pathParameters"] = {"model": model}
    if body is not None:
        event["body"] = json.dumps(body)
        event["isBase64Encoded"] = False
    return event


def _call(front_door: FrontDoor, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = front_door.handle(event)
    return response["statusCode"], json.loads(response["body"])


def test_addsub_fixture_event_through_real_triton(front_door: FrontDoor) -> None:
    status, body = _call(front_door, _event("infer.json", "addsub"))
    assert status == 200, body
    outputs = {o["name"]: o for o in body["outputs"]}
    a = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    b = np.full((1, 4), 0.5, dtype=np.float32)
    assert outputs["OUTPUT0"]["shape"] == [1, 4]
    assert outputs["OUTPUT0"]["data"] == (a + b).ravel().tolist()
    assert outputs["OUTPUT1"]["data"] == (a - b).ravel().tolist()
    assert body["model_name"] == "addsub"


def test_strings_model_round_trips_bytes_tensors(front_door: FrontDoor) -> None:
    words = ["triton", "sagemaker", "héllo", ""]
    status, body = _call(
        front_door,
        _event(
            "infer.json",
            "strings",
            {"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [4], "data": words}]},
        ),
    )
    assert status == 200, body
    outputs = {o["name"]: o for o in body["outputs"]}
    assert outputs["UPPER"]["data"] == [w.upper() for w in words]
    assert outputs["LENGTHS"]["datatype"] == "INT32"
    assert len(outputs["LENGTHS"]["data"]) == 4


def test_uint8_batch_without_requested_outputs(front_door: FrontDoor) -> None:
    image = (np.arange(2 * 32 * 32 * 3) % 256).astype(np.uint8).reshape(2, 32, 32, 3)
    status, body = _call(
        front_door,
        _event(
            "infer.json",
            "preprocess",
            {
                "inputs": [
                    {
                        "name": "IMAGE",
                        "datatype": "UINT8",
                        "shape": list(image.shape),
                        "data": image.tolist(),
                    }
                ]
            },
        ),
    )
    assert status == 200, body
    (pixels,) = body["outputs"]
    assert pixels["name"] == "PIXELS"
    assert pixels["shape"] == [2, 3, 32, 32]
    assert len(pixels["data"]) == 2 * 3 * 32 * 32


def test_metadata_comes_from_the_manifest_in_s3(front_door: FrontDoor) -> None:
    status, body = _call(front_door, _event("metadata.json", "addsub"))
    assert status == 200
    assert body["inputs"][0] == {"name": "INPUT0", "datatype": "FP32", "shape": [-1, 4]}


def test_triton_shape_error_comes_back_as_400(front_door: FrontDoor) -> None:
    status, body = _call(
        front_door,
        _event(
            "infer.json",
            "addsub",
            {
                "inputs": [
                    {"name": "INPUT0", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]},
                    {"name": "INPUT1", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]},
                ]
            },
        ),
    )
    assert status == 400, body
    assert "unexpected shape for input" in body["error"]


def test_readiness_is_503_where_no_sagemaker_endpoint_exists(front_door: FrontDoor) -> None:
    # moto's SageMaker has no endpoint named like the local one: DescribeEndpoint fails.
    status, body = _call(front_door, _event("ready.json", "addsub"))
    assert status == 503
    assert "cannot be described" in body["error"]
