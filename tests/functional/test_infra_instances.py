"""The CDK app classifies instances through the catalogue: current GPU families get the GPU
image, GPU autoscaling and GPU alarms; hosts the Triton image cannot run on are refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deploy.config import load_settings
from deploy_infra.errors import InfraConfigError
from deploy_infra.instances import has_instance_storage, instance_spec
from deploy_infra.synth import synthesize

CFN_LINT = str(Path(sys.executable).parent / "cfn-lint")
DEPLOY_TOML = """
[default]
region = "us-east-1"

[stages.h200]
endpoint_name = "triton-h200"
instance_type = "ml.p5e.48xlarge"
"""


@pytest.mark.parametrize(
    "instance_type",
    [
        "ml.p5e.48xlarge",
        "ml.p5en.48xlarge",
        "ml.p4de.24xlarge",
        "ml.g7e.2xlarge",
        "ml.p6-b200.48xlarge",
    ],
)
def test_current_gpu_families_are_gpu_instances_with_local_nvme(instance_type: str) -> None:
    spec = instance_spec(instance_type)
    assert spec.has_gpu, instance_type
    assert has_instance_storage(spec)


@pytest.mark.parametrize(
    "instance_type", ["ml.c7g.xlarge", "ml.m8g.large", "ml.p6e-gb200.36xlarge"]
)
def test_arm_hosts_are_refused_naming_the_architecture(instance_type: str) -> None:
    with pytest.raises(InfraConfigError) as caught:
        instance_spec(instance_type)
    assert "arm64" in caught.value.message and "x86_64" in caught.value.message
    assert instance_type in caught.value.message


def test_gaudi_is_refused() -> None:
    with pytest.raises(InfraConfigError, match="Gaudi"):
        instance_spec("ml.dl1.24xlarge")


@pytest.mark.cdk
@pytest.mark.slow
def test_a_p5e_stage_gets_the_gpu_image_gpu_scaling_and_gpu_alarms(tmp_path: Path) -> None:
    config = tmp_path / "deploy.toml"
    config.write_text(DEPLOY_TOML, encoding="utf-8")
    settings = load_settings(stage="h200", config_file=config)
    paths = synthesize(settings, tmp_path / "cdk.out", nag=False)
    endpoint = json.loads(paths[settings.stack_name("endpoint")].read_text(encoding="utf-8"))
    text = json.dumps(endpoint)
    assert "sagemaker-tritonserver:24.09-py3" in text and "24.09-py3-cpu" not in text
    metrics = {
        props.get("MetricName")
        for resource in endpoint["Resources"].values()
        if resource["Type"] == "AWS::CloudWatch::Alarm"
        for props in [resource["Properties"]]
    }
    assert "GPUMemoryUtilization" in metrics, metrics
    assert "GPUUtilization" in text  # the target-tracking policy on GPU use


def _endpoint_configs(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SageMaker::EndpointConfig"
    ]


@pytest.mark.cdk
@pytest.mark.slow
@pytest.mark.parametrize(
    ("hosting", "instance_type", "version", "ami"),
    [
        ("multi-model", "ml.g5.xlarge", "26.05", "al2023-ami-sagemaker-inference-gpu-4-1"),
        ("async", "ml.g6.xlarge", "25.04", "al2023-ami-sagemaker-inference-gpu-4-1"),
        ("multi-model", "ml.g5.xlarge", "24.09", None),
        ("multi-model", "ml.m5.xlarge", "26.05", None),  # CPU: the AMI is SageMaker's
    ],
)
def test_the_endpoint_runs_on_the_ami_whose_driver_the_image_needs(
    tmp_path: Path, hosting: str, instance_type: str, version: str, ami: str | None
) -> None:
    config = tmp_path / "deploy.toml"
    config.write_text(
        f'[default]\nregion = "us-east-1"\n\n[stages.s]\nendpoint_name = "e"\n'
        f'instance_type = "{instance_type}"\nhosting = "{hosting}"\n\n'
        f'[stages.s.infra]\ntriton_version = "{version}"\n',
        encoding="utf-8",
    )
    settings = load_settings(stage="s", config_file=config)
    paths = synthesize(settings, tmp_path / "cdk.out", nag=False)
    template = json.loads(paths[settings.stack_name("endpoint")].read_text(encoding="utf-8"))
    (variant,) = _endpoint_configs(template)[0]["ProductionVariants"]
    assert variant.get("InferenceAmiVersion") == ami
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
    assert [f for f in json.loads(lint.stdout or "[]") if f["Level"] == "Error"] == []


def test_an_image_the_instance_cannot_run_stops_the_cdk_app_with_the_fix() -> None:
    from deploy_infra.instances import triton_image_uri

    with pytest.raises(InfraConfigError) as caught:
        triton_image_uri(region="us-east-1", version="25.04", instance_type="ml.p3.2xlarge")
    assert "compute capability 7.5" in caught.value.message
    assert caught.value.fix and '"24.09"' in caught.value.fix
