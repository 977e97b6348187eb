"""The CDK app for a GPU stage and a CPU stage: assertions, cfn-lint, cdk-nag, moto deploy.

Each stage is synthesized once per session (jsii/node synth takes seconds)
and shared by every check here.
"""

from __future__ import annotations

import csv
import importlib
import json
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from deploy.config import DeploySettings, load_settings
from deploy_infra.nag import REVIEWED
from deploy_infra.synth import synthesize

# aws_cdk after infra: importing infra quiets the jsii runtime's Node version banner.
assertions: Any = importlib.import_module("aws_cdk.assertions")
Match: Any = assertions.Match
pytestmark = [pytest.mark.cdk, pytest.mark.slow]

DEPLOY_TOML = """
[default]
region = "us-east-1"

[stages.gpu]
endpoint_name = "triton-gpu"
instance_type = "ml.g5.xlarge"

[stages.gpu.infra]
initial_instance_count = 1
min_instance_count = 1
max_instance_count = 4
target_invocations_per_instance = 250
gpu_utilization_target = 70
scale_in_cooldown_s = 600
scale_out_cooldown_s = 120
alarm_model_latency_p99_ms = 800
notification_email = "ops@example.com"
data_capture = true
data_capture_percent = 20

[stages.cpu]
endpoint_name = "triton-cpu"
instance_type = "ml.m5.xlarge"

[stages.cpu.infra]
max_instance_count = 2
model_prefix = "store/models/"
"""
GPU_ALARM_ARNS = [
    f"arn:aws:cloudwatch:us-east-1:000000000000:alarm:triton-gpu-{alarm}"
    for alarm in (
        "Invocation5XXErrors",
        "ModelLatencyP99",
        "ModelLoadingWaitTime",
        "MemoryUtilization",
        "DiskUtilization",
        "GPUMemoryUtilization",
        # a serverless endpoint's (the grants name every alarm an endpoint may have)
        "ModelSetupTime",
        "ConcurrentExecutionsUtilization",
    )
]
GPU_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3"
CPU_IMAGE = GPU_IMAGE + "-cpu"


@dataclass
class Stage:
    settings: DeploySettings
    outdir: Path
    paths: dict[str, Path]  # stack name → template, deploy order

    def template(self, component: str) -> Any:
        return assertions.Template.from_json(self.json(component))

    def json(self, component: str) -> dict[str, Any]:
        path = self.paths[self.settings.stack_name(component)]
        loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return loaded


@pytest.fixture(scope="session")
def infra_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("infra") / "deploy.toml"
    path.write_text(DEPLOY_TOML, encoding="utf-8")
    return path


def _synth(stage: str, config: Path, tmp: pytest.TempPathFactory) -> Stage:
    settings = load_settings(stage=stage, config_file=config)
    outdir = tmp.mktemp(f"cdk-{stage}")
    return Stage(settings, outdir, synthesize(settings, outdir))


@pytest.fixture(scope="session")
def gpu_stage(infra_config: Path, tmp_path_factory: pytest.TempPathFactory) -> Stage:
    return _synth("gpu", infra_config, tmp_path_factory)


@pytest.fixture(scope="session")
def cpu_stage(infra_config: Path, tmp_path_factory: pytest.TempPathFactory) -> Stage:
    return _synth("cpu", infra_config, tmp_path_factory)


@pytest.fixture(scope="session", params=["gpu", "cpu", "existing"])
def stage(request: pytest.FixtureRequest) -> Stage:
    return request.getfixturevalue(f"{request.param}_stage")  # type: ignore[no-any-return]


# --- the endpoint -----------------------------------------------------------------


def test_gpu_model_is_multi_model_triton_in_the_vpc(gpu_stage: Stage) -> None:
    template = gpu_stage.template("endpoint")
    template.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "PrimaryContainer": {
                "Image": GPU_IMAGE,
                "Mode": "MultiModel",
                "ModelDataUrl": {
                    "Fn::Join": ["", ["s3://", {"Fn::ImportValue": Match.any_value()}, "/models/"]]
                },
            },
            "EnableNetworkIsolation": True,
            "VpcConfig": {
                "SecurityGroupIds": [Match.any_value()],
                "Subnets": [Match.any_value(), Match.any_value()],
            },
        },
    )


def test_cpu_model_uses_the_cpu_image_and_its_prefix(cpu_stage: Stage) -> None:
    cpu_stage.template("endpoint").has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "PrimaryContainer": {
                "Image": CPU_IMAGE,
                "Mode": "MultiModel",
                "ModelDataUrl": {"Fn::Join": ["", Match.array_with(["/store/models/"])]},
            }
        },
    )


def test_volume_key_only_where_sagemaker_accepts_one(gpu_stage: Stage, cpu_stage: Stage) -> None:
    # ml.g5 volumes are NVMe instance storage: SageMaker refuses a KmsKeyId there.
    gpu_stage.template("endpoint").has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "KmsKeyId": Match.absent(),
            "ProductionVariants": [
                Match.object_like({"InstanceType": "ml.g5.xlarge", "InitialInstanceCount": 1})
            ],
            "DataCaptureConfig": Match.object_like(
                {
                    "EnableCapture": True,
                    "InitialSamplingPercentage": 20,
                    "KmsKeyId": Match.any_value(),
                }
            ),
        },
    )
    cpu_stage.template("endpoint").has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "KmsKeyId": {"Fn::ImportValue": Match.any_value()},
            "ProductionVariants": [Match.object_like({"InstanceType": "ml.m5.xlarge"})],
            "DataCaptureConfig": Match.absent(),
        },
    )


