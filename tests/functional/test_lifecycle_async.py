"""`deploy up --hosting async`: the stage chain for an asynchronous endpoint on the moto server.

Real CDK synth and CloudFormation on moto for the control plane; for the smoke
stage, a local asynchronous endpoint (real tritonserver, the router) reading
and writing the stage's own S3 prefixes on moto, as the SageMaker endpoint
would (moto's InvokeEndpointAsync runs no model).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import boto3
import numpy as np
import pytest

from deploy.async_inference import stage_locations
from deploy.config import load_settings
from deploy.lifecycle.aws_provider import AwsProvider
from deploy.lifecycle.progress import SilentReporter
from deploy.lifecycle.up import UpOptions, up
from tests.functional.test_lifecycle_aws import aws_environment

pytestmark = [
    pytest.mark.moto,
    pytest.mark.cdk,
    pytest.mark.triton,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning"),
    pytest.mark.filterwarnings("ignore:No Moto CloudFormation support:UserWarning"),
]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "async_repo"
EXAMPLES = Path(__file__).resolve().parents[2] / "model_packages" / "examples"
BUCKET = "deploy-async-up-store"
ENDPOINT = "triton-async-up"


@pytest.fixture(scope="module")
def aws(moto_server: str) -> Iterator[str]:
    with aws_environment(moto_server):
        yield moto_server


def test_up_provisions_smokes_through_s3_and_publishes_the_prefixes(
    aws: str, tmp_path: Path
) -> None:
    from deploy.local.modes.async_endpoint import AsyncLocalEndpoint
    from deploy.local.modes.endpoint import EndpointOptions

    repo = tmp_path / "repository"
    shutil.copytree(FIXTURES / "bytestats", repo / "bytestats")
    shutil.copytree(EXAMPLES / "strings", repo / "strings")
    settings = load_settings(
        stage="asyncup",
        endpoint_name=ENDPOINT,
        instance_type="ml.m5.xlarge",
        hosting="async",
        repository=repo,
        package_dir=tmp_path / "package",
        infra={"model_bucket_name": BUCKET, "min_instance_count": 0, "max_instance_count": 2},
    )
    locations = stage_locations(BUCKET, ENDPOINT)
    # GIVEN a local asynchronous endpoint on the stage's S3 prefixes as the data plane
    data_plane = AsyncLocalEndpoint(
        repo, locations=locations, options=EndpointOptions(endpoint_name="async-data-plane")
    ).start()
    try:
        provider = AwsProvider(
            settings,
            template_cache=tmp_path / "templates",
            poll_s=0.05,
            smoke_endpoint_url=data_plane.url,
            smoke_endpoint_name="async-data-plane",
        )
        # WHEN deploy up runs the chain for hosting async
        result = up(
            settings,
            provider,
            repository=repo,
            package_dir=settings.package_dir,
            options=UpOptions(timeout_s=60),
            reporter=SilentReporter(),
        )
    finally:
        data_plane.stop()

    # THEN the archive went up under async/, and every model answered through S3
    (upload,) = result.uploads
    assert upload.target_model.startswith("async/model-")
    assert sorted((s.name, s.ok) for s in result.smoke) == [
        ("bytestats", True),
        ("strings", True),
    ]
    assert data_plane.invocations.completed == 2
    # AND the published manifest says async and names the stage's S3 prefixes
    s3 = boto3.client("s3")
    published = json.loads(
        s3.get_object(Bucket=BUCKET, Key="models/async/manifest.json")["Body"].read()
    )
    assert result.published and published["hosting"] == "async"
    assert published["async_inference"] == {
        "input_prefix": f"s3://{BUCKET}/async/{ENDPOINT}/input/",
        "output_prefix": f"s3://{BUCKET}/async/{ENDPOINT}/output/",
        "failure_prefix": f"s3://{BUCKET}/async/{ENDPOINT}/failure/",
    }
    # AND the endpoint is asynchronous, writing where the manifest says, scaling to zero
    sagemaker = boto3.client("sagemaker")
    endpoint = sagemaker.describe_endpoint(EndpointName=result.endpoint.name)  # type: ignore[union-attr]
    config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    output = config["AsyncInferenceConfig"]["OutputConfig"]
    assert output["S3OutputPath"] == published["async_inference"]["output_prefix"]
    assert output["S3FailurePath"] == published["async_inference"]["failure_prefix"]
    (variant,) = config["ProductionVariants"]
    model = sagemaker.describe_model(ModelName=variant["ModelName"])["PrimaryContainer"]
    assert model["Mode"] == "SingleModel"
    assert model["ModelDataUrl"] == f"s3://{BUCKET}/models/{upload.target_model}"
    # AND a client with only the published manifest reaches the models through S3
    from deploy.client import Endpoint

    manifest = tmp_path / "published.json"
    manifest.write_bytes(json.dumps(published).encode())
    again = AsyncLocalEndpoint(
        repo, locations=locations, options=EndpointOptions(endpoint_name="async-data-plane")
    ).start()
    try:
        with Endpoint("async-data-plane", endpoint_url=again.url, manifest=manifest) as client:
            answer = client.infer("strings", {"TEXT": np.array([b"up"], dtype=object)})
    finally:
        again.stop()
    assert answer["UPPER"].tolist() == [b"UP"]
