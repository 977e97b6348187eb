"""The endpoint's DeploymentConfig as `[stages.X.rollout]` asks: canary, linear, all at once.

Real CDK synth of whole stages (one per traffic setting and hosting mode), checked
with `assertions.Template`, cfn-lint and cdk-nag. On ml.inf1 SageMaker runs no
guardrails, so the template says all at once there, whatever the stage asked.
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

import pytest

from deploy.config import DeploySettings, load_settings
from deploy_infra.synth import synthesize

assertions: Any = importlib.import_module("aws_cdk.assertions")
Match: Any = assertions.Match
pytestmark = [pytest.mark.cdk, pytest.mark.slow]

DEPLOY_TOML = """
[default]
region = "us-east-1"

[stages.canary]
endpoint_name = "triton-canary"
instance_type = "ml.g5.xlarge"

[stages.canary.rollout]
traffic = "canary"
canary_size = "20%"
wait_interval_s = 600
termination_wait_s = 120
maximum_execution_s = 7200
alarms = ["team-slo-burn", "team-p99"]

[stages.linear]
endpoint_name = "triton-linear"
instance_type = "ml.m5.xlarge"
hosting = "async"

[stages.linear.infra]
initial_instance_count = 2
max_instance_count = 4

[stages.linear.rollout]
traffic = "linear"
linear_step = 1
wait_interval_s = 120

[stages.once]
endpoint_name = "triton-once"
instance_type = "ml.m5.xlarge"
hosting = "single-model"

[stages.once.rollout]
traffic = "all-at-once"
wait_interval_s = 900
termination_wait_s = 0

[stages.inf1]
endpoint_name = "triton-inferentia"
instance_type = "ml.inf1.xlarge"

[stages.inf1.rollout]
traffic = "canary"
canary_size = "10%"
"""


@dataclass
class Stage:
    settings: DeploySettings
    outdir: Path
    paths: dict[str, Path]

    def template(self, component: str) -> Any:
        path = self.paths[self.settings.stack_name(component)]
        return assertions.Template.from_json(json.loads(path.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rollout") / "deploy.toml"
    path.write_text(DEPLOY_TOML, encoding="utf-8")
    return path


@pytest.fixture(scope="module", params=["canary", "linear", "once", "inf1"])
def stage(request: pytest.FixtureRequest, config: Path, tmp_path_factory: Any) -> Stage:
    settings = load_settings(stage=request.param, config_file=config)
    outdir = tmp_path_factory.mktemp(f"cdk-{request.param}")
    return Stage(settings, outdir, synthesize(settings, outdir))


def _routing(stage: Stage) -> dict[str, Any]:
    path = stage.paths[stage.settings.stack_name("endpoint")]
    resources = json.loads(path.read_text(encoding="utf-8"))["Resources"]
    (endpoint,) = [r for r in resources.values() if r["Type"] == "AWS::SageMaker::Endpoint"]
    config: dict[str, Any] = endpoint["Properties"]["DeploymentConfig"]
    return config


def test_the_endpoint_shifts_traffic_as_the_stage_says(stage: Stage) -> None:
    name = stage.settings.stage
    own_alarms = [{"AlarmName": {"Ref": Match.any_value()}}] * 2
    expected: dict[str, Any] = {
        "canary": {
            "BlueGreenUpdatePolicy": {
                "TrafficRoutingConfiguration": {
                    "Type": "CANARY",
                    "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 20},
                    "WaitIntervalInSeconds": 600,
                },
                "TerminationWaitInSeconds": 120,
                "MaximumExecutionTimeoutInSeconds": 7200,
            },
            "AutoRollbackConfiguration": {
                "Alarms": [
                    *own_alarms,
                    {"AlarmName": "team-slo-burn"},
                    {"AlarmName": "team-p99"},
                ]
            },
        },
        "linear": {
            "BlueGreenUpdatePolicy": {
                "TrafficRoutingConfiguration": {
                    "Type": "LINEAR",
                    "LinearStepSize": {"Type": "INSTANCE_COUNT", "Value": 1},
                    "WaitIntervalInSeconds": 120,
                },
                "TerminationWaitInSeconds": 300,
                "MaximumExecutionTimeoutInSeconds": 3600,
            },
            "AutoRollbackConfiguration": {"Alarms": own_alarms},
        },
        "once": {
            "BlueGreenUpdatePolicy": {
                "TrafficRoutingConfiguration": {
                    "Type": "ALL_AT_ONCE",
                    "WaitIntervalInSeconds": 900,
                },
                "TerminationWaitInSeconds": 0,
                "MaximumExecutionTimeoutInSeconds": 3600,
            },
            "AutoRollbackConfiguration": {"Alarms": own_alarms},
        },
        # Asked for a canary; SageMaker shifts ml.inf1 all at once without baking.
        "inf1": {
            "BlueGreenUpdatePolicy": {
                "TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 0},
                "TerminationWaitInSeconds": 300,
                "MaximumExecutionTimeoutInSeconds": 3600,
            },
            "AutoRollbackConfiguration": {"Alarms": own_alarms},
        },
    }[name]
    stage.template("endpoint").has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {"EndpointName": stage.settings.endpoint_name, "DeploymentConfig": expected},
    )


def test_the_stage_own_rollback_alarms_are_its_error_and_latency_alarms(stage: Stage) -> None:
    path = stage.paths[stage.settings.stack_name("endpoint")]
    resources = json.loads(path.read_text(encoding="utf-8"))["Resources"]
    refs = [
        alarm["AlarmName"]["Ref"]
        for alarm in _routing(stage)["AutoRollbackConfiguration"]["Alarms"]
        if isinstance(alarm["AlarmName"], dict)
    ]
    names = [resources[ref]["Properties"]["AlarmName"] for ref in refs]
    endpoint = stage.settings.endpoint_name
    assert names == [f"{endpoint}-Invocation5XXErrors", f"{endpoint}-ModelLatencyP99"]


def test_cfn_lint_and_cdk_nag_stay_clean(stage: Stage) -> None:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--format", "json"]
        + [str(path) for path in stage.paths.values()],
        capture_output=True,
        text=True,
        check=False,
    )
    errors = [f for f in json.loads(result.stdout or "[]") if f["Level"] == "Error"]
    assert errors == [], json.dumps(errors, indent=1)
    reports = sorted(stage.outdir.glob("AwsSolutions-*-NagReport.csv"))
    assert len(reports) == len(stage.paths)
    rows: list[dict[str, str]] = []
    for report in reports:
        with report.open(newline="", encoding="utf-8") as handle:
            rows.extend(csv.DictReader(handle))
    assert [r for r in rows if r["Compliance"] in {"Non-Compliant", "UNKNOWN"}] == []