def test_endpoint_rolls_out_blue_green_and_rolls_back_on_alarms(gpu_stage: Stage) -> None:
    gpu_stage.template("endpoint").has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {
            "EndpointName": "triton-gpu",
            "DeploymentConfig": {
                "BlueGreenUpdatePolicy": Match.object_like(
                    {
                        "TrafficRoutingConfiguration": {
                            "Type": "LINEAR",
                            "LinearStepSize": {"Type": "CAPACITY_PERCENT", "Value": 50},
                            "WaitIntervalInSeconds": 300,
                        }
                    }
                ),
                "AutoRollbackConfiguration": {
                    "Alarms": [
                        {"AlarmName": {"Ref": Match.any_value()}},
                        {"AlarmName": {"Ref": Match.any_value()}},
                    ]
                },
            },
        },
    )


def test_execution_role_reads_only_its_prefix_and_key(gpu_stage: Stage) -> None:
    role = next(
        r
        for r in gpu_stage.json("endpoint")["Resources"].values()
        if r["Type"] == "AWS::IAM::Role"
        and "sagemaker.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])
    )
    statements = {
        s["Sid"]: s for s in role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    }
    assert statements["ReadModelStorePrefix"]["Action"] == "s3:GetObject"
    assert statements["ReadModelStorePrefix"]["Resource"]["Fn::Join"][1][-1] == "/models/*"
    assert statements["ListModelStorePrefix"]["Condition"] == {
        "StringLike": {"s3:prefix": ["models/*"]}
    }
    assert statements["DecryptModels"]["Action"] == "kms:Decrypt"
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
    assert statements["WriteDataCapture"]["Resource"]["Fn::Join"][1][-1] == (
        "/data-capture/triton-gpu/*"
    )
    assert not any(
        a.startswith("s3:*") or a == "*" for s in statements.values() for a in _actions(s)
    )


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


# --- autoscaling --------------------------------------------------------------------


def test_scalable_target_and_invocations_policy(gpu_stage: Stage) -> None:
    template = gpu_stage.template("endpoint")
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "ResourceId": "endpoint/triton-gpu/variant/AllTraffic",
            "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
            "ServiceNamespace": "sagemaker",
            "MinCapacity": 1,
            "MaxCapacity": 4,
            "RoleARN": "arn:aws:iam::000000000000:role/aws-service-role/"
            "sagemaker.application-autoscaling.amazonaws.com/"
            "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint",
        },
    )
    # The execution role and the canary-rollback function's: autoscaling makes none.
    template.resource_count_is("AWS::IAM::Role", 2)
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": {
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
                },
                "TargetValue": 250,
                "ScaleInCooldown": 600,
                "ScaleOutCooldown": 120,
            },
        },
    )
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "TargetTrackingScalingPolicyConfiguration": Match.object_like(
                {
                    "CustomizedMetricSpecification": Match.object_like(
                        {"MetricName": "GPUUtilization", "Namespace": "/aws/sagemaker/Endpoints"}
                    ),
                    "TargetValue": 70,
                }
            )
        },
    )


def test_cpu_stage_has_no_gpu_policy_or_alarm(cpu_stage: Stage) -> None:
    template = cpu_stage.template("endpoint")
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalingPolicy", 1)
    assert "GPU" not in json.dumps(template.find_resources("AWS::CloudWatch::Alarm")), (
        "a CPU instance reports no GPU metrics"
    )


# --- monitoring ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metric", "namespace", "statistic", "threshold"),
    [
        ("Invocation5XXErrors", "AWS/SageMaker", {"Statistic": "Sum"}, 1),
        ("ModelLatency", "AWS/SageMaker", {"ExtendedStatistic": "p99"}, 800_000),
        ("ModelLoadingWaitTime", "AWS/SageMaker", {"Statistic": "Average"}, 5_000_000),
        ("MemoryUtilization", "/aws/sagemaker/Endpoints", {"Statistic": "Maximum"}, 90),
        ("GPUMemoryUtilization", "/aws/sagemaker/Endpoints", {"Statistic": "Maximum"}, 90),
        ("DiskUtilization", "/aws/sagemaker/Endpoints", {"Statistic": "Maximum"}, 85),
    ],
)
def test_alarms_route_to_the_topic(
    gpu_stage: Stage, metric: str, namespace: str, statistic: dict[str, str], threshold: float
) -> None:
    gpu_stage.template("endpoint").has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": metric,
            "Namespace": namespace,
            **statistic,
            "Threshold": threshold,
            "Dimensions": Match.array_with([{"Name": "EndpointName", "Value": "triton-gpu"}]),
            "AlarmActions": [{"Ref": Match.any_value()}],
            "TreatMissingData": "notBreaching",
        },
    )


def test_topic_is_encrypted_and_mails_the_operator(gpu_stage: Stage) -> None:
    template = gpu_stage.template("endpoint")
    template.has_resource_properties(
        "AWS::SNS::Topic", {"KmsMasterKeyId": {"Fn::ImportValue": Match.any_value()}}
    )
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Endpoint": "ops@example.com", "Protocol": "email"}
    )
    template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        ),
                        Match.object_like(
                            {
                                "Action": "sns:Publish",
                                "Effect": "Allow",
                                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                                "Condition": {
                                    "ArnEquals": {"aws:SourceArn": GPU_ALARM_ARNS},
                                    "StringEquals": {"aws:SourceAccount": "000000000000"},
                                },
                            }
                        ),
                    ]
                )
            }
        },
    )


