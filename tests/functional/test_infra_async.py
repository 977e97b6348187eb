"""The asynchronous endpoint stack: assertions, cfn-lint, cdk-nag, moto CloudFormation.

Two stages, each synthesized once: a GPU stage that scales to zero on the
default image (24.09, no HTTP input limit to raise) and a CPU stage that keeps
an instance on an image whose Triton has `--http-max-input-size` (26.05).
"""

from __future__ import annotations

import csv
import importlib
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from deploy.config import DeploySettings, load_settings
from deploy_infra.constructs.async_endpoint import HTTP_MAX_INPUT_SIZE, container_environment
from deploy_infra.nag import REVIEWED
from deploy_infra.stacks.async_endpoint import AsyncStageOptions
from deploy_infra.synth import synthesize

assertions: Any = importlib.import_module("aws_cdk.assertions")
Match: Any = assertions.Match
pytestmark = [pytest.mark.cdk, pytest.mark.slow]

IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver"


@dataclass
class Stage:
    settings: DeploySettings
    outdir: Path
    paths: dict[str, Path]

    def json(self, component: str) -> dict[str, Any]:
        path = self.paths[self.settings.stack_name(component)]
        loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return loaded

    def template(self, component: str = "endpoint") -> Any:
        return assertions.Template.from_json(self.json(component))


def synthesize_async(settings: DeploySettings, outdir: Path) -> Stage:
    """The stage as the CDK app composes it (`deploy_infra.synth`, cdk-nag on)."""
    return Stage(settings, outdir, synthesize(settings, outdir))


@pytest.fixture(scope="module")
def gpu_stage(tmp_path_factory: pytest.TempPathFactory) -> Stage:
    settings = load_settings(
        stage="gpu",
        endpoint_name="triton-async",
        instance_type="ml.g5.xlarge",
        hosting="async",
        infra={
            "min_instance_count": 0,
            "max_instance_count": 3,
            "async_max_concurrent_invocations": 2,
            "async_backlog_per_instance": 3.0,
        },
    )
    return synthesize_async(settings, tmp_path_factory.mktemp("async-gpu"))


@pytest.fixture(scope="module")
def cpu_stage(tmp_path_factory: pytest.TempPathFactory) -> Stage:
    settings = load_settings(
        stage="cpu",
        endpoint_name="triton-async-cpu",
        instance_type="ml.m5.xlarge",
        hosting="async",
        infra={"triton_version": "26.05"},
    )
    return synthesize_async(settings, tmp_path_factory.mktemp("async-cpu"))


@pytest.fixture(scope="module", params=["gpu", "cpu"])
def stage(request: pytest.FixtureRequest) -> Stage:
    return request.getfixturevalue(f"{request.param}_stage")  # type: ignore[no-any-return]


# --- the endpoint -----------------------------------------------------------------


def test_model_is_the_router_in_single_model_mode(gpu_stage: Stage) -> None:
    gpu_stage.template().has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "PrimaryContainer": {
                "Image": f"{IMAGE}:24.09-py3",
                "Mode": "SingleModel",
                "ModelDataUrl": {
                    "Fn::Join": [
                        "",
                        [
                            "s3://",
                            {"Fn::ImportValue": Match.any_value()},
                            "/models/async/model.tar.gz",
                        ],
                    ]
                },
                # 24.09's tritonserver has no --http-max-input-size (and no limit to raise).
                "Environment": {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "router"},
            },
            "EnableNetworkIsolation": True,
            "VpcConfig": Match.object_like({"Subnets": [Match.any_value(), Match.any_value()]}),
        },
    )


def test_images_with_an_input_limit_get_it_raised_past_one_gigabyte(cpu_stage: Stage) -> None:
    cpu_stage.template().has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "PrimaryContainer": Match.object_like(
                {
                    "Image": f"{IMAGE}:26.05-py3-cpu",
                    "Environment": {
                        "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "router",
                        "SAGEMAKER_TRITON_ADDITIONAL_ARGS": (
                            f"--http-max-input-size={HTTP_MAX_INPUT_SIZE}"
                        ),
                    },
                }
            )
        },
    )
    assert HTTP_MAX_INPUT_SIZE > 1024**3


