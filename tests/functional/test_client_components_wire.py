"""The SDK addresses an endpoint of inference components as botocore does.

With a manifest whose `invoke.addressing` is the inference-component header, a
call names the model's component in X-Amzn-SageMaker-Inference-Component and
sends no TargetModel, on the direct transport (signed) and through boto3 alike:
the same headers and the same SigV4 signature (the signing clock is frozen). The
async client sends the same header (unsigned, to the local endpoint).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deploy.client import AsyncEndpoint, Endpoint, ModelNotFoundError
from tests.functional.test_client_direct import INPUTS, ONCE, Server, server

__all__ = ["server"]  # the fixture, shared with test_client_direct

COMPONENT = "my-ep-m"


def components_manifest(path: Path) -> Path:
    document: dict[str, Any] = {
        "format": 1,
        "format_minor": 2,
        "hosting": "components",
        "models": {
            "m": {
                "name": "m",
                "target_model": "m-0123.tar.gz",
                "inference_component": COMPONENT,
                "max_batch_size": 0,
                "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}],
                "outputs": [],
            }
        },
        "invoke": {"addressing": "inference-component-header", "max_request_bytes": 6291456},
    }
    path.write_text(json.dumps(document))
    return path


def test_direct_and_boto3_send_the_component_header_and_sign_it_alike(
    server: Server, tmp_path: Path
) -> None:
    manifest = components_manifest(tmp_path / "manifest.json")
    for transport in ("direct", "boto3"):
        with Endpoint(
            "my-ep",
            endpoint_url=server.url,
            manifest=manifest,
            retries=ONCE,
            transport=transport,
        ) as ep:
            result = ep.infer("m", INPUTS)
            np.testing.assert_array_equal(result["OUTPUT0"], [0, 2, 4, 6])
            assert result.target_model is None
    direct, boto = server.seen
    for seen in (direct, boto):
        assert seen["x-amzn-sagemaker-inference-component"] == COMPONENT
        assert "x-amzn-sagemaker-target-model" not in seen
    assert "amz-sdk-invocation-id" in boto and "amz-sdk-invocation-id" not in direct
    for name in ("content-type", "content-length", "x-amz-date", "authorization"):
        assert direct[name] == boto[name], name
    assert "x-amzn-sagemaker-inference-component" in direct["authorization"]


def test_an_unsigned_direct_call_and_the_async_client_send_the_component_header(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    manifest = components_manifest(tmp_path / "manifest.json")
    with Endpoint("my-ep", endpoint_url=server.url, manifest=manifest, retries=ONCE) as ep:
        ep.infer("m", INPUTS)
        ep.infer("m", INPUTS)  # the second call reuses the head built for the component

    async def call() -> None:
        async with AsyncEndpoint(
            "my-ep", endpoint_url=server.url, manifest=manifest, retries=ONCE
        ) as endpoint:
            await endpoint.infer("m", INPUTS)

    asyncio.run(call())
    assert len(server.seen) == 3
    for seen in server.seen:
        assert seen["x-amzn-sagemaker-inference-component"] == COMPONENT
        assert "x-amzn-sagemaker-target-model" not in seen
        assert "authorization" not in seen


def test_a_target_model_other_than_the_components_is_refused_before_any_call(
    server: Server, tmp_path: Path
) -> None:
    manifest = components_manifest(tmp_path / "manifest.json")
    with Endpoint("my-ep", endpoint_url=server.url, manifest=manifest, retries=ONCE) as ep:
        ep.infer("m", INPUTS, target_model="m-0123.tar.gz")  # its own archive: the component
        with pytest.raises(ModelNotFoundError, match=r"serves 'm-0123\.tar\.gz' only"):
            ep.infer("m", INPUTS, target_model="m-4567.tar.gz")
        with pytest.raises(ModelNotFoundError, match="known models: m"):
            ep.infer("nosuch", INPUTS)
    assert len(server.seen) == 1
    assert server.seen[0]["x-amzn-sagemaker-inference-component"] == COMPONENT