def test_dashboard_shows_the_mme_metrics(gpu_stage: Stage) -> None:
    dashboards = gpu_stage.template("endpoint").find_resources("AWS::CloudWatch::Dashboard")
    (dashboard,) = dashboards.values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in (
        "Invocations",
        "ModelLatency",
        "Invocation5XXErrors",
        "LoadedModelCount",
        "ModelCacheHit",
        "ModelLoadingTime",
        "ModelDownloadingTime",
        "GPUUtilization",
    ):
        assert f'\\"{metric}\\"' in body, metric


# --- network and model store ---------------------------------------------------------


def test_network_is_private_with_endpoints_and_flow_logs(gpu_stage: Stage) -> None:
    template = gpu_stage.template("network")
    template.resource_count_is("AWS::EC2::Subnet", 2)
    template.resource_count_is("AWS::EC2::NatGateway", 0)
    template.resource_count_is("AWS::EC2::InternetGateway", 0)
    template.has_resource_properties("AWS::EC2::Subnet", {"AvailabilityZone": "us-east-1a"})
    template.has_resource_properties("AWS::EC2::Subnet", {"AvailabilityZone": "us-east-1b"})
    template.has_resource_properties("AWS::EC2::FlowLog", {"TrafficType": "ALL"})
    services = [
        json.dumps(r["Properties"]["ServiceName"])
        for r in template.find_resources("AWS::EC2::VPCEndpoint").values()
    ]
    for service in (
        "sagemaker.runtime",
        "sagemaker.api",
        "logs",
        "monitoring",
        "ecr.api",
        "ecr.dkr",
        "sts",
        ".s3",
    ):
        assert any(service in s for s in services), service
    template.has_resource_properties(
        "AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Gateway", "RouteTableIds": Match.any_value()}
    )
    # The endpoint's security group admits nothing; the interface endpoints admit it only.
    template.has_resource_properties(
        "AWS::EC2::SecurityGroup",
        {
            "GroupDescription": Match.string_like_regexp("^SageMaker endpoint"),
            "SecurityGroupIngress": Match.absent(),
        },
    )
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {
            "IpProtocol": "tcp",
            "FromPort": 443,
            "ToPort": 443,
            "SourceSecurityGroupId": Match.any_value(),
        },
    )


def test_model_store_bucket_is_locked_down(gpu_stage: Stage) -> None:
    template = gpu_stage.template("model-store")
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    Match.object_like(
                        {
                            "ServerSideEncryptionByDefault": {
                                "SSEAlgorithm": "aws:kms",
                                "KMSMasterKeyID": Match.any_value(),
                            }
                        }
                    )
                ]
            },
            "VersioningConfiguration": {"Status": "Enabled"},
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "LoggingConfiguration": Match.object_like({"LogFilePrefix": "model-store/"}),
            "LifecycleConfiguration": {
                "Rules": [
                    Match.object_like(
                        {"NoncurrentVersionExpiration": {"NoncurrentDays": 30}, "Status": "Enabled"}
                    )
                ]
            },
        },
    )
    template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        )
                    ]
                )
            }
        },
    )


# --- the API front door ---------------------------------------------------------------


def test_front_door_is_iam_authorised_and_scoped_to_the_endpoint(gpu_stage: Stage) -> None:
    template = gpu_stage.template("api")
    for route in (
        "POST /v2/models/{model}/infer",
        "GET /v2/models/{model}",
        "GET /v2/health/ready",
    ):
        template.has_resource_properties(
            "AWS::ApiGatewayV2::Route", {"RouteKey": route, "AuthorizationType": "AWS_IAM"}
        )
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Runtime": "python3.12",
            "Handler": "front_door.app.handler",
            "Environment": {
                "Variables": Match.object_like(
                    {"ENDPOINT_NAME": "triton-gpu", "MANIFEST_KEY": "models/manifest.json"}
                )
            },
        },
    )
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "Policies": [
                {
                    "PolicyName": "front-door",
                    "PolicyDocument": {
                        "Statement": Match.array_with(
                            [
                                Match.object_like(
                                    {
                                        "Action": [
                                            "sagemaker:DescribeEndpoint",
                                            "sagemaker:InvokeEndpoint",
                                        ],
                                        "Resource": "arn:aws:sagemaker:us-east-1:"
                                        "000000000000:endpoint/triton-gpu",
                                    }
                                )
                            ]
                        ),
                        "Version": "2012-10-17",
                    },
                }
            ]
        },
    )
    template.has_resource_properties(
        "AWS::ApiGatewayV2::Stage",
        {
            "AutoDeploy": True,
            "AccessLogSettings": Match.object_like({"DestinationArn": Match.any_value()}),
        },
    )


