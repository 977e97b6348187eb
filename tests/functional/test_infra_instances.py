"""The CDK app classifies instances through the catalogue: current GPU families get the GPU
image, GPU autoscaling and GPU alarms; hosts the Triton image cannot run on are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deploy.config import load_settings
from deploy_infra.errors import InfraConfigError
from deploy_infra.instances import has_instance_storage, instance_spec
from deploy_infra.synth import synthesize

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
