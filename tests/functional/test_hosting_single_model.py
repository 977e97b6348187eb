"""`hosting = "single-model"` on a GPU instance: the router layout on the stock image.

Real CDK synth (cdk-nag, cfn-lint) and `deploy up` against the moto server:
the same stage chain as multi-model, provisioned by CloudFormation (no image
to build), the one archive uploaded under its content key and the manifest
published next to it. Smoke tests through the router are exercised on the
real tritonserver in test_lifecycle_inf1.py (same layout); here they are off.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from deploy.config import load_settings
from deploy.lifecycle.aws_provider import AwsProvider
from deploy.lifecycle.progress import SilentReporter
from deploy.lifecycle.up import UpOptions, up
from deploy_infra.nag import REVIEWED
from deploy_infra.synth import synthesize
from tests.functional.test_lifecycle_aws import aws_environment

pytestmark = [pytest.mark.cdk, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NEURON = ROOT / "model_packages" / "neuron" / "repository"
GPU_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3"


def endpoint_resources(path: Path, kind: str) -> list[dict[str, Any]]:
    template = json.loads(path.read_text(encoding="utf-8"))
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == kind]


def test_single_model_on_a_gpu_instance_synthesizes_the_router_on_the_triton_image(
    tmp_path: Path,
) -> None:
    # GIVEN a stage that picks the single-model mode on a GPU instance (deploy.toml)
    config = tmp_path / "deploy.toml"
    config.write_text(
        '[stages.router]\nendpoint_name = "triton-router"\ninstance_type = "ml.g5.xlarge"\n'
        'hosting = "single-model"\n',
        encoding="utf-8",
    )
    settings = load_settings(stage="router", config_file=config)
    outdir = tmp_path / "cdk.out"
    # WHEN the CDK app synthesizes it (with cdk-nag)
    paths = synthesize(settings, outdir)
    # THEN the stage has no HTTP API (it sends TargetModel) and the endpoint runs the router
    assert list(paths) == [
        "triton-router-model-store",
        "triton-router-network",
        "triton-router-endpoint",
    ]
    endpoint = paths["triton-router-endpoint"]
    (model,) = endpoint_resources(endpoint, "AWS::SageMaker::Model")
    container = model["PrimaryContainer"]
    assert container["Mode"] == "SingleModel"
    assert container["Image"] == GPU_IMAGE
    assert container["Environment"] == {
        "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "router",
        # The SageMaker Triton image's serve script starts Triton with its metrics.
        "SAGEMAKER_TRITON_ALLOW_METRICS": "true",
    }
    assert json.dumps(container["ModelDataUrl"]).endswith('/models/inf1/model.tar.gz"]]}')
    (config_resource,) = endpoint_resources(endpoint, "AWS::SageMaker::EndpointConfig")
    assert config_resource["ProductionVariants"][0]["InstanceType"] == "ml.g5.xlarge"
    # AND no image is built: CloudFormation alone can deploy it
    assets = json.loads((outdir / "triton-router-endpoint.assets.json").read_text())
    assert not assets.get("dockerImages")
    # AND cfn-lint and cdk-nag find nothing
    lint = subprocess.run(
        [
            str(Path(sys.executable).parent / "cfn-lint"),
            "--format",
            "json",
            *map(str, paths.values()),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    errors = [f for f in json.loads(lint.stdout or "[]") if f["Level"] == "Error"]
    assert errors == [], json.dumps(errors, indent=1)
    rows: list[dict[str, str]] = []
    for report in sorted(outdir.glob("AwsSolutions-*-NagReport.csv")):
        with report.open(newline="", encoding="utf-8") as handle:
            rows.extend(csv.DictReader(handle))
    assert rows and [r for r in rows if r["Compliance"] in {"Non-Compliant", "UNKNOWN"}] == []
    for row in (r for r in rows if r["Compliance"] == "Suppressed"):
        assert any(reason in row["Exception Reason"] for reason in REVIEWED.values()), row


@pytest.fixture(scope="module")
def aws(moto_server: str) -> Iterator[str]:
    with aws_environment(moto_server):
        yield moto_server


@pytest.mark.moto
@pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning")
@pytest.mark.filterwarnings("ignore:No Moto CloudFormation support:UserWarning")
def test_up_with_hosting_single_model_runs_the_same_chain_on_cloudformation(
    aws: str, tmp_path: Path
) -> None:
    assert (NEURON / "classifier_single" / "1" / "model.pt").is_file(), "run `make models`"
    repo = tmp_path / "repository"
    shutil.copytree(NEURON, repo, ignore=shutil.ignore_patterns("__pycache__"))
    settings = load_settings(
        stage="routergpu",
        instance_type="ml.g4dn.xlarge",  # a GPU type moto's SageMaker knows
        hosting="single-model",
        repository=repo,
        package_dir=tmp_path / "package",
        infra={"api": False, "max_instance_count": 2},
    )
    provider = AwsProvider(settings, template_cache=tmp_path / "templates", poll_s=0.05)
    # WHEN deploy up runs (no smoke: the data plane is SageMaker's)
    result = up(
        settings,
        provider,
        repository=repo,
        package_dir=settings.package_dir,
        options=UpOptions(skip_smoke=True, timeout_s=60),
        reporter=SilentReporter(),
    )
    # THEN the plan was the router layout's, every stack was created by CloudFormation
    plan = result.plan.to_dict()
    assert plan["hosting"] == "single-model" and plan["archive"]["upload"]
    assert {r["action"] for r in plan["resources"]} == {"create"}
    assert result.endpoint is not None and result.endpoint.instance_type == "ml.g4dn.xlarge"
    # AND the one archive went up under its content key, the manifest next to it, last
    key = plan["archive"]["key"]
    assert key.startswith("inf1/model-") and [u.target_model for u in result.uploads] == [key]
    location = provider.store_location()
    assert location is not None and result.published
    s3 = boto3.client("s3")
    manifest_key = f"{location.prefix}inf1/manifest.json"
    published = json.loads(s3.get_object(Bucket=location.bucket, Key=manifest_key)["Body"].read())
    assert published["hosting"] == "single-model"
    assert published["archive"]["key"] == key.removeprefix("inf1/")
    # AND the endpoint's Model reads that archive on the Triton image
    sagemaker = boto3.client("sagemaker")
    endpoint = sagemaker.describe_endpoint(EndpointName=result.endpoint.name)
    config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    (variant,) = config["ProductionVariants"]
    container = sagemaker.describe_model(ModelName=variant["ModelName"])["PrimaryContainer"]
    assert container["ModelDataUrl"] == f"s3://{location.bucket}/{location.prefix}{key}"
    assert container["Image"] == GPU_IMAGE
    # AND a second run finds nothing to do
    again = up(
        settings,
        provider,
        repository=repo,
        package_dir=settings.package_dir,
        options=UpOptions(skip_smoke=True, timeout_s=60),
        reporter=SilentReporter(),
    )
    assert again.plan.empty and again.uploads == [] and not again.published
    assert provider.down(purge=False)["removed_stacks"] == [provider.stack("endpoint")]