def test_front_door_asset_holds_the_handler_and_its_wheels_built_for_the_lambda(
    gpu_stage: Stage,
) -> None:
    from deploy_infra.constructs.front_door import MEMORY_MB
    from deploy_infra.lambda_bundle import WHEELS

    gpu_stage.template("api").has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "front_door.app.handler",
            "Runtime": "python3.12",
            "Architectures": ["x86_64"],
            "MemorySize": MEMORY_MB,
            # glibc keeps a large request's buffers in the heap (what bench/front_door.py
            # measures under): 64 MiB before mmap, 256 MiB kept before trimming.
            "Environment": {
                "Variables": Match.object_like(
                    {
                        "MALLOC_MMAP_THRESHOLD_": "67108864",
                        "MALLOC_TRIM_THRESHOLD_": "268435456",
                    }
                )
            },
        },
    )
    assets = json.loads(next(gpu_stage.outdir.glob("*-api.assets.json")).read_text())
    (code,) = [a for a in assets["files"].values() if a["source"]["packaging"] == "zip"]
    root = gpu_stage.outdir / code["source"]["path"]
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    for module in ("app", "binary", "passthrough", "fast_json", "request"):
        assert f"front_door/{module}.py" in files
    assert not any("__pycache__" in f or f.endswith(".pyc") for f in files)
    # The compiled wheels the handler imports, built for CPython 3.12 on x86_64 Linux.
    for wheel in WHEELS:
        assert f"{wheel.project}/__init__.py" in files, sorted(files)
        extension = [f for f in files if f.startswith(f"{wheel.project}/") and f.endswith(".so")]
        assert extension and all("cpython-312-x86_64-linux-gnu" in f for f in extension)
        tags = (root / f"{wheel.project}-{wheel.version}.dist-info" / "WHEEL").read_text()
        assert "Tag: cp312-cp312-manylinux" in tags and "x86_64" in tags
    assert not any(f.startswith("bin/") for f in files)


# --- existing VPC, key and topic ----------------------------------------------------------

EXISTING_VPC = {
    # What the CDK CLI caches in cdk.context.json after looking the VPC up.
    "vpc-provider:account=000000000000:filter.vpc-id=vpc-0a1b2c3d4e5f60718:region=us-east-1"
    ":returnAsymmetricSubnets=true": {
        "vpcId": "vpc-0a1b2c3d4e5f60718",
        "vpcCidrBlock": "10.9.0.0/16",
        "availabilityZones": [],
        "subnetGroups": [
            {
                "name": "private",
                "type": "Isolated",
                "subnets": [
                    {
                        "subnetId": f"subnet-0a1b2c3d4e5f6071{i}",
                        "cidr": f"10.9.{i}.0/24",
                        "availabilityZone": f"us-east-1{zone}",
                        "routeTableId": f"rtb-0a1b2c3d4e5f6071{i}",
                    }
                    for i, zone in enumerate("ab")
                ],
            }
        ],
    }
}
KEY_ARN = "arn:aws:kms:us-east-1:000000000000:key/11111111-2222-3333-4444-555555555555"
TOPIC_ARN = "arn:aws:sns:us-east-1:000000000000:platform-alarms"


@pytest.fixture(scope="session")
def existing_stage(tmp_path_factory: pytest.TempPathFactory) -> Stage:
    import aws_cdk as cdk

    from deploy_infra.synth import _pinned_context, build_app

    empty = tmp_path_factory.mktemp("shared") / "deploy.toml"
    empty.write_text("", encoding="utf-8")
    settings = load_settings(
        stage="shared",
        config_file=empty,
        endpoint_name="triton-shared",
        instance_type="ml.g4dn.xlarge",
        infra={
            "vpc_id": "vpc-0a1b2c3d4e5f60718",
            "kms_key_arn": KEY_ARN,
            "notification_topic_arn": TOPIC_ARN,
            "model_bucket_name": "acme-models",
            "api": False,
        },
    )
    outdir = tmp_path_factory.mktemp("cdk-shared")
    app = cdk.App(outdir=str(outdir), context={**_pinned_context(), **EXISTING_VPC})
    staged = build_app(settings, app=app)
    assembly = app.synth()
    paths = {
        stack.stack_name: Path(assembly.get_stack_by_name(stack.stack_name).template_full_path)
        for stack in staged.stacks.values()
    }
    return Stage(settings, outdir, paths)


def test_existing_vpc_key_and_topic_are_used_not_created(existing_stage: Stage) -> None:
    assert sorted(existing_stage.paths) == [
        "triton-shared-endpoint",
        "triton-shared-model-store",
        "triton-shared-network",
    ]
    network = existing_stage.template("network")
    network.resource_count_is("AWS::EC2::VPC", 0)
    network.resource_count_is("AWS::EC2::VPCEndpoint", 0)
    network.has_resource_properties(
        "AWS::EC2::SecurityGroup",
        {
            "VpcId": "vpc-0a1b2c3d4e5f60718",
            "SecurityGroupEgress": Match.array_with(
                [Match.object_like({"CidrIp": "10.9.0.0/16", "FromPort": 443})]
            ),
        },
    )
    store = existing_stage.template("model-store")
    store.resource_count_is("AWS::KMS::Key", 0)
    store.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketName": "acme-models",
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    Match.object_like(
                        {
                            "ServerSideEncryptionByDefault": Match.object_like(
                                {"KMSMasterKeyID": KEY_ARN}
                            )
                        }
                    )
                ]
            },
        },
    )
    endpoint = existing_stage.template("endpoint")
    endpoint.resource_count_is("AWS::SNS::Topic", 0)
    endpoint.has_resource_properties("AWS::CloudWatch::Alarm", {"AlarmActions": [TOPIC_ARN]})
    endpoint.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "VpcConfig": {
                "Subnets": ["subnet-0a1b2c3d4e5f60710", "subnet-0a1b2c3d4e5f60711"],
                "SecurityGroupIds": Match.any_value(),
            }
        },
    )
    # ml.g4dn volumes are NVMe instance storage too.
    endpoint.has_resource_properties("AWS::SageMaker::EndpointConfig", {"KmsKeyId": Match.absent()})
    open_findings = [
        r
        for r in nag_rows(existing_stage.outdir)
        if r["Compliance"] in {"Non-Compliant", "UNKNOWN"}
    ]
    assert open_findings == []


