"""`hosting = "components"`: the synthesized endpoint stack, checked with CDK assertions.

moto has no inference-component API and its CloudFormation skips unknown types,
so a moto stack would prove nothing here: the template is checked instead, and
cfn-lint (which knows `AWS::SageMaker::InferenceComponent`) and cdk-nag run on it.
"""

from __future__ import annotations

import csv
import importlib
import json
import re
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


def test_the_stack_holds_the_endpoint_and_no_component_deploy_up_makes_them(stage: Any) -> None:
    """The components, their copy autoscaling and the scale-from-zero alarms are
    `deploy up`'s (tests/functional/test_lifecycle_components_stubbed.py): nothing in
    the template depends on the repository's models or their archives."""
    template = _endpoint(stage)
    template.resource_count_is("AWS::SageMaker::InferenceComponent", 0)
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 0)
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalingPolicy", 0)
    text = stage[1]["triton-ic-mixed-endpoint"].read_text(encoding="utf-8")
    for model in ("detector", "tabular"):
        assert model not in text
    # What deploy up reads to make the components: the image, the variant, the topic.
    outputs = template.to_json()["Outputs"]
    assert re.search(r"sagemaker-tritonserver:[0-9.]+-py3$", outputs["ImageUri"]["Value"])
    assert outputs["VariantName"]["Value"] == "AllTraffic"
    assert "AlarmTopicArn" in outputs


def test_the_role_reads_every_archive_under_the_model_store_prefix(stage: Any) -> None:
    template = _endpoint(stage)
    roles = template.find_resources("AWS::IAM::Role")
    statements = [
        statement
        for role in roles.values()
        for policy in role["Properties"].get("Policies", [])
        for statement in policy["PolicyDocument"]["Statement"]
        if statement.get("Sid") == "ReadModelArchives"
    ]
    assert len(statements) == 1, statements
    resource = json.dumps(statements[0]["Resource"])
    assert resource.endswith('"/models/*"]]}'), resource


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