@pytest.mark.parametrize(
    ("version", "raised"),
    [("24.09", False), ("25.04", False), ("25.06", True), ("25.09", True), ("26.05", True)],
)
def test_the_input_limit_flag_follows_the_image_version(version: str, raised: bool) -> None:
    environment = container_environment(version)
    assert ("SAGEMAKER_TRITON_ADDITIONAL_ARGS" in environment) is raised


def test_endpoint_config_is_asynchronous_with_encrypted_prefixes_and_topics(
    gpu_stage: Stage,
) -> None:
    template = gpu_stage.template()
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                Match.object_like(
                    {
                        "VariantName": "AllTraffic",
                        "InstanceType": "ml.g5.xlarge",
                        "InitialInstanceCount": 1,
                    }
                )
            ],
            "AsyncInferenceConfig": {
                "ClientConfig": {"MaxConcurrentInvocationsPerInstance": 2},
                "OutputConfig": {
                    "S3OutputPath": {
                        "Fn::Join": [
                            "",
                            ["s3://", Match.any_value(), "/async/triton-async/output/"],
                        ]
                    },
                    "S3FailurePath": {
                        "Fn::Join": [
                            "",
                            ["s3://", Match.any_value(), "/async/triton-async/failure/"],
                        ]
                    },
                    "KmsKeyId": {"Fn::ImportValue": Match.any_value()},
                    "NotificationConfig": {
                        "SuccessTopic": {"Ref": Match.string_like_regexp("SuccessTopic")},
                        "ErrorTopic": {"Ref": Match.string_like_regexp("ErrorTopic")},
                    },
                },
            },
        },
    )
    # Both notification topics use the stage's key; so do the alarms'.
    topics = template.find_resources("AWS::SNS::Topic")
    assert len(topics) == 3
    for topic in topics.values():
        assert "Fn::ImportValue" in topic["Properties"]["KmsMasterKeyId"]


def test_execution_role_reads_requests_and_writes_results_only(gpu_stage: Stage) -> None:
    policies = gpu_stage.template().find_resources("AWS::IAM::Role")
    (role,) = [
        r for r in policies.values() if "asynchronous endpoint" in r["Properties"]["Description"]
    ]
    statements = {
        s["Sid"]: s for s in role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    }

    def keys(statement: dict[str, Any]) -> list[str]:
        resources = statement["Resource"]
        resources = resources if isinstance(resources, list) else [resources]
        return [r["Fn::Join"][1][-1] for r in resources]

    assert statements["ReadAsyncRequests"]["Action"] == "s3:GetObject"
    assert keys(statements["ReadAsyncRequests"]) == ["/async/triton-async/input/*"]
    assert sorted(statements["WriteAsyncResults"]["Action"]) == [
        "s3:AbortMultipartUpload",
        "s3:PutObject",
    ]
    assert sorted(keys(statements["WriteAsyncResults"])) == [
        "/async/triton-async/failure/*",
        "/async/triton-async/output/*",
    ]
    assert keys(statements["ReadModelArchive"]) == ["/models/async/model.tar.gz"]
    assert statements["NotifyAsyncResults"]["Action"] == "sns:Publish"
    assert len(statements["NotifyAsyncResults"]["Resource"]) == 2


def test_scales_on_the_backlog_and_from_zero(gpu_stage: Stage) -> None:
    template = gpu_stage.template()
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "MinCapacity": 0,
            "MaxCapacity": 3,
            "ResourceId": "endpoint/triton-async/variant/AllTraffic",
            "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
        },
    )
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": Match.object_like(
                {
                    "TargetValue": 3,
                    "CustomizedMetricSpecification": Match.object_like(
                        {
                            "MetricName": "ApproximateBacklogSizePerInstance",
                            "Namespace": "AWS/SageMaker",
                            "Dimensions": [{"Name": "EndpointName", "Value": "triton-async"}],
                        }
                    ),
                }
            ),
        },
    )
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "StepScaling",
            "StepScalingPolicyConfiguration": Match.object_like(
                {
                    "AdjustmentType": "ChangeInCapacity",
                    "StepAdjustments": [
                        Match.object_like({"ScalingAdjustment": 1, "MetricIntervalLowerBound": 0})
                    ],
                }
            ),
        },
    )
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "HasBacklogWithoutCapacity",
            "Namespace": "AWS/SageMaker",
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "Threshold": 0.5,
            "Dimensions": [{"Name": "EndpointName", "Value": "triton-async"}],
        },
    )


