"""`deploy up --dry-run` on the moto server says how the endpoint's updates shift traffic.

What SageMaker runs is what the plan says: the stage's canary on a GPU multi-model
endpoint, all at once on ml.inf1 (SageMaker runs no guardrails there) and on a
serverless endpoint (no instance fleet to shift in steps), each saying why.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from deploy.cli import app
from tests.functional.test_lifecycle_aws import aws_environment
from tests.functional.test_lifecycle_serverless import make_repository

pytestmark = [
    pytest.mark.moto,
    pytest.mark.cdk,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning"),
    pytest.mark.filterwarnings("ignore:No Moto CloudFormation support:UserWarning"),
]

DEPLOY_TOML = """
[default]
region = "us-east-1"

[default.rollout]
traffic = "canary"
canary_size = "25%"
wait_interval_s = 600
alarms = ["checkout-slo-burn"]

[stages.gpucanary]
endpoint_name = "shop"
instance_type = "ml.g5.xlarge"

[stages.inf1canary]
instance_type = "ml.inf1.xlarge"

[stages.slscanary]
instance_type = "ml.m5.xlarge"
hosting = "serverless"
"""


@pytest.fixture(scope="module")
def aws(moto_server: str) -> Iterator[str]:
    with aws_environment(moto_server):
        yield moto_server


def dry_run(stage: str, tmp_path: Path, *, json_out: bool) -> Any:
    config = tmp_path / "deploy.toml"
    config.write_text(DEPLOY_TOML, encoding="utf-8")
    repo = tmp_path / "repository"
    if not repo.is_dir():
        make_repository(tmp_path)
    args = ["up", "--stage", stage, "--repository", str(repo)]
    args += ["--package-dir", str(tmp_path / "package"), "--dry-run"]
    result = CliRunner().invoke(
        app, [*args, *(["--json"] if json_out else [])], env={"DEPLOY_CONFIG": str(config)}
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout) if json_out else " ".join(result.stdout.split())


def rollout_note(document: dict[str, Any]) -> str:
    (note,) = [n for n in document["plan"].get("notes", []) if n.startswith("rollout:")]
    return str(note)


def test_a_gpu_stage_plans_its_canary_and_the_alarms_that_roll_it_back(
    aws: str, tmp_path: Path
) -> None:
    note = rollout_note(dry_run("gpucanary", tmp_path, json_out=True))
    assert note.startswith(
        "rollout: endpoint updates shift traffic canary 25% of the fleet, then the rest, "
        "baking 600 s after each"
    )
    assert note.endswith(
        "rolled back when any of these alarms fires: shop-Invocation5XXErrors, "
        "shop-ModelLatencyP99, checkout-slo-burn"
    )
    text = dry_run("gpucanary", tmp_path, json_out=False)
    assert "note: rollout: endpoint updates shift traffic canary 25% of the fleet" in text


def test_inf1_plans_all_at_once_and_says_sagemaker_falls_back(aws: str, tmp_path: Path) -> None:
    document = dry_run("inf1canary", tmp_path, json_out=True)
    assert document["plan"]["hosting"] == "single-model"
    note = rollout_note(document)
    assert note.startswith("rollout: endpoint updates shift traffic all at once;")
    assert "no baking, so no alarm can roll it back" in note
    assert "canary 25%" not in note
    assert note.endswith(
        "SageMaker runs no deployment guardrails on ml.inf1 (ml.inf1.xlarge): it falls back "
        "to all at once without baking, whatever rollout.traffic ('canary') says"
    )


def test_serverless_plans_all_at_once_and_says_why(aws: str, tmp_path: Path) -> None:
    note = rollout_note(dry_run("slscanary", tmp_path, json_out=True))
    assert note.startswith("rollout: endpoint updates shift traffic all at once;")
    assert "a serverless endpoint has no instance fleet to shift in steps" in note
