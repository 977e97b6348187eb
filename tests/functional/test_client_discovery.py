"""Manifest discovery against the moto server: the endpoint leads to its model data URL.

DescribeEndpoint → DescribeEndpointConfig → DescribeModel → ModelDataUrl,
then `manifest.json` next to the archives on S3, all through real boto3.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import boto3
import pytest
from moto.server import ThreadedMotoServer

from deploy.client import Endpoint, ManifestError, ModelNotFoundError

pytestmark = pytest.mark.moto

ECR = "763104351884.dkr.ecr.us-east-1.amazonaws.com"
MANIFEST = {
    "format": 1,
    "hosting": "multi-model",
    "models": {
        "addsub": {
            "name": "addsub",
            "target_model": "addsub-1f3c5a7e9b2d4c6a.tar.gz",
            "max_batch_size": 8,
            "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}],
            "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [4]}],
        }
    },
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def aws(moto_url: str, monkeypatch: pytest.MonkeyPatch) -> boto3.Session:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    return boto3.Session(region_name="us-east-1")


def publish(session: boto3.Session, endpoint: str, bucket: str) -> None:
    s3 = session.client("s3")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="store/manifest.json", Body=json.dumps(MANIFEST).encode())
    sagemaker = session.client("sagemaker")
    sagemaker.create_model(
        ModelName=f"{endpoint}-model",
        ExecutionRoleArn="arn:aws:iam::123456789012:role/sagemaker",
        PrimaryContainer={
            "Image": f"{ECR}/sagemaker-tritonserver:24.09-py3",
            "Mode": "MultiModel",
            "ModelDataUrl": f"s3://{bucket}/store/",
        },
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=f"{endpoint}-config",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": f"{endpoint}-model",
                "InitialInstanceCount": 1,
                "InstanceType": "ml.g4dn.xlarge",
            }
        ],
    )
    sagemaker.create_endpoint(EndpointName=endpoint, EndpointConfigName=f"{endpoint}-config")


def test_manifest_is_discovered_from_the_endpoint(aws: boto3.Session) -> None:
    publish(aws, "discovered", "store-bucket-1")
    with Endpoint("discovered", session=aws) as endpoint:
        info = endpoint.model_info("addsub")
    assert info is not None
    assert info.target_model == "addsub-1f3c5a7e9b2d4c6a.tar.gz"
    assert info.max_batch_size == 8


def test_manifest_from_an_s3_url(aws: boto3.Session) -> None:
    publish(aws, "by-url", "store-bucket-2")
    url = "s3://store-bucket-2/store/manifest.json"
    with Endpoint("anything", session=aws, manifest=url) as endpoint:
        info = endpoint.model_info("addsub-1f3c5a7e9b2d4c6a.tar.gz")
    assert info is not None and info.name == "addsub"
    with (
        Endpoint("anything", session=aws, manifest="s3://store-bucket-2/none.json") as endpoint,
        pytest.raises(ManifestError, match=r"s3://store-bucket-2/none\.json: cannot be read"),
    ):
        endpoint.model_info("addsub")


def test_failed_discovery_asks_for_manifest_or_target_model(aws: boto3.Session) -> None:
    with Endpoint("no-such-endpoint", session=aws) as endpoint:
        assert endpoint.model_info("addsub") is None
        with pytest.raises(ModelNotFoundError) as caught:
            endpoint.infer("addsub", {})
    message = str(caught.value)
    assert "no-such-endpoint" in message
    assert "pass manifest=" in message and "target_model=" in message
