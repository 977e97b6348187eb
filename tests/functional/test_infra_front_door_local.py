"""The front door Lambda against real collaborators: the local endpoint and moto S3.

The handler's code runs unchanged; boto3's sagemaker-runtime client points at
the shared local endpoint (the real tritonserver behind the SageMaker front
end), and the manifest is read from the moto server's S3, where `deploy
package` output would be uploaded.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest
import tritonclient.http as triton_http

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


# -- Triton's binary protocol, passed through ------------------------------------------

BINARY = "application/vnd.sagemaker-triton.binary+json"


def _binary_event(model: str, body: bytes, content_type: str) -> dict[str, Any]:
    """An HTTP API event for a binary body: API Gateway hands it over base64."""
    event = _event("infer.json", model)
    event["headers"] = {**event["headers"], "content-type": content_type}
    event["body"] = base64.b64encode(body).decode("ascii")
    event["isBase64Encoded"] = True
    return event


def _addsub_request(*, binary_outputs: bool = True) -> tuple[bytes, int, np.ndarray, np.ndarray]:
    """An addsub request as tritonclient builds it (what SageMaker's Triton clients send)."""
    a = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    b = np.full((1, 4), 0.25, dtype=np.float32)
    inputs = []
    for name, value in (("INPUT0", a), ("INPUT1", b)):
        tensor = triton_http.InferInput(name, list(value.shape), "FP32")
        tensor.set_data_from_numpy(value, binary_data=True)
        inputs.append(tensor)
    outputs = [
        triton_http.InferRequestedOutput(name, binary_data=binary_outputs)
        for name in ("OUTPUT0", "OUTPUT1")
    ]
    body, header_size = triton_http.InferenceServerClient.generate_request_body(
        inputs, outputs=outputs, request_id="binary-1"
    )
    return body, header_size, a, b


def _binary_answer(response: dict[str, Any]) -> tuple[int, Any]:
    """(json-header-size, tritonclient's InferResult) of a binary answer, its headers checked."""
    assert response["statusCode"] == 200, response["body"][:500]
    assert response["isBase64Encoded"] is True
    media_type, _, parameter = response["headers"]["content-type"].partition(";")
    assert media_type == BINARY and parameter.startswith("json-header-size=")
    size = int(parameter.removeprefix("json-header-size="))
    body = base64.b64decode(response["body"], validate=True)
    assert 0 < size <= len(body)
    return size, triton_http.InferResult.from_response_body(body, header_length=size)


def test_binary_request_from_tritonclient_passes_through_real_triton(
    front_door: FrontDoor,
) -> None:
    body, header_size, a, b = _addsub_request()

    size, result = _binary_answer(
        front_door.handle(_binary_event("addsub", body, f"{BINARY};json-header-size={header_size}"))
    )

    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    header = result.get_response()
    assert header["model_name"] == "addsub" and header["id"] == "binary-1"
    # The tensors came back as raw bytes after the header, not as JSON data.
    assert all("data" not in output for output in header["outputs"])
    assert size == len(json.dumps(header, separators=(",", ":")).encode())


def test_binary_bytes_tensors_pass_through_real_triton(front_door: FrontDoor) -> None:
    words = np.array(["triton", "sagemaker", "héllo", ""], dtype=np.object_)
    tensor = triton_http.InferInput("TEXT", [4], "BYTES")
    tensor.set_data_from_numpy(words, binary_data=True)
    body, header_size = triton_http.InferenceServerClient.generate_request_body(
        [tensor], outputs=[triton_http.InferRequestedOutput("UPPER", binary_data=True)]
    )

    _, result = _binary_answer(
        front_door.handle(
            _binary_event("strings", body, f"{BINARY}; json-header-size={header_size}")
        )
    )

    upper = [w.decode("utf-8") for w in result.as_numpy("UPPER").ravel()]
    assert upper == [w.upper() for w in words]


def test_binary_request_asking_json_outputs_gets_a_json_answer(front_door: FrontDoor) -> None:
    body, header_size, a, b = _addsub_request(binary_outputs=False)

    response = front_door.handle(
        _binary_event("addsub", body, f"{BINARY};json-header-size={header_size}")
    )

    assert response["statusCode"] == 200, response["body"][:500]
    assert response["headers"]["content-type"] == "application/json"
    assert response["isBase64Encoded"] is False
    answer = json.loads(response["body"])
    assert answer["model_name"] == "addsub"
    outputs = {o["name"]: o["data"] for o in answer["outputs"]}
    assert outputs["OUTPUT0"] == (a + b).ravel().tolist()


def test_triton_refusing_a_binary_request_answers_its_400(front_door: FrontDoor) -> None:
    # Sizes that add up, but a shape the model does not take: Triton itself says no.
    three = np.array([[1.0, 2.0, 3.0]], dtype=np.float32)
    inputs = []
    for name in ("INPUT0", "INPUT1"):
        tensor = triton_http.InferInput(name, [1, 3], "FP32")
        tensor.set_data_from_numpy(three, binary_data=True)
        inputs.append(tensor)
    body, header_size = triton_http.InferenceServerClient.generate_request_body(inputs)

    status, answer = _call(
        front_door, _binary_event("addsub", body, f"{BINARY};json-header-size={header_size}")
    )

    assert status == 400, answer
    assert "unexpected shape for input" in answer["error"]


def _hostile(body: bytes, header_size: int) -> list[Any]:
    header = json.loads(body[:header_size])
    header["inputs"][0]["parameters"]["binary_data_size"] += 4
    grown = json.dumps(header).encode()
    return [
        pytest.param("0", body, "json-header-size=0", id="zero"),
        pytest.param("-16", body, "is not a byte count", id="negative"),
        pytest.param("0x40", body, "is not a byte count", id="hex"),
        pytest.param("1e2", body, "is not a byte count", id="exponent"),
        pytest.param("9" * 4400, body, "is not a byte count", id="4400-digits"),
        pytest.param("", body, "is not a byte count", id="empty"),
        pytest.param(None, body, "needs ;json-header-size=N", id="absent"),
        pytest.param(str(len(body) + 1), body, "longer than the request body", id="past-end"),
        pytest.param(str(2**33), body, "longer than the request body", id="8-gigabytes"),
        pytest.param(str(header_size - 1), body, "JSON header is not valid JSON", id="cut"),
        pytest.param(str(len(grown)), grown + body[header_size:], "add up to", id="sizes-past-end"),
    ]


_BODY, _HEADER_SIZE, _, _ = _addsub_request()


@pytest.mark.parametrize(("header_size", "body", "message"), _hostile(_BODY, _HEADER_SIZE))
def test_hostile_binary_header_sizes_are_refused_with_400(
    front_door: FrontDoor, header_size: str | None, body: bytes, message: str
) -> None:
    content_type = BINARY if header_size is None else f"{BINARY};json-header-size={header_size}"

    status, answer = _call(front_door, _binary_event("addsub", body, content_type))

    assert status == 400, answer
    assert message in answer["error"], answer
    assert len(answer["error"]) < 400  # a 4,400-digit size is not echoed back whole


# -- per-model metrics ------------------------------------------------------------------


def test_each_call_through_real_triton_is_one_emf_record_of_its_model(
    front_door: FrontDoor, local_endpoint: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.emf_spec import check_emf

    target = json.loads((local_endpoint.store_dir / "manifest.json").read_text())["models"][
        "addsub"
    ]["target_model"]
    capsys.readouterr()
    ok = _event("infer.json", "addsub")
    bad = _event(
        "infer.json",
        "addsub",
        {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]},
    )
    assert _call(front_door, ok)[0] == 200
    assert _call(front_door, bad)[0] == 400  # Triton refuses it: a ModelError from SageMaker
    lines = [line for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    first, second = (check_emf(line) for line in lines)
    for record in (first, second):
        assert (record["Endpoint"], record["Model"], record["TargetModel"]) == (
            local_endpoint.endpoint_name,
            "addsub",
            target,
        )
        assert record["Requests"] == 1 and record["RequestBytes"] > 0
    assert (first["ClientErrors"], first["ModelErrors"], first["Throttles"]) == (0, 0, 0)
    assert first["ResponseBytes"] > 32  # a JSON header and two 16-byte FP32 outputs
    assert (second["ClientErrors"], second["ModelErrors"]) == (0, 1)