# --- least privilege ----------------------------------------------------------------------


def _statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("Statement"), list):
                found.extend(node["Statement"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(template)
    return found


@pytest.mark.parametrize("component", ["network", "model-store", "endpoint", "api"])
def test_no_grant_matches_another_stage_by_prefix(gpu_stage: Stage, component: str) -> None:
    # `triton-gpu*` or `triton-gpu-*` would also match a stage named `triton-gpu-staging`.
    for statement in _statements(gpu_stage.json(component)):
        text = json.dumps([statement.get("Resource"), statement.get("Condition")])
        assert "triton-gpu*" not in text and "triton-gpu-*" not in text, statement


def test_model_store_key_lets_cloudwatch_in_for_this_stages_alarms_only(gpu_stage: Stage) -> None:
    gpu_stage.template("model-store").has_resource_properties(
        "AWS::KMS::Key",
        {
            "KeyPolicy": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                                "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                                "Condition": {
                                    "StringEquals": {"aws:SourceAccount": "000000000000"},
                                    "ArnEquals": {"aws:SourceArn": GPU_ALARM_ARNS},
                                },
                            }
                        )
                    ]
                )
            }
        },
    )


def test_execution_role_writes_only_its_own_log_group(gpu_stage: Stage) -> None:
    group = "log-group:/aws/sagemaker/Endpoints/triton-gpu"
    gpu_stage.template("endpoint").has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": Match.object_like(
                {
                    "Statement": [
                        Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})
                    ]
                }
            ),
            "Policies": [
                Match.object_like(
                    {
                        "PolicyDocument": Match.object_like(
                            {
                                "Statement": Match.array_with(
                                    [
                                        Match.object_like(
                                            {
                                                "Sid": "EndpointLogs",
                                                "Resource": [
                                                    {
                                                        "Fn::Join": [
                                                            "",
                                                            Match.array_with([f":{group}"]),
                                                        ]
                                                    },
                                                    {
                                                        "Fn::Join": [
                                                            "",
                                                            Match.array_with([f":{group}:*"]),
                                                        ]
                                                    },
                                                ],
                                            }
                                        )
                                    ]
                                )
                            }
                        )
                    }
                )
            ],
        },
    )


def test_s3_gateway_reaches_only_the_model_store_and_asset_buckets(gpu_stage: Stage) -> None:
    network = gpu_stage.json("network")
    (gateway,) = [
        r
        for r in network["Resources"].values()
        if r["Type"] == "AWS::EC2::VPCEndpoint" and r["Properties"]["VpcEndpointType"] == "Gateway"
    ]
    statements = gateway["Properties"]["PolicyDocument"]["Statement"]
    resources = json.dumps([s["Resource"] for s in statements])
    assert all(s["Effect"] == "Allow" and s["Resource"] != "*" for s in statements), statements
    assert "model-store:ExportsOutputFnGetAttModelStoreBucket" in resources
    for bucket in (":s3:::cdk-hnb659fds-assets-", "-starport-layer-bucket/*"):
        assert bucket in resources, bucket
    gpu_stage.template("network").has_resource_properties(
        "AWS::EC2::VPCEndpoint",
        {
            "VpcEndpointType": "Gateway",
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Sid": "ModelStoreAndAssets",
                                "Resource": Match.array_with(
                                    [
                                        {
                                            "Fn::ImportValue": Match.string_like_regexp(
                                                "ModelStoreBucket"
                                            )
                                        }
                                    ]
                                ),
                            }
                        )
                    ]
                )
            },
        },
    )


def test_interface_endpoints_serve_this_account_only(gpu_stage: Stage) -> None:
    network = gpu_stage.json("network")
    interfaces = [
        r["Properties"]
        for r in network["Resources"].values()
        if r["Type"] == "AWS::EC2::VPCEndpoint"
        and r["Properties"]["VpcEndpointType"] == "Interface"
    ]
    assert len(interfaces) == 7
    for properties in interfaces:
        assert properties["PolicyDocument"]["Statement"] == [
            {
                "Action": "*",
                "Condition": {"StringEquals": {"aws:PrincipalAccount": {"Ref": "AWS::AccountId"}}},
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Resource": "*",
                "Sid": "ThisAccountOnly",
            }
        ], properties["ServiceName"]


def test_endpoint_egress_is_s3_prefix_list_and_interface_endpoints_only(gpu_stage: Stage) -> None:
    template = gpu_stage.template("network")
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress",
        {"DestinationPrefixListId": "pl-63a5400a", "IpProtocol": "tcp", "FromPort": 443},
    )
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress",
        {"DestinationSecurityGroupId": Match.any_value(), "FromPort": 443},
    )
    assert "0.0.0.0/0" not in json.dumps(gpu_stage.json("network"))