def test_an_endpoint_that_keeps_an_instance_has_no_scale_from_zero(cpu_stage: Stage) -> None:
    template = cpu_stage.template()
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget", {"MinCapacity": 1, "MaxCapacity": 2}
    )
    policies = template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy")
    assert [p["Properties"]["PolicyType"] for p in policies.values()] == ["TargetTrackingScaling"]


def test_outputs_name_the_prefixes_and_topics(gpu_stage: Stage) -> None:
    outputs = gpu_stage.json("endpoint")["Outputs"]
    assert outputs["Hosting"]["Value"] == "async"
    for name, suffix in (
        ("AsyncInputPrefix", "/async/triton-async/input/"),
        ("AsyncOutputPrefix", "/async/triton-async/output/"),
        ("AsyncFailurePrefix", "/async/triton-async/failure/"),
    ):
        assert outputs[name]["Value"]["Fn::Join"][1][-1] == suffix
    assert {"SuccessTopicArn", "ErrorTopicArn", "ModelDataUrl"} <= set(outputs)


def test_options_refuse_an_endpoint_that_starts_empty() -> None:
    with pytest.raises(ValueError, match="at least one instance"):
        AsyncStageOptions(initial_instance_count=0)


# --- cfn-lint, cdk-nag --------------------------------------------------------------


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
    assert any(REVIEWED["async-prefixes"] in r["Exception Reason"] for r in suppressed)
    for row in suppressed:
        assert any(reason in row["Exception Reason"] for reason in REVIEWED.values()), row


# --- moto's CloudFormation -----------------------------------------------------------


@pytest.mark.moto
@pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning")
@pytest.mark.filterwarnings("ignore:No Moto CloudFormation support:UserWarning")
def test_async_stacks_create_on_moto_cloudformation(cpu_stage: Stage, moto_server: str) -> None:
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
    for name, path in cpu_stage.paths.items():
        cloudformation.create_stack(
            StackName=name, TemplateBody=path.read_text(), Capabilities=["CAPABILITY_IAM"]
        )
        stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
        assert stack["StackStatus"] == "CREATE_COMPLETE", (name, stack.get("StackStatusReason"))
    resources = cloudformation.describe_stack_resources(
        StackName=cpu_stage.settings.stack_name("endpoint")
    )["StackResources"]
    (endpoint_arn,) = [
        r["PhysicalResourceId"]
        for r in resources
        if r.get("ResourceType") == "AWS::SageMaker::Endpoint"
    ]
    sagemaker = client("sagemaker")
    endpoint = sagemaker.describe_endpoint(EndpointName=endpoint_arn.rsplit("/", 1)[1])
    assert endpoint["EndpointStatus"] == "InService"
    config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    output = config["AsyncInferenceConfig"]["OutputConfig"]
    assert output["S3OutputPath"].endswith("/async/triton-async-cpu/output/")
    assert output["S3FailurePath"].endswith("/async/triton-async-cpu/failure/")
    assert config["AsyncInferenceConfig"]["ClientConfig"] == {
        "MaxConcurrentInvocationsPerInstance": 4
    }
    (variant,) = config["ProductionVariants"]
    container = sagemaker.describe_model(ModelName=variant["ModelName"])["PrimaryContainer"]
    assert container["Mode"] == "SingleModel"
    assert container["Environment"]["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] == "router"
    topics = client("sns").list_topics()["Topics"]
    assert len([t for t in topics if "SuccessTopic" in t["TopicArn"]]) >= 1


def test_the_app_has_no_front_door_for_an_asynchronous_stage(gpu_stage: Stage) -> None:
    # The HTTP API sends TargetModel; an asynchronous endpoint takes requests from S3.
    assert [name.rsplit("-", 1)[1] for name in gpu_stage.paths] == [
        "store",
        "network",
        "endpoint",
    ]


def test_scale_to_zero_is_refused_for_other_modes_before_synth(tmp_path: Path) -> None:
    from deploy.errors import ConfigError

    settings = load_settings(instance_type="ml.m5.xlarge", infra={"min_instance_count": 0})
    with pytest.raises(ConfigError, match="only an asynchronous endpoint") as raised:
        synthesize(settings, tmp_path)
    assert raised.value.where == "infra.min_instance_count"
    assert list(tmp_path.iterdir()) == []
