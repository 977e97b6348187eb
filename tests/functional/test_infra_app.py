"""The CDK app's entry points: context overrides, refused stages, `npx cdk synth`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deploy.config import load_settings
from deploy_infra.app import overrides_from_context
from deploy_infra.errors import InfraConfigError
from deploy_infra.instances import instance_spec, triton_image_uri

pytestmark = [pytest.mark.cdk]
ROOT = Path(__file__).resolve().parents[2]


def test_context_overrides_split_into_settings(tmp_path: Path) -> None:
    overrides = overrides_from_context(
        {
            "region": "eu-west-1",
            "max_instance_count": "6",
            "infra.min_instance_count": "2",
            "availability-zones:account=0:region=x": ["a"],
        }
    )
    assert overrides == {
        "region": "eu-west-1",
        "infra": {"max_instance_count": "6", "min_instance_count": "2"},
    }
    config = tmp_path / "deploy.toml"
    config.write_text("[stages.prod.infra]\nmax_instance_count = 3\ninitial_instance_count = 2\n")
    settings = load_settings(stage="prod", config_file=config, **overrides)
    # -c beats deploy.toml field by field; the toml's other infra fields survive.
    assert (settings.region, settings.infra.max_instance_count) == ("eu-west-1", 6)
    assert (settings.infra.min_instance_count, settings.infra.initial_instance_count) == (2, 2)


@pytest.mark.parametrize(
    ("instance_type", "message"),
    [
        ("ml.inf2.xlarge", r"cannot host a multi-model endpoint"),
        ("ml.trn1.2xlarge", r"cannot host a multi-model endpoint"),
        ("g5.xlarge", r"not of the form ml.<family>.<size>"),
        ("ml.g5.xlarg", r"not a SageMaker hosting instance type \(did you mean ml.g5.xlarge\?\)"),
    ],
)
def test_unsupported_instances_are_refused_with_a_fix(instance_type: str, message: str) -> None:
    with pytest.raises(InfraConfigError, match=message) as raised:
        instance_spec(instance_type)
    assert raised.value.where == "instance_type"
    assert raised.value.fix


@pytest.mark.parametrize(
    ("instance_type", "processor"),
    [
        ("ml.g4dn.xlarge", "gpu"),
        ("ml.g5.xlarge", "gpu"),
        ("ml.g6.2xlarge", "gpu"),
        ("ml.p3.2xlarge", "gpu"),
        ("ml.m5.xlarge", "cpu"),
        ("ml.c5.2xlarge", "cpu"),
    ],
)
def test_image_tag_follows_the_processor(instance_type: str, processor: str) -> None:
    uri = triton_image_uri(region="eu-west-1", version="24.09", instance_type=instance_type)
    assert uri.startswith("763104351884.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-tritonserver:")
    assert uri.endswith("24.09-py3" if processor == "gpu" else "24.09-py3-cpu")
    assert instance_spec(instance_type).processor == processor


def test_unknown_image_version_names_the_setting() -> None:
    with pytest.raises(InfraConfigError, match=r"Triton image '19\.01'") as raised:
        triton_image_uri(region="us-east-1", version="19.01", instance_type="ml.g5.xlarge")
    assert raised.value.where == "infra.triton_version"
    assert raised.value.fix and "24.09" in raised.value.fix  # the tags the catalogue knows


def _app_env(tmp_path: Path, context: dict[str, object]) -> dict[str, str]:
    env = dict(os.environ)
    env["CDK_CONTEXT_JSON"] = json.dumps(context)
    env["CDK_OUTDIR"] = str(tmp_path / "out")
    env["DEPLOY_CONFIG"] = str(tmp_path / "deploy.toml")
    return env


def test_app_reports_a_refused_stage_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "deploy.toml").write_text('[stages.edge]\ninstance_type = "ml.inf2.xlarge"\n')
    result = subprocess.run(
        [sys.executable, "-m", "deploy_infra.app"],
        cwd=ROOT,
        env=_app_env(tmp_path, {"stage": "edge"}),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "instance_type: ml.inf2.xlarge cannot host a multi-model endpoint" in result.stderr
    assert "fix:" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_context_typo_is_an_error_naming_the_setting_it_resembles(tmp_path: Path) -> None:
    (tmp_path / "deploy.toml").write_text("[stages.prod]\n")
    context = {
        "stage": "prod",
        "max_instance_cout": "4",
        "@aws-cdk/core:enablePartitionLiterals": True,  # the CDK's own keys pass
        "aws:cdk:enable-path-metadata": True,
    }
    result = subprocess.run(
        [sys.executable, "-m", "deploy_infra.app"],
        cwd=ROOT,
        env=_app_env(tmp_path, context),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    assert "unknown context key 'max_instance_cout' (did you mean max_instance_count?)" in (
        result.stderr
    )
    assert "infra.<name>" in result.stderr and "min_instance_count" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.template.json"))
    with pytest.raises(InfraConfigError, match=r"infra\.max_instance_cout"):
        overrides_from_context({"infra.max_instance_cout": 4})


@pytest.mark.slow
def test_npx_cdk_synth_selects_the_stage_quietly_and_offline(tmp_path: Path) -> None:
    cdk = str(ROOT / "node_modules" / ".bin" / "cdk")
    if not Path(cdk).exists() or shutil.which("node") is None:
        pytest.skip("the pinned CDK CLI is not installed (make install runs npm ci)")
    # The README's deploy.toml and synth command, as written, plus one -c override.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Infrastructure (CDK)", 1)[1]
    toml = re.search(r"```toml\n(.*?)```", section, flags=re.DOTALL)
    command = re.search(r"^npx (cdk synth -c stage=prod)\b", section, flags=re.MULTILINE)
    assert toml and command, "README lost its infrastructure example"
    (tmp_path / "deploy.toml").write_text(toml.group(1))
    env = dict(os.environ, DEPLOY_CONFIG=str(tmp_path / "deploy.toml"))
    for name in (
        "AWS_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "CDK_DEFAULT_ACCOUNT",
    ):
        env.pop(name, None)
    out = tmp_path / "cdk.out"
    result = subprocess.run(
        [cdk, *command.group(1).split()[1:], "-q", "-c", "max_instance_count=6", "-o", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "end-of-life" not in result.stderr
    assert "[Warning" not in result.stderr and "[Error" not in result.stderr, result.stderr
    names = sorted(p.name for p in out.glob("*.template.json"))
    assert names == [
        "triton-prod-api.template.json",
        "triton-prod-endpoint.template.json",
        "triton-prod-model-store.template.json",
        "triton-prod-network.template.json",
    ]
    endpoint = json.loads((out / "triton-prod-endpoint.template.json").read_text())
    (target,) = [
        r["Properties"]
        for r in endpoint["Resources"].values()
        if r["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget"
    ]
    assert (target["MinCapacity"], target["MaxCapacity"]) == (1, 6)  # -c beats deploy.toml
    (config,) = [
        r["Properties"]
        for r in endpoint["Resources"].values()
        if r["Type"] == "AWS::SageMaker::EndpointConfig"
    ]
    assert config["ProductionVariants"][0]["InstanceType"] == "ml.g5.xlarge"


@pytest.mark.slow
def test_deploy_refuses_templates_that_hold_unlooked_up_placeholders(tmp_path: Path) -> None:
    # GIVEN a region whose lookups (zones, S3's prefix list) are neither pinned nor given
    from deploy.errors import ConfigError
    from deploy.lifecycle.templates import cdk_synthesizer

    (tmp_path / "deploy.toml").write_text('[default]\nregion = "eu-west-3"\n')
    settings = load_settings(config_file=tmp_path / "deploy.toml")
    # THEN deploy's synthesis stops rather than deploy a dummy prefix list id
    with pytest.raises(ConfigError) as error:
        cdk_synthesizer({})(settings, tmp_path / "cdk.out")
    assert "PrefixListName=com.amazonaws.eu-west-3.s3" in error.value.message
    assert "availability-zones" in error.value.message