@pytest.mark.parametrize(
    ("component", "groups"),
    [
        ("network", ["vpc-flow-logs"]),
        ("endpoint", ["canary-rollback-function"]),
        ("api", ["front-door-function", "front-door-access"]),
    ],
)
def test_every_log_group_has_a_key_that_serves_only_it(
    gpu_stage: Stage, component: str, groups: list[str]
) -> None:
    stack = gpu_stage.settings.stack_name(component)
    document = gpu_stage.json(component)
    log_groups = [
        r["Properties"]
        for r in document["Resources"].values()
        if r["Type"] == "AWS::Logs::LogGroup"
    ]
    assert sorted(g["LogGroupName"] for g in log_groups) == sorted(
        f"/deploy/{stack}/{name}" for name in groups
    )
    assert all("Fn::GetAtt" in g["KmsKeyId"] for g in log_groups), log_groups
    gpu_stage.template(component).has_resource_properties(
        "AWS::KMS::Key",
        {
            "EnableKeyRotation": True,
            "KeyPolicy": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Principal": {
                                    "Service": {
                                        "Fn::Join": [
                                            "",
                                            ["logs.", {"Ref": "AWS::Region"}, ".amazonaws.com"],
                                        ]
                                    }
                                },
                                "Condition": {
                                    "ArnEquals": {
                                        "kms:EncryptionContext:aws:logs:arn": [
                                            f"arn:aws:logs:us-east-1:000000000000:log-group:"
                                            f"/deploy/{stack}/{name}"
                                            for name in groups
                                        ]
                                    }
                                },
                            }
                        )
                    ]
                )
            },
        },
    )


# --- cfn-lint and cdk-nag ----------------------------------------------------------------


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
    assert result.returncode in (0, 4, 8, 12), result.stderr  # 4/8: warnings/informational only


def nag_rows(outdir: Path) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for report in sorted(outdir.glob("AwsSolutions-*-NagReport.csv")):
        with report.open(newline="", encoding="utf-8") as handle:
            rows.extend(csv.DictReader(handle))
    return rows


def test_cdk_nag_has_no_unsuppressed_findings(stage: Stage) -> None:
    rows = nag_rows(stage.outdir)
    assert len(list(stage.outdir.glob("AwsSolutions-*-NagReport.csv"))) == len(stage.paths)
    open_findings = [r for r in rows if r["Compliance"] in {"Non-Compliant", "UNKNOWN"}]
    assert open_findings == []
    suppressed = [r for r in rows if r["Compliance"] == "Suppressed"]
    assert suppressed, "the reviewed suppressions are expected to apply"
    for row in suppressed:
        assert any(reason in row["Exception Reason"] for reason in REVIEWED.values()), row


def test_cdk_nag_does_report_a_finding(tmp_path: Path) -> None:
    # The check above would be vacuous if nag never fired: a bare bucket must fail.
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3
    from cdk_nag import AwsSolutionsChecks

    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Bare")
    s3.Bucket(stack, "Bucket")
    cdk.Aspects.of(app).add(AwsSolutionsChecks(reports=True))
    app.synth()
    failing = {r["Rule ID"] for r in nag_rows(tmp_path) if r["Compliance"] == "Non-Compliant"}
    assert {"AwsSolutions-S1", "AwsSolutions-S10"} <= failing


# --- deploy to moto's CloudFormation --------------------------------------------------------

# Resource types moto 5.2.5's CloudFormation does not create: it skips them with a
# warning and the stack still reaches CREATE_COMPLETE. Kept explicit so that a
# change in moto (or in the templates) shows up here. The ones this test must see
# (scalable target, scaling policies, alarms) are then applied through their own
# APIs with the template's properties, which botocore validates against the real
# service models. The GPU stage is not deployed here: moto's SageMaker refuses
# ml.g5 instance types (its enum predates them).
MOTO_SKIPS = {
    "AWS::ApiGatewayV2::Api",
    "AWS::ApiGatewayV2::Integration",
    "AWS::ApiGatewayV2::Route",
    "AWS::ApiGatewayV2::Stage",
    "AWS::ApplicationAutoScaling::ScalableTarget",
    "AWS::ApplicationAutoScaling::ScalingPolicy",
    "AWS::CloudWatch::Alarm",
    "AWS::EC2::SecurityGroupEgress",
    "AWS::S3::BucketPolicy",
    "AWS::SNS::TopicPolicy",
}
_ALARM_KEYS = {
    "AlarmName",
    "AlarmDescription",
    "ActionsEnabled",
    "AlarmActions",
    "OKActions",
    "ComparisonOperator",
    "DatapointsToAlarm",
    "Dimensions",
    "EvaluationPeriods",
    "ExtendedStatistic",
    "MetricName",
    "Namespace",
    "Period",
    "Statistic",
    "Threshold",
    "TreatMissingData",
}


