"""`hosting = "components"`: the synthesized endpoint stack, checked with CDK assertions.

moto has no inference-component API and its CloudFormation skips unknown types,
so a moto stack would prove nothing here: the template is checked instead, and
cfn-lint (which knows `AWS::SageMaker::InferenceComponent`) and cdk-nag run on it.
"""

from __future__ import annotations

import csv
import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deploy.config import load_settings
from deploy_infra.synth import synthesize

assertions: Any = importlib.import_module("aws_cdk.assertions")
Match: Any = assertions.Match
pytestmark = [pytest.mark.cdk, pytest.mark.slow]

CONFIG = """
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [{{ name: "x", data_type: TYPE_FP32, dims: [3] }}]
output [{{ name: "y", data_type: TYPE_FP32, dims: [3] }}]
instance_group [{{ kind: {kind}, count: 2 }}]
"""
DEPLOY_TOML = """
[stages.mixed]
endpoint_name = "triton-ic"
instance_type = "ml.g5.12xlarge"
hosting = "components"
repository = "models"

[stages.mixed.infra]
min_instance_count = 0
max_instance_count = 2

[stages.mixed.models.tabular]
min_copies = 0
max_copies = 3
memory_mb = 2048
"""


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    root = tmp_path_factory.mktemp("components")
    for name, kind, size in (
        ("detector", "KIND_GPU", 3 * 1024 * 1024),
        ("tabular", "KIND_CPU", 10),
    ):
        (root / "models" / name / "1").mkdir(parents=True)
        (root / "models" / name / "config.pbtxt").write_text(
            CONFIG.format(name=name, kind=kind), encoding="utf-8"
        )
        (root / "models" / name / "1" / "model.onnx").write_bytes(b"\0" * size)
    (root / "deploy.toml").write_text(DEPLOY_TOML, encoding="utf-8")
    settings = load_settings(stage="mixed", config_file=root / "deploy.toml")
    settings = settings.model_copy(update={"repository": root / "models"})
    outdir = root / "cdk.out"
    return outdir, synthesize(settings, outdir)


def _endpoint(stage: tuple[Path, dict[str, Path]]) -> Any:
    path = stage[1]["triton-ic-mixed-endpoint"]
    return assertions.Template.from_json(json.loads(path.read_text(encoding="utf-8")))


def test_config_scales_instances_to_zero_and_names_no_model(stage: Any) -> None:
    template = _endpoint(stage)
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ExecutionRoleArn": Match.any_value(),
            "VpcConfig": Match.any_value(),
            "ProductionVariants": [
                Match.object_equals(
                    {
                        "VariantName": "AllTraffic",
                        "InstanceType": "ml.g5.12xlarge",
                        "InitialInstanceCount": 1,
                        "ManagedInstanceScaling": {
                            "Status": "ENABLED",
                            "MinInstanceCount": 0,
                            "MaxInstanceCount": 2,
                        },
                        "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
                    }
                )
            ],
        },
    )
    template.resource_count_is("AWS::SageMaker::Model", 0)
    template.resource_count_is("AWS::SageMaker::Endpoint", 1)


def test_a_gpu_and_a_cpu_model_are_two_components_with_their_own_requirements(
    stage: Any,
) -> None:
    template = _endpoint(stage)
    template.resource_count_is("AWS::SageMaker::InferenceComponent", 2)
    template.has_resource_properties(
        "AWS::SageMaker::InferenceComponent",
        {
            "InferenceComponentName": "triton-ic-detector",
            "VariantName": "AllTraffic",
            "Specification": {
                "Container": {
                    "Image": Match.string_like_regexp(r"sagemaker-tritonserver:[0-9.]+-py3$"),
                    "ArtifactUrl": Match.any_value(),
                    "Environment": {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "detector"},
                },
                # KIND_GPU: one GPU; twice 3 MB of files plus the server's 1024 MB.
                "ComputeResourceRequirements": {
                    "NumberOfAcceleratorDevicesRequired": 1,
                    "NumberOfCpuCoresRequired": 1,
                    "MinMemoryRequiredInMb": 1030,
                },
            },
            "RuntimeConfig": {"CopyCount": 1},
        },
    )
    template.has_resource_properties(
        "AWS::SageMaker::InferenceComponent",
        {
            "InferenceComponentName": "triton-ic-tabular",
            "Specification": {
                "Container": Match.object_like(
                    {"Environment": {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "tabular"}}
                ),
                # KIND_CPU count 2: two cores, no GPU; memory_mb from deploy.toml.
                "ComputeResourceRequirements": Match.object_equals(
                    {"NumberOfCpuCoresRequired": 2, "MinMemoryRequiredInMb": 2048}
                ),
            },
            # Created with a copy (CloudFormation sees it start); autoscaling may reach 0.
            "RuntimeConfig": {"CopyCount": 1},
        },
    )


def test_copies_autoscale_per_component_on_invocations_per_copy(stage: Any) -> None:
    template = _endpoint(stage)
    for name, low, high in (("detector", 1, 4), ("tabular", 0, 3)):
        template.has_resource_properties(
            "AWS::ApplicationAutoScaling::ScalableTarget",
            {
                "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount",
                "ResourceId": f"inference-component/triton-ic-{name}",
                "MinCapacity": low,
                "MaxCapacity": high,
            },
        )
    template.resource_properties_count_is(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": Match.object_like(
                {
                    "PredefinedMetricSpecification": {
                        "PredefinedMetricType": "SageMakerInferenceComponentInvocationsPerCopy"
                    }
                }
            ),
        },
        2,
    )


def test_minimum_zero_gets_the_scale_from_zero_alarm_and_step_policy(stage: Any) -> None:
    template = _endpoint(stage)
    # Only tabular (min_copies 0) has them.
    template.resource_properties_count_is(
        "AWS::ApplicationAutoScaling::ScalingPolicy", {"PolicyType": "StepScaling"}, 1
    )
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "StepScaling",
            "StepScalingPolicyConfiguration": {
                "AdjustmentType": "ChangeInCapacity",
                "MetricAggregationType": "Maximum",
                "Cooldown": 60,
                "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
            },
        },
    )
    alarms = template.find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"MetricName": "NoCapacityInvocationFailures"}}
    )
    assert len(alarms) == 1, alarms
    (alarm,) = alarms.values()
    properties = alarm["Properties"]
    assert properties["Namespace"] == "AWS/SageMaker"
    assert properties["Dimensions"] == [
        {"Name": "InferenceComponentName", "Value": "triton-ic-tabular"}
    ]
    assert (properties["Statistic"], properties["Period"]) == ("Sum", 60)
    assert (properties["EvaluationPeriods"], properties["DatapointsToAlarm"]) == (1, 1)
    assert properties["Threshold"] == 1
    assert properties["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    # The alarm drives the step policy (and tells the operator).
    actions = json.dumps(properties["AlarmActions"])
    assert "ScaleFromZero" in actions, actions


def test_cfn_lint_and_cdk_nag_are_clean(stage: Any) -> None:
    outdir, paths = stage
    result = subprocess.run(
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
    findings = json.loads(result.stdout or "[]")
    errors = [f for f in findings if f["Level"] == "Error"]
    assert errors == [], json.dumps(errors, indent=1)
    rows: list[dict[str, str]] = []
    for report in sorted(outdir.glob("AwsSolutions-*-NagReport.csv")):
        with report.open(newline="", encoding="utf-8") as handle:
            rows.extend(csv.DictReader(handle))
    assert rows
    open_findings = [r for r in rows if r["Compliance"] in {"Non-Compliant", "UNKNOWN"}]
    assert open_findings == [], open_findings
