"""The front door calls the endpoint as the manifest publishes (`invoke`): its
addressing and its largest request; a manifest of another major is a 503."""

from __future__ import annotations

import copy
import io
import json
from typing import Any

import pytest

from deploy_handlers.front_door.binary import BINARY_CONTENT_TYPE

from .test_handlers_front_door import MANIFEST, TARGET, StoreStandIn, event, make


class RecordingRuntime:
    """Records each call and answers an empty v2 response."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def invoke_endpoint(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        head = json.dumps({"outputs": []}).encode()
        return {
            "Body": io.BytesIO(head),
            "ContentType": f"{BINARY_CONTENT_TYPE};json-header-size={len(head)}",
        }

    def parameters(self) -> dict[str, Any]:
        (call,) = self.calls
        size = int(call["ContentType"].rsplit("=", 1)[1])
        header: dict[str, Any] = json.loads(call["Body"][:size])
        return dict(header["parameters"])


def published(addressing: str, max_request_bytes: int = 6 * 1024 * 1024) -> dict[str, Any]:
    document = copy.deepcopy(MANIFEST)
    document["format_minor"] = 1
    document["invoke"] = {"addressing": addressing, "max_request_bytes": max_request_bytes}
    return document


def test_a_target_model_endpoint_gets_the_target_model_header() -> None:
    runtime = RecordingRuntime()
    store = StoreStandIn(published("target-model-header"))
    response = make(runtime=runtime, store=store).handle(event("infer.json"))
    assert response["statusCode"] == 200, response["body"]
    assert runtime.calls[0]["TargetModel"] == TARGET
    assert "target_model" not in runtime.parameters()


def test_a_router_endpoint_gets_the_model_as_the_routers_parameter() -> None:
    runtime = RecordingRuntime()
    store = StoreStandIn(published("router-parameter"))
    response = make(runtime=runtime, store=store).handle(event("infer.json"))
    assert response["statusCode"] == 200, response["body"]
    assert "TargetModel" not in runtime.calls[0]
    assert runtime.parameters()["target_model"] == TARGET


def test_a_request_over_the_published_limit_is_413_before_the_endpoint() -> None:
    runtime = RecordingRuntime()
    store = StoreStandIn(published("target-model-header", max_request_bytes=64))
    response = make(runtime=runtime, store=store).handle(event("infer.json"))
    assert response["statusCode"] == 413
    assert "over the 64 bytes the endpoint takes" in json.loads(response["body"])["error"]
    assert runtime.calls == []


@pytest.mark.parametrize("major", [0, 2])
def test_a_manifest_of_another_major_is_503_and_logged_with_both_versions(
    major: int, capsys: pytest.CaptureFixture[str]
) -> None:
    document = published("target-model-header")
    document["format"] = major
    runtime = RecordingRuntime()
    response = make(runtime=runtime, store=StoreStandIn(document)).handle(event("infer.json"))
    assert response["statusCode"] == 503
    assert runtime.calls == []
    logged = capsys.readouterr()
    assert f"has format {major}.1; this version reads format 1.x" in logged.out + logged.err


def components(component: str | None = "deploy-triton-addsub") -> dict[str, Any]:
    """The manifest of an endpoint of inference components (format 1.2)."""
    document = published("inference-component-header")
    document["hosting"], document["format_minor"] = "components", 2
    if component is not None:
        document["models"]["addsub"]["inference_component"] = component
    return document


def test_an_endpoint_of_components_gets_the_models_inference_component_name() -> None:
    runtime = RecordingRuntime()
    response = make(runtime=runtime, store=StoreStandIn(components())).handle(event("infer.json"))
    assert response["statusCode"] == 200, response["body"]
    (call,) = runtime.calls
    assert call["InferenceComponentName"] == "deploy-triton-addsub"
    assert "TargetModel" not in call
    assert "target_model" not in runtime.parameters()


def test_botocore_sends_the_front_doors_component_call_in_the_component_header() -> None:
    """Labelled stand-in: botocore's Stubber, built from the service model, checks the
    front door's call against InvokeEndpoint's input shape (InferenceComponentName is
    its X-Amzn-SageMaker-Inference-Component header member)."""
    import boto3
    from botocore.stub import ANY, Stubber

    client = boto3.client(
        "sagemaker-runtime",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    head = json.dumps({"outputs": []}).encode()
    answer = {"Body": io.BytesIO(head), "ContentType": "application/json"}
    with Stubber(client) as stub:
        stub.add_response(
            "invoke_endpoint",
            answer,
            {
                "EndpointName": "deploy-triton",
                "InferenceComponentName": "deploy-triton-addsub",
                "ContentType": ANY,
                "Body": ANY,
            },
        )
        response = make(runtime=client, store=StoreStandIn(components())).handle(
            event("infer.json")
        )
        stub.assert_no_pending_responses()
    assert response["statusCode"] == 200, response["body"]
    member = client.meta.service_model.operation_model("InvokeEndpoint").input_shape.members[
        "InferenceComponentName"
    ]
    assert member.serialization["location"] == "header"
    assert member.serialization["name"] == "X-Amzn-SageMaker-Inference-Component"


def test_a_component_manifest_without_the_models_component_is_502_before_the_endpoint() -> None:
    runtime = RecordingRuntime()
    store = StoreStandIn(components(component=None))
    response = make(runtime=runtime, store=store).handle(event("infer.json"))
    assert response["statusCode"] == 502
    assert "names no component for 'addsub'" in json.loads(response["body"])["error"]
    assert runtime.calls == []
