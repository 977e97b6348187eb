"""The inf1 stage: CDK synth (assertions, cfn-lint, cdk-nag), the Neuron image
asset in the cloud assembly, and hadolint on its Dockerfile.

The image itself cannot be built here (no Docker engine); the assembly is
checked for the asset CDK would build and push.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aws_cdk")

from aws_cdk import assertions

from deploy.config import DeploySettings, load_settings
from deploy.errors import DeployError
from deploy_infra.nag import REVIEWED
from deploy_infra.synth import build_app, synthesize

pytestmark = [pytest.mark.cdk, pytest.mark.slow]
Match = assertions.Match
NEURON_DIR = Path(__file__).resolve().parents[2] / "deploy_infra" / "neuron"
BIN = Path(sys.executable).parent
CPU_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3-cpu"


@dataclass
class Inf1Stage:
    settings: DeploySettings
    outdir: Path
    paths: dict[str, Path]

    def json(self, component: str) -> dict[str, Any]:
        path = self.paths[self.settings.stack_name(component)]
        loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return loaded

    def template(self, component: str) -> assertions.Template:
        return assertions.Template.from_json(self.json(component))


@pytest.fixture(scope="session")
def inf1_stage(tmp_path_factory: pytest.TempPathFactory) -> Inf1Stage:
    config = tmp_path_factory.mktemp("inf1") / "deploy.toml"
    config.write_text(
        '[stages.inf1]\nendpoint_name = "triton-inf1"\ninstance_type = "ml.inf1.6xlarge"\n'
        'region = "us-east-1"\n\n[stages.inf1.infra]\nmax_instance_count = 2\n',
        encoding="utf-8",
    )
    settings = load_settings(stage="inf1", config_file=config)
    outdir = tmp_path_factory.mktemp("cdk-inf1")
    return Inf1Stage(settings, outdir, synthesize(settings, outdir))


def test_single_model_endpoint_runs_the_router_from_one_archive(inf1_stage: Inf1Stage) -> None:
    template = inf1_stage.template("endpoint")
    template.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "PrimaryContainer": {
                "Mode": "SingleModel",
                "Environment": {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "router"},
                "Image": {
                    "Fn::Sub": Match.string_like_regexp(r"container-assets-.*:[0-9a-f]{64}$")
                },
                "ModelDataUrl": {
                    "Fn::Join": [
                        "",
                        [
                            "s3://",
                            {"Fn::ImportValue": Match.any_value()},
                            "/models/inf1/model.tar.gz",
                        ],
                    ]
                },
            },
            "EnableNetworkIsolation": True,
            "VpcConfig": Match.object_like({"Subnets": [Match.any_value(), Match.any_value()]}),
        },
    )
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "KmsKeyId": {"Fn::ImportValue": Match.any_value()},  # inf1 volumes are EBS
            "ProductionVariants": [
                Match.object_like({"InstanceType": "ml.inf1.6xlarge", "InitialInstanceCount": 1})
            ],
        },
    )
    template.has_resource_properties("AWS::SageMaker::Endpoint", {"EndpointName": "triton-inf1"})
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {"ResourceId": "endpoint/triton-inf1/variant/AllTraffic", "MaxCapacity": 2},
    )
    assert "MultiModel" not in json.dumps(inf1_stage.json("endpoint"))
    assert "GPUUtilization" not in json.dumps(template.find_resources("AWS::CloudWatch::Alarm"))
    template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": Match.object_like(
                {
                    "Statement": Match.array_with(
                        [
                            Match.object_like(
                                {
                                    "Sid": "EndpointAlarmsPublish",
                                    "Principal": {"Service": "cloudwatch.amazonaws.com"},
                                }
                            )
                        ]
                    )
                }
            )
        },
    )
    outputs = inf1_stage.json("endpoint")["Outputs"]
    assert outputs["NeuronCores"]["Value"] == "16"
    assert outputs["BaseImageUri"]["Value"] == CPU_IMAGE
    # The HTTP API front door speaks multi-model only: not part of the inf1 stage.
    assert sorted(inf1_stage.paths) == [
        "triton-inf1-endpoint",
        "triton-inf1-model-store",
        "triton-inf1-network",
    ]


def test_execution_role_reads_the_archive_and_pulls_the_asset_image(inf1_stage: Inf1Stage) -> None:
    role = next(
        r
        for r in inf1_stage.json("endpoint")["Resources"].values()
        if r["Type"] == "AWS::IAM::Role"
        and "sagemaker.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])
    )
    statements = {
        s["Sid"]: s for s in role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    }
    assert statements["ReadModelArchive"]["Resource"]["Fn::Join"][1][-1] == (
        "/models/inf1/model.tar.gz"
    )
    pull = json.dumps(statements["PullNeuronImage"]["Resource"])
    assert "cdk-hnb659fds-container-assets-000000000000-us-east-1" in pull


def test_cloud_assembly_holds_the_neuron_image_asset(inf1_stage: Inf1Stage) -> None:
    assets = json.loads(next(inf1_stage.outdir.glob("*-endpoint.assets.json")).read_text())
    (image,) = assets["dockerImages"].values()
    assert image["source"]["dockerBuildArgs"] == {"BASE_IMAGE": CPU_IMAGE}
    assert image["source"]["platform"] == "linux/amd64"
    (destination,) = image["destinations"].values()
    assert destination["repositoryName"].startswith("cdk-hnb659fds-container-assets-")
    staged = inf1_stage.outdir / image["source"]["directory"]
    assert sorted(p.name for p in staged.iterdir()) == ["Dockerfile", "serve"]
    assert (staged / "Dockerfile").read_bytes() == (NEURON_DIR / "Dockerfile").read_bytes()
    assert os.access(staged / "serve", os.X_OK)


def test_cfn_lint_finds_no_errors(inf1_stage: Inf1Stage) -> None:
    result = subprocess.run(
        [str(BIN / "cfn-lint"), "--format", "json", *map(str, inf1_stage.paths.values())],
        capture_output=True,
        text=True,
        check=False,
    )
    findings = json.loads(result.stdout or "[]")
    errors = [f for f in findings if f["Level"] == "Error"]
    assert errors == [], json.dumps(errors, indent=1)
    assert result.returncode in (0, 4, 8, 12), result.stderr


def test_cdk_nag_has_no_unsuppressed_findings(inf1_stage: Inf1Stage) -> None:
    rows: list[dict[str, str]] = []
    reports = sorted(inf1_stage.outdir.glob("AwsSolutions-*-NagReport.csv"))
    assert len(reports) == len(inf1_stage.paths)
    for report in reports:
        with report.open(newline="", encoding="utf-8") as handle:
            rows.extend(csv.DictReader(handle))
    assert [r for r in rows if r["Compliance"] in {"Non-Compliant", "UNKNOWN"}] == []
    suppressed = [r for r in rows if r["Compliance"] == "Suppressed"]
    assert suppressed
    for row in suppressed:
        assert any(reason in row["Exception Reason"] for reason in REVIEWED.values()), row


def test_unknown_inf1_size_fails_before_synth(tmp_path: Path) -> None:
    settings = load_settings(stage="dev", instance_type="ml.inf1.48xlarge")
    with pytest.raises(DeployError, match="unknown Inferentia instance type") as raised:
        build_app(settings, outdir=tmp_path, nag=False)
    assert "ml.inf1.6xlarge" in (raised.value.fix or "")
    assert list(tmp_path.iterdir()) == []


def _hadolint(dockerfile: Path) -> list[dict[str, Any]]:
    result = subprocess.run(
        [str(BIN / "hadolint"), "--format", "json", "--no-fail", str(dockerfile)],
        capture_output=True,
        text=True,
        check=True,
    )
    findings: list[dict[str, Any]] = json.loads(result.stdout or "[]")
    return findings


def test_hadolint_passes_the_neuron_dockerfile() -> None:
    assert _hadolint(NEURON_DIR / "Dockerfile") == []


def test_hadolint_does_report_a_finding(tmp_path: Path) -> None:
    # Not vacuous: an unpinned install in the same base is a finding.
    bad = tmp_path / "Dockerfile"
    bad.write_text(
        f"FROM {CPU_IMAGE}\nRUN apt-get update && apt-get install -y curl\n", encoding="utf-8"
    )
    assert {"DL3008", "DL3009", "DL3015"} <= {f["code"] for f in _hadolint(bad)}


def _flags(arguments: list[str]) -> set[str]:
    return {argument.split("=", 1)[0] for argument in arguments if argument.startswith("--")}


def test_image_serve_script_starts_triton_like_the_local_single_model_mode(tmp_path: Path) -> None:
    from deploy.local.modes.single_model import SingleModelSupervisor
    from deploy.local.triton.install import find_triton

    serve = NEURON_DIR / "serve"
    subprocess.run(["bash", "-n", str(serve)], check=True)
    script_flags = set(re.findall(r"^\s+(--[a-z-]+)", serve.read_text(), flags=re.MULTILINE))
    supervisor = SingleModelSupervisor(tmp_path / "triton", tmp_path / "repo", "router")
    local_flags = _flags(supervisor._command(find_triton()))
    # The local run adds only what this machine needs: a private backend directory.
    assert local_flags - script_flags == {"--backend-directory"}
    assert script_flags - local_flags == set()


@pytest.mark.moto
@pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning")
@pytest.mark.filterwarnings("ignore:No Moto CloudFormation support:UserWarning")
def test_inf1_stacks_create_on_moto_cloudformation(inf1_stage: Inf1Stage, moto_server: str) -> None:
    import boto3

    def client(service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=moto_server,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    client("ssm").put_parameter(
        Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String", Overwrite=True
    )
    cloudformation = client("cloudformation")
    for name, path in inf1_stage.paths.items():
        cloudformation.create_stack(
            StackName=name, TemplateBody=path.read_text(), Capabilities=["CAPABILITY_IAM"]
        )
        stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
        assert stack["StackStatus"] == "CREATE_COMPLETE", (name, stack.get("StackStatusReason"))
    (endpoint_arn,) = [
        r["PhysicalResourceId"]
        for r in cloudformation.describe_stack_resources(StackName="triton-inf1-endpoint")[
            "StackResources"
        ]
        if r.get("ResourceType") == "AWS::SageMaker::Endpoint"
    ]
    sagemaker = client("sagemaker")
    endpoint = sagemaker.describe_endpoint(EndpointName=endpoint_arn.rsplit("/", 1)[1])
    assert endpoint["EndpointStatus"] == "InService"
    config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    (variant,) = config["ProductionVariants"]
    assert variant["InstanceType"] == "ml.inf1.6xlarge"
    container = sagemaker.describe_model(ModelName=variant["ModelName"])["PrimaryContainer"]
    assert container["Mode"] == "SingleModel"
    assert container["Environment"] == {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "router"}
    assert container["ModelDataUrl"].endswith("/models/inf1/model.tar.gz")
    assert ".dkr.ecr.us-east-1.amazonaws.com/cdk-hnb659fds-container-assets-" in container["Image"]
