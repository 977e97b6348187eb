"""The serverless endpoint stack: assertions, cfn-lint, cdk-nag and moto's CloudFormation.

The stage is the model store plus the serverless endpoint (no network stack:
serverless endpoints take no VPC), synthesized once per session.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_cdk import assertions

from deploy.config import DeploySettings, load_settings
from deploy.errors import DeployError
from deploy_infra.nag import REVIEWED
from deploy_infra.synth import synthesize

pytestmark = [pytest.mark.cdk, pytest.mark.slow]
Match = assertions.Match
CPU_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3-cpu"
DEPLOY_TOML = """
[stages.sls]
hosting = "serverless"
endpoint_name = "triton-sls"
instance_type = "ml.m5.xlarge"
region = "us-east-1"

[stages.sls.infra]
serverless_memory_mb = 3072
serverless_max_concurrency = 8
serverless_provisioned_concurrency = 2
model_archive = "serverless/model-0123456789abcdef.tar.gz"

[stages.ondemand]
endpoint_name = "triton-ondemand"
instance_type = "ml.c5.large"
region = "us-east-1"
"""


@dataclass
class Stage:
    settings: DeploySettings
    outdir: Path
    paths: dict[str, Path]  # stack name → template, deploy order

    def json(self, component: str) -> dict[str, Any]:
        path = self.paths[self.settings.stack_name(component)]
        loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return loaded

    def template(self, component: str) -> assertions.Template:
        return assertions.Template.from_json(self.json(component))


def synth_serverless(settings: DeploySettings, outdir: Path) -> dict[str, Path]:
    """The stage as the CDK app composes it (`-c hosting=serverless`), nag on."""
    return synthesize(settings.model_copy(update={"hosting": "serverless"}), outdir)


def _stage(name: str, tmp: pytest.TempPathFactory) -> Stage:
    config = tmp.mktemp("serverless") / "deploy.toml"
    config.write_text(DEPLOY_TOML, encoding="utf-8")
    settings = load_settings(stage=name, config_file=config)
    outdir = tmp.mktemp(f"cdk-{name}")
    return Stage(settings, outdir, synth_serverless(settings, outdir))


@pytest.fixture(scope="session")
def sls_stage(tmp_path_factory: pytest.TempPathFactory) -> Stage:
    return _stage("sls", tmp_path_factory)


@pytest.fixture(scope="session")
def ondemand_stage(tmp_path_factory: pytest.TempPathFactory) -> Stage:
    return _stage("ondemand", tmp_path_factory)


@pytest.fixture(scope="session", params=["sls", "ondemand"])
def stage(request: pytest.FixtureRequest) -> Stage:
    return request.getfixturevalue(f"{request.param}_stage")  # type: ignore[no-any-return]


# --- the endpoint -------------------------------------------------------------------


def test_variant_is_serverless_with_the_configured_capacity(sls_stage: Stage) -> None:
    template = sls_stage.template("endpoint")
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                {
                    "VariantName": "AllTraffic",
                    "ModelName": Match.any_value(),
                    "ServerlessConfig": {
                        "MemorySizeInMB": 3072,
                        "MaxConcurrency": 8,
                        "ProvisionedConcurrency": 2,
                    },
                }
            ],
        },
    )
    config = next(iter(template.find_resources("AWS::SageMaker::EndpointConfig").values()))
    variant = config["Properties"]["ProductionVariants"][0]
    # No instances to size, no volume to encrypt, nothing captured.
    assert not {"InstanceType", "InitialInstanceCount"} & set(variant)
    assert not {"KmsKeyId", "DataCaptureConfig"} & set(config["Properties"])
    template.has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {"EndpointName": "triton-sls", "EndpointConfigName": Match.any_value()},
    )


def test_on_demand_variant_has_no_provisioned_concurrency(ondemand_stage: Stage) -> None:
    template = ondemand_stage.template("endpoint")
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                Match.object_like(
                    {
                        "ServerlessConfig": {
                            "MemorySizeInMB": 2048,
                            "MaxConcurrency": 5,
                            "ProvisionedConcurrency": Match.absent(),
                        }
                    }
                )
            ]
        },
    )
    dashboard = json.dumps(template.find_resources("AWS::CloudWatch::Dashboard"))
    assert "ServerlessProvisionedConcurrencyUtilization" not in dashboard


def test_model_runs_the_router_from_one_archive_on_the_cpu_image_outside_any_vpc(
    sls_stage: Stage,
) -> None:
    template = sls_stage.template("endpoint")
    template.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "PrimaryContainer": {
                "Image": CPU_IMAGE,
                "Mode": "SingleModel",
                "Environment": {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "router"},
                "ModelDataUrl": {
                    "Fn::Join": [
                        "",
                        [
                            "s3://",
                            {"Fn::ImportValue": Match.any_value()},
                            "/models/serverless/model-0123456789abcdef.tar.gz",
                        ],
                    ]
                },
            },
            # SageMaker refuses both on a serverless variant.
            "VpcConfig": Match.absent(),
            "EnableNetworkIsolation": Match.absent(),
        },
    )
    assert "MultiModel" not in json.dumps(sls_stage.json("endpoint"))
    # Nothing of the instance-backed stages: no autoscaling, no network stack.
    assert template.find_resources("AWS::ApplicationAutoScaling::ScalableTarget") == {}
    assert sorted(sls_stage.paths) == ["triton-sls-endpoint", "triton-sls-model-store"]
    outputs = sls_stage.json("endpoint")["Outputs"]
    assert outputs["Hosting"]["Value"] == "serverless"
    assert outputs["ImageUri"]["Value"] == CPU_IMAGE
    assert outputs["MemorySizeInMB"]["Value"] == "3072"


def test_execution_role_reads_only_the_archive_and_makes_no_network_interfaces(
    sls_stage: Stage,
) -> None:
    role = next(
        r
        for r in sls_stage.json("endpoint")["Resources"].values()
        if r["Type"] == "AWS::IAM::Role"
        and "sagemaker.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])
    )
    statements = {
        s["Sid"]: s for s in role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    }
    assert statements["ReadModelArchive"]["Action"] == "s3:GetObject"
    assert statements["ReadModelArchive"]["Resource"]["Fn::Join"][1][-1] == (
        "/models/serverless/model-0123456789abcdef.tar.gz"
    )
    assert statements["PullTritonImage"]["Resource"] == {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":ecr:us-east-1:763104351884:repository/sagemaker-tritonserver",
            ],
        ]
    }
    assert "EndpointNetworkInterfaces" not in statements
    assert "ec2:" not in json.dumps(role)


def test_alarms_watch_cold_starts_concurrency_and_errors(sls_stage: Stage) -> None:
    template = sls_stage.template("endpoint")
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    names = {a["Properties"]["AlarmName"] for a in alarms.values()}
    assert names == {
        "triton-sls-Invocation5XXErrors",
        "triton-sls-ModelLatencyP99",
        "triton-sls-MemoryUtilization",
        "triton-sls-ModelSetupTime",
        "triton-sls-ConcurrentExecutionsUtilization",
    }
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "AlarmName": "triton-sls-ModelSetupTime",
            "MetricName": "ModelSetupTime",
            "Namespace": "AWS/SageMaker",
            "Threshold": 120_000_000,  # µs: two thirds of the 3-minute start budget
            "Dimensions": Match.array_with([{"Name": "EndpointName", "Value": "triton-sls"}]),
        },
    )
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "AlarmName": "triton-sls-ConcurrentExecutionsUtilization",
            "MetricName": "ServerlessConcurrentExecutionsUtilization",
            "Threshold": 0.9,
        },
    )
    # Every alarm publishes to the stage's topic, and the topic lets these alarms in.
    topic = next(iter(template.find_resources("AWS::SNS::Topic")))
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic}]
        assert alarm["Properties"]["OKActions"] == [{"Ref": topic}]
    policy = json.dumps(template.find_resources("AWS::SNS::TopicPolicy"))
    for name in names:
        assert f"alarm:{name}" in policy
    # The model-store key (the topic's) lets CloudWatch in for these alarms too.
    key_policy = json.dumps(sls_stage.template("model-store").find_resources("AWS::KMS::Key"))
    for name in names:
        assert f"alarm:{name}" in key_policy
    dashboard = json.dumps(template.find_resources("AWS::CloudWatch::Dashboard"))
    for metric in ("ModelSetupTime", "ServerlessProvisionedConcurrencyUtilization"):
        assert metric in dashboard
    assert "LoadedModelCount" not in dashboard and "GPUUtilization" not in dashboard


def test_a_gpu_instance_type_is_refused_naming_the_setting(tmp_path: Path) -> None:
    settings = load_settings(stage="dev", instance_type="ml.g5.xlarge")
    with pytest.raises(DeployError, match="CPU only") as raised:
        synth_serverless(settings, tmp_path)
    assert raised.value.where == "instance_type"


# --- cfn-lint and cdk-nag -----------------------------------------------------------


def test_cfn_lint_finds_no_errors(stage: Stage) -> None:
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "cfn-lint"),
            "--format",
            "json",
            *map(str, stage.paths.values()),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    findings = json.loads(result.stdout or "[]")
    errors = [f for f in findings if f["Level"] == "Error"]
    assert errors == [], json.dumps(errors, indent=1)
    assert result.returncode in (0, 4, 8, 12), result.stderr


def test_cdk_nag_has_no_unsuppressed_findings(stage: Stage) -> None:
    rows: list[dict[str, str]] = []
    reports = sorted(stage.outdir.glob("AwsSolutions-*-NagReport.csv"))
    assert len(reports) == len(stage.paths)
    for report in reports:
        with report.open(newline="", encoding="utf-8") as handle:
            rows.extend(csv.DictReader(handle))
    assert [r for r in rows if r["Compliance"] in {"Non-Compliant", "UNKNOWN"}] == []
    suppressed = [r for r in rows if r["Compliance"] == "Suppressed"]
    assert suppressed
    for row in suppressed:
        assert any(reason in row["Exception Reason"] for reason in REVIEWED.values()), row


# --- moto's CloudFormation ------------------------------------------------------------


def _client(service: str, url: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


@pytest.mark.moto
@pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning")
def test_stacks_deploy_on_moto_cloudformation(sls_stage: Stage, moto_server: str) -> None:
    _client("ssm", moto_server).put_parameter(
        Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String", Overwrite=True
    )
    cloudformation = _client("cloudformation", moto_server)
    # WHEN the model store and then the endpoint stack are created
    for name, path in sls_stage.paths.items():
        cloudformation.create_stack(
            StackName=name,
            TemplateBody=path.read_text(encoding="utf-8"),
            Capabilities=["CAPABILITY_IAM"],
        )
        stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
        assert stack["StackStatus"] == "CREATE_COMPLETE", (name, stack.get("StackStatusReason"))
    # THEN the endpoint is in service with the serverless variant
    (endpoint_arn,) = [
        r["PhysicalResourceId"]
        for r in cloudformation.describe_stack_resources(StackName="triton-sls-endpoint")[
            "StackResources"
        ]
        if r.get("ResourceType") == "AWS::SageMaker::Endpoint"
    ]
    sagemaker = _client("sagemaker", moto_server)
    endpoint = sagemaker.describe_endpoint(EndpointName=endpoint_arn.rsplit("/", 1)[1])
    assert endpoint["EndpointStatus"] == "InService"
    config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    (variant,) = config["ProductionVariants"]
    assert variant["ServerlessConfig"] == {
        "MemorySizeInMB": 3072,
        "MaxConcurrency": 8,
        "ProvisionedConcurrency": 2,
    }
    model = sagemaker.describe_model(ModelName=variant["ModelName"])
    assert model["PrimaryContainer"]["Mode"] == "SingleModel"
    assert model["PrimaryContainer"]["Image"] == CPU_IMAGE
    assert not model.get("VpcConfig")  # moto answers {} for none
    outputs = {
        o["OutputKey"]: o["OutputValue"]
        for o in cloudformation.describe_stacks(StackName="triton-sls-endpoint")["Stacks"][0][
            "Outputs"
        ]
    }
    assert outputs["EndpointName"] == "triton-sls"
    assert outputs["ModelDataUrl"].endswith("/models/serverless/model-0123456789abcdef.tar.gz")
