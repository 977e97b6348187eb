"""A multi-model stage with `async_lane = true`: the lane's stack next to the endpoint's.

The stage is synthesized once with cdk-nag on (`deploy_infra.synth`): assertions on the
lane's stack, the multi-model endpoint left as it is, cfn-lint and cdk-nag.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deploy.config import load_settings
from deploy_infra.app import overrides_from_context
from tests.functional.test_infra_async import Stage, synthesize_async

pytestmark = [pytest.mark.cdk, pytest.mark.slow]

ENDPOINT = "triton-laned"
LANE = f"{ENDPOINT}-async"


@pytest.fixture(scope="module")
def laned(tmp_path_factory: pytest.TempPathFactory) -> Stage:
    # As `-c async_lane=true` gives it to the CDK app.
    overrides = overrides_from_context({"async_lane": "true", "instance_type": "ml.g5.xlarge"})
    settings = load_settings(stage="big", endpoint_name=ENDPOINT, **overrides)
    assert settings.async_lane is True
    return synthesize_async(settings, tmp_path_factory.mktemp("laned"))


def resources(stage: Stage, component: str, kind: str) -> list[dict[str, Any]]:
    found = stage.template(component).find_resources(kind)
    return [resource["Properties"] for resource in found.values()]


def test_the_lane_is_a_stack_of_its_own_after_the_endpoint(laned: Stage) -> None:
    names = list(laned.paths)
    lane = laned.settings.stack_name("async-lane")
    assert lane == "triton-laned-big-async-lane"
    assert names.index(laned.settings.stack_name("endpoint")) < names.index(lane)


def test_the_lane_is_an_asynchronous_endpoint_on_the_router_archive(laned: Stage) -> None:
    (endpoint,) = resources(laned, "async-lane", "AWS::SageMaker::Endpoint")
    assert endpoint["EndpointName"] == LANE
    (config,) = resources(laned, "async-lane", "AWS::SageMaker::EndpointConfig")
    output = config["AsyncInferenceConfig"]["OutputConfig"]
    assert output["S3OutputPath"]["Fn::Join"][1][-1] == f"/async/{LANE}/output/"
    assert output["S3FailurePath"]["Fn::Join"][1][-1] == f"/async/{LANE}/failure/"
    (model,) = resources(laned, "async-lane", "AWS::SageMaker::Model")
    container = model["PrimaryContainer"]
    assert container["Mode"] == "SingleModel"
    # The archive `hosting = "async"` uploads (deploy up names its content-derived key).
    assert json.dumps(container["ModelDataUrl"]).endswith('/models/async/model.tar.gz"]]}')


def test_the_multi_model_endpoint_stays_real_time(laned: Stage) -> None:
    (config,) = resources(laned, "endpoint", "AWS::SageMaker::EndpointConfig")
    assert "AsyncInferenceConfig" not in config
    (model,) = resources(laned, "endpoint", "AWS::SageMaker::Model")
    assert model["PrimaryContainer"]["Mode"] == "MultiModel"
    (endpoint,) = resources(laned, "endpoint", "AWS::SageMaker::Endpoint")
    assert endpoint["EndpointName"] == ENDPOINT


def test_the_store_key_lets_the_lanes_alarms_publish(laned: Stage) -> None:
    (key,) = resources(laned, "model-store", "AWS::KMS::Key")
    (statement,) = [
        s for s in key["KeyPolicy"]["Statement"] if s.get("Sid") == "EndpointAlarmsEncrypt"
    ]
    arns = json.dumps(statement["Condition"]["ArnEquals"]["aws:SourceArn"])
    assert f":alarm:{ENDPOINT}-" in arns and f":alarm:{LANE}-" in arns


def test_no_lane_without_the_setting(tmp_path: Path) -> None:
    from deploy_infra.synth import build_app

    settings = load_settings(stage="plain", endpoint_name=ENDPOINT, instance_type="ml.g5.xlarge")
    assert "async-lane" not in build_app(settings, outdir=tmp_path, nag=False).stacks


def test_cfn_lint_finds_no_errors(laned: Stage) -> None:
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "cfn-lint"),
            "--format",
            "json",
            *map(str, laned.paths.values()),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    findings = json.loads(result.stdout or "[]")
    errors = [f for f in findings if f["Level"] == "Error"]
    assert errors == [], json.dumps(errors, indent=1)
    assert result.returncode in (0, 4, 8, 12), result.stderr


def test_cdk_nag_has_no_unsuppressed_findings(laned: Stage) -> None:
    import csv

    from deploy_infra.nag import REVIEWED

    rows: list[dict[str, str]] = []
    reports = sorted(laned.outdir.glob("AwsSolutions-*-NagReport.csv"))
    assert len(reports) == len(laned.paths) == 5
    for report in reports:
        with report.open(newline="", encoding="utf-8") as handle:
            rows.extend(csv.DictReader(handle))
    assert [r for r in rows if r["Compliance"] in {"Non-Compliant", "UNKNOWN"}] == []
    for row in (r for r in rows if r["Compliance"] == "Suppressed"):
        assert any(reason in row["Exception Reason"] for reason in REVIEWED.values()), row