def _client(service: str, url: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def _publish_assets(stage: Stage, url: str) -> None:
    """Do what `cdk deploy` does before creating stacks: bootstrap version + file assets."""
    _client("ssm", url).put_parameter(
        Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String", Overwrite=True
    )
    s3 = _client("s3", url)
    for manifest in stage.outdir.glob("*.assets.json"):
        for asset in json.loads(manifest.read_text())["files"].values():
            if asset["source"]["packaging"] != "zip":
                continue
            source = stage.outdir / asset["source"]["path"]
            archive = stage.outdir / f"{source.name}.zip"
            with zipfile.ZipFile(archive, "w") as zf:
                for path in sorted(source.rglob("*")):
                    zf.write(path, path.relative_to(source).as_posix())
            for destination in asset["destinations"].values():
                bucket = destination["bucketName"]
                if bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
                    s3.create_bucket(Bucket=bucket)
                s3.upload_file(str(archive), bucket, destination["objectKey"])


# moto's default account; the templates' literal account (000000000000) only
# appears in ARNs this test does not follow.
_PSEUDO = {"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012"}


def _resolve(value: Any, refs: dict[str, str], exports: dict[str, str]) -> Any:
    """Resolve the intrinsics these resources use (Ref, Fn::Join, Fn::ImportValue)."""
    if isinstance(value, list):
        return [_resolve(v, refs, exports) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Ref"}:
        return _PSEUDO.get(value["Ref"]) or refs[value["Ref"]]
    if set(value) == {"Fn::GetAtt"}:
        logical, attribute = value["Fn::GetAtt"]
        return refs[f"{logical}.{attribute}"]
    if set(value) == {"Fn::ImportValue"}:
        return exports[value["Fn::ImportValue"]]
    if set(value) == {"Fn::Join"}:
        separator, parts = value["Fn::Join"]
        return separator.join(str(_resolve(p, refs, exports)) for p in parts)
    return {k: _resolve(v, refs, exports) for k, v in value.items()}


def _apply_skipped(template: dict[str, Any], refs: dict[str, str], url: str) -> None:
    """Create the autoscaling and alarm resources moto's CloudFormation skipped."""
    exports = {
        e["Name"]: e["Value"] for e in _client("cloudformation", url).list_exports()["Exports"]
    }
    kinds = {
        "AWS::ApplicationAutoScaling::ScalableTarget",
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        "AWS::CloudWatch::Alarm",
    }
    resources = {
        logical: (r["Type"], _resolve(r.get("Properties", {}), refs, exports))
        for logical, r in template["Resources"].items()
        if r["Type"] in kinds
    }
    scaling = _client("application-autoscaling", url)
    targets: dict[str, dict[str, Any]] = {}
    for logical, (kind, props) in resources.items():
        if kind == "AWS::ApplicationAutoScaling::ScalableTarget":
            scaling.register_scalable_target(**props)
            targets[logical] = props
        elif kind == "AWS::CloudWatch::Alarm":
            _client("cloudwatch", url).put_metric_alarm(
                **{k: v for k, v in props.items() if k in _ALARM_KEYS}
            )
    for kind, props in resources.values():
        if kind == "AWS::ApplicationAutoScaling::ScalingPolicy":
            (target,) = [
                t for logical, t in targets.items() if props["ScalingTargetId"] == refs[logical]
            ]
            scaling.put_scaling_policy(
                PolicyName=props["PolicyName"],
                PolicyType=props["PolicyType"],
                ServiceNamespace=target["ServiceNamespace"],
                ResourceId=target["ResourceId"],
                ScalableDimension=target["ScalableDimension"],
                TargetTrackingScalingPolicyConfiguration=props[
                    "TargetTrackingScalingPolicyConfiguration"
                ],
            )


@pytest.mark.moto
@pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning")
def test_stacks_deploy_on_moto_cloudformation(cpu_stage: Stage, moto_server: str) -> None:
    moto_url = moto_server
    # GIVEN the CPU stage's templates and its published Lambda asset
    _publish_assets(cpu_stage, moto_url)
    cloudformation = _client("cloudformation", moto_url)
    # WHEN each stack is created in deploy order
    skipped: set[str] = set()
    for name, path in cpu_stage.paths.items():
        template = json.loads(path.read_text(encoding="utf-8"))
        cloudformation.create_stack(
            StackName=name, TemplateBody=json.dumps(template), Capabilities=["CAPABILITY_IAM"]
        )
        stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
        assert stack["StackStatus"] == "CREATE_COMPLETE", (name, stack.get("StackStatusReason"))
        listed = cloudformation.describe_stack_resources(StackName=name)["StackResources"]
        # moto lists a skipped resource without a logical id, and some created ones
        # (Lambda permissions, security-group rules) without a physical id.
        refs = {
            r["LogicalResourceId"]: r.get("PhysicalResourceId", "")
            for r in listed
            if "LogicalResourceId" in r
        }
        iam = _client("iam", moto_url)
        for logical, resource in template["Resources"].items():
            if resource["Type"] == "AWS::IAM::Role" and logical in refs:
                refs[f"{logical}.Arn"] = iam.get_role(RoleName=refs[logical])["Role"]["Arn"]
        missing = [logical for logical in template["Resources"] if logical not in refs]
        skipped |= {template["Resources"][logical]["Type"] for logical in missing}
        # Skipped resources' Refs resolve to what CloudFormation would return for them.
        for logical in missing:
            props = template["Resources"][logical].get("Properties", {})
            refs[logical] = props.get("AlarmName") or f"{name}-{logical}"
        _apply_skipped(template, refs, moto_url)
    assert skipped == MOTO_SKIPS
    # THEN the endpoint, its scalable target, policy and alarms exist in moto
    sagemaker = _client("sagemaker", moto_url)
    # moto ignores the EndpointName property and names the endpoint after its
    # logical id: look it up through the stack (the name is asserted on the template).
    (endpoint_arn,) = [
        r["PhysicalResourceId"]
        for r in cloudformation.describe_stack_resources(StackName="triton-cpu-endpoint")[
            "StackResources"
        ]
        if r.get("ResourceType") == "AWS::SageMaker::Endpoint"
    ]
    endpoint = sagemaker.describe_endpoint(EndpointName=endpoint_arn.rsplit("/", 1)[1])
    assert endpoint["EndpointStatus"] == "InService"
    config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    assert config["ProductionVariants"][0]["InstanceType"] == "ml.m5.xlarge"
    model = sagemaker.describe_model(ModelName=config["ProductionVariants"][0]["ModelName"])
    assert model["PrimaryContainer"]["Mode"] == "MultiModel"
    assert model["PrimaryContainer"]["Image"] == CPU_IMAGE
    assert model["PrimaryContainer"]["ModelDataUrl"].endswith("/store/models/")
    scaling = _client("application-autoscaling", moto_url)
    variant = "endpoint/triton-cpu/variant/AllTraffic"
    targets = scaling.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[variant])
    assert [(t["MinCapacity"], t["MaxCapacity"]) for t in targets["ScalableTargets"]] == [(1, 2)]
    policies = scaling.describe_scaling_policies(ServiceNamespace="sagemaker", ResourceId=variant)[
        "ScalingPolicies"
    ]
    assert [
        p["TargetTrackingScalingPolicyConfiguration"]["PredefinedMetricSpecification"][
            "PredefinedMetricType"
        ]
        for p in policies
    ] == ["SageMakerVariantInvocationsPerInstance"]
    alarms = _client("cloudwatch", moto_url).describe_alarms(AlarmNamePrefix="triton-cpu-")
    assert {a["AlarmName"] for a in alarms["MetricAlarms"]} == {
        "triton-cpu-Invocation5XXErrors",
        "triton-cpu-ModelLatencyP99",
        "triton-cpu-ModelLoadingWaitTime",
        "triton-cpu-MemoryUtilization",
        "triton-cpu-DiskUtilization",
    }
    topic_arns = {t["TopicArn"] for t in _client("sns", moto_url).list_topics()["Topics"]}
    assert all(a["AlarmActions"][0] in topic_arns for a in alarms["MetricAlarms"])
    outputs = {
        o["OutputKey"]: o["OutputValue"]
        for o in cloudformation.describe_stacks(StackName="triton-cpu-endpoint")["Stacks"][0][
            "Outputs"
        ]
    }
    assert outputs["EndpointName"] == "triton-cpu"
    assert outputs["ImageUri"] == CPU_IMAGE
    api_outputs = {
        o["OutputKey"]: o["OutputValue"]
        for o in cloudformation.describe_stacks(StackName="triton-cpu-api")["Stacks"][0]["Outputs"]
    }
    function = _client("lambda", moto_url).get_function(FunctionName=api_outputs["FunctionName"])
    assert function["Configuration"]["Handler"] == "front_door.app.handler"


# --- canary rollback (deploy_infra/constructs/canary_rollback.py) ----------------------------


def test_canary_alarms_run_the_rollback_function_with_the_manifest_only(gpu_stage: Stage) -> None:
    template = gpu_stage.template("endpoint")
    document = gpu_stage.json("endpoint")
    # The rule matches this endpoint's canary alarms (their name prefix) entering ALARM.
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.cloudwatch"],
                "detail-type": ["CloudWatch Alarm State Change"],
                "detail": {
                    "alarmName": [{"prefix": "deploy-canary-triton-gpu/"}],
                    "state": {"value": ["ALARM"]},
                },
            },
            "State": "ENABLED",
            "Targets": [
                Match.object_like(
                    {"RetryPolicy": {"MaximumRetryAttempts": 4, "MaximumEventAgeInSeconds": 3600}}
                )
            ],
        },
    )
    functions = {
        name: r["Properties"]
        for name, r in document["Resources"].items()
        if r["Type"] == "AWS::Lambda::Function"
    }
    assert len(functions) == 1, functions
    ((function_id, function),) = functions.items()
    assert function["Handler"] == "app.handler"
    assert function["Runtime"] == "python3.12"
    assert function["Environment"]["Variables"]["MANIFEST_KEY"] == "models/manifest.json"
    assert function["Environment"]["Variables"]["ENDPOINT_NAME"] == "triton-gpu"
    # Only EventBridge (this rule) may invoke it.
    permissions = [
        r["Properties"]
        for r in document["Resources"].values()
        if r["Type"] == "AWS::Lambda::Permission"
    ]
    assert [p["Principal"] for p in permissions] == ["events.amazonaws.com"]
    assert "Fn::GetAtt" in permissions[0]["SourceArn"]
    # Least privilege: get/put the one manifest object, its key, its own log group.
    role = next(
        r["Properties"]
        for r in document["Resources"].values()
        if r["Type"] == "AWS::IAM::Role"
        and r["Properties"].get("Policies", [{}])[0].get("PolicyName") == "canary-rollback"
    )
    statements = {s["Sid"]: s for s in role["Policies"][0]["PolicyDocument"]["Statement"]}
    assert sorted(statements) == [
        "DeleteCanaryAlarms",
        "ManifestKey",
        "RewriteManifest",
        "WriteLogs",
    ]
    manifest = statements["RewriteManifest"]
    assert manifest["Action"] == ["s3:GetObject", "s3:PutObject"]
    assert json.dumps(manifest["Resource"]).endswith('"/models/manifest.json"]]}'), manifest
    assert statements["ManifestKey"]["Action"] == ["kms:Decrypt", "kms:GenerateDataKey"]
    # The rolled-back canary's alarms: only this endpoint's canary alarms may be deleted.
    alarms = statements.pop("DeleteCanaryAlarms")
    assert alarms["Action"] == "cloudwatch:DeleteAlarms"
    assert (
        alarms["Resource"]
        == "arn:aws:cloudwatch:us-east-1:000000000000:alarm:deploy-canary-triton-gpu/*"
    )
    assert function["Environment"]["Variables"]["CANARY_ALARM_KINDS"] == "error-rate,p99-latency"
    assert "*" not in json.dumps([s["Resource"] for s in statements.values()])
    # Its asset is the handler alone: standard library and boto3, no front door, no wheels.
    asset = gpu_stage.outdir / f"asset.{function['Code']['S3Key'].removesuffix('.zip')}"
    assert sorted(p.name for p in asset.iterdir()) == ["__init__.py", "app.py"], function_id
