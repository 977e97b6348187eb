"""`deploy up` for a multi-model stage with `async_lane = true`, on the moto server.

Real packaging, CDK synth and CloudFormation on moto. The smoke stage is left
out: moto's endpoints run no model (tests/functional/test_lifecycle_aws.py
does the same for multi-model stages).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import boto3
import numpy as np
import pytest

from deploy.client import Manifest
from deploy.client._core import DEFAULT_MAX_PAYLOAD, prepare, route
from deploy.config import load_settings
from deploy.lifecycle.aws_provider import AwsProvider
from deploy.lifecycle.progress import SilentReporter
from deploy.lifecycle.up import UpOptions, up
from tests.functional.test_lifecycle_aws import aws_environment

pytestmark = [
    pytest.mark.moto,
    pytest.mark.cdk,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning"),
    pytest.mark.filterwarnings("ignore:No Moto CloudFormation support:UserWarning"),
]

EXAMPLES = Path(__file__).resolve().parents[2] / "model_packages" / "examples"
BUCKET = "deploy-lane-up-store"
ENDPOINT = "triton-lane-up"
LANE = f"{ENDPOINT}-async"


@pytest.fixture(scope="module")
def aws(moto_server: str) -> Iterator[str]:
    with aws_environment(moto_server):
        yield moto_server


def test_up_provisions_the_lane_and_publishes_it_in_the_manifest(aws: str, tmp_path: Path) -> None:
    repo = tmp_path / "repository"
    shutil.copytree(EXAMPLES / "strings", repo / "strings")
    settings = load_settings(
        stage="laneup",
        endpoint_name=ENDPOINT,
        instance_type="ml.m5.xlarge",
        async_lane=True,
        repository=repo,
        package_dir=tmp_path / "package",
        infra={"model_bucket_name": BUCKET, "api": False},
    )

    def deploy() -> object:
        provider = AwsProvider(settings, template_cache=tmp_path / "templates", poll_s=0.05)
        return up(
            settings,
            provider,
            repository=repo,
            package_dir=settings.package_dir,
            options=UpOptions(skip_smoke=True, timeout_s=60),
            reporter=SilentReporter(),
        )

    # WHEN deploy up runs for a multi-model stage with an async lane
    result = deploy()

    # THEN both layouts went up: the model's own archive and the lane's router archive
    keys = sorted(upload.target_model for upload in result.uploads)  # type: ignore[attr-defined]
    assert len(keys) == 2
    (lane_archive,) = [key for key in keys if key.startswith("async/model-")]
    assert any(key.startswith("strings-") for key in keys)
    # AND both stacks exist: the multi-model endpoint and the asynchronous lane
    cloudformation = boto3.client("cloudformation")
    stacks = {s["StackName"] for s in cloudformation.list_stacks()["StackSummaries"]}
    assert {settings.stack_name("endpoint"), settings.stack_name("async-lane")} <= stacks
    # AND the published multi-model manifest names the lane and its S3 prefixes
    s3 = boto3.client("s3")
    published = json.loads(s3.get_object(Bucket=BUCKET, Key="models/manifest.json")["Body"].read())
    assert published["hosting"] == "multi-model"
    assert published["async_lane"] == {
        "endpoint_name": LANE,
        "input_prefix": f"s3://{BUCKET}/async/{LANE}/input/",
        "output_prefix": f"s3://{BUCKET}/async/{LANE}/output/",
        "failure_prefix": f"s3://{BUCKET}/async/{LANE}/failure/",
        "archive": lane_archive,
    }
    # AND the lane is an asynchronous endpoint writing where the manifest says, on the
    # router archive
    sagemaker = boto3.client("sagemaker")
    (lane_id,) = [
        resource["PhysicalResourceId"]
        for resource in cloudformation.list_stack_resources(
            StackName=settings.stack_name("async-lane")
        )["StackResourceSummaries"]
        if resource["ResourceType"] == "AWS::SageMaker::Endpoint"
    ]
    # (moto names the endpoint itself; the template asks SageMaker for the manifest's name)
    template = cloudformation.get_template(StackName=settings.stack_name("async-lane"))
    body = template["TemplateBody"]
    body = body if isinstance(body, dict) else json.loads(body)
    names = [
        resource["Properties"]["EndpointName"]
        for resource in body["Resources"].values()
        if resource["Type"] == "AWS::SageMaker::Endpoint"
    ]
    assert names == [LANE]
    endpoint = sagemaker.describe_endpoint(EndpointName=lane_id.rsplit("/", 1)[-1])
    config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    output = config["AsyncInferenceConfig"]["OutputConfig"]
    assert output["S3OutputPath"] == published["async_lane"]["output_prefix"]
    assert output["S3FailurePath"] == published["async_lane"]["failure_prefix"]
    (variant,) = config["ProductionVariants"]
    model = sagemaker.describe_model(ModelName=variant["ModelName"])["PrimaryContainer"]
    assert model["Mode"] == "SingleModel"
    assert model["ModelDataUrl"] == f"s3://{BUCKET}/models/{lane_archive}"
    # AND the multi-model endpoint is the stage's own
    assert result.endpoint.name  # type: ignore[attr-defined]
    mme = sagemaker.describe_endpoint(EndpointName=result.endpoint.name)  # type: ignore[attr-defined]
    mme_config = sagemaker.describe_endpoint_config(EndpointConfigName=mme["EndpointConfigName"])
    assert not mme_config.get("AsyncInferenceConfig")  # moto lists it empty

    # WHEN it runs again with nothing changed THEN nothing is uploaded or published
    again = deploy()
    assert again.uploads == [] and not again.published  # type: ignore[attr-defined]
    assert again.plan.archive.previous_key == lane_archive  # type: ignore[attr-defined]

    # AND the SDK with the published manifest sends a 7 MB request to the lane and
    # a 1 MB one to the real-time endpoint
    manifest = Manifest.parse(published, "published manifest")

    def prepared(size: int) -> object:
        inputs = {"TEXT": np.array([b"x" * size], dtype=object)}
        chosen = route("strings", None, manifest, None)
        return prepare(
            chosen,
            inputs,
            None,
            class_count=None,
            parameters=None,
            max_payload_bytes=None,
            endpoint=ENDPOINT,
            manifest=manifest,
        )

    large = prepared(DEFAULT_MAX_PAYLOAD + 1024**2)
    lane = large.route.asynchronous  # type: ignore[attr-defined]
    assert lane is not None and lane.endpoint == LANE
    assert lane.locations.input_prefix == published["async_lane"]["input_prefix"]
    small = prepared(1024**2)
    assert small.route.asynchronous is None  # type: ignore[attr-defined]
    assert small.route.target_model == published["models"]["strings"]["target_model"]  # type: ignore[attr-defined]
