"""The AWS commands as a person runs them, AWS played by the moto server.

Stack names from a stage whose endpoint name holds the stage, the region and
its source in the plan, a missing CDK bootstrap found while planning, stage
lines during `up`, `prune --dry-run` naming what it would delete, tables in
80 columns, and `down` asking on a terminal (declining keeps everything),
refusing without one unless --yes.
"""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from deploy.cli import app
from tests.conftest import EXAMPLES
from tests.functional.test_lifecycle_aws import aws_environment

pytestmark = [
    pytest.mark.moto,
    pytest.mark.cdk,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning"),
]

ROOT = Path(__file__).resolve().parents[2]
BOX = "│┃┏┗┡└┌┐┘├┤━─"
TOML = """
[stages.staging]
endpoint_name = "deploy-triton-staging"
instance_type = "ml.m5.xlarge"

[stages.clidown]
endpoint_name = "cli-down"
instance_type = "ml.m5.xlarge"

[stages.clidown.infra]
api = false
model_bucket_name = "cli-down-model-store"
"""


@pytest.fixture(scope="module")
def aws(moto_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """boto3 at the moto server (us-east-1 bootstrapped), a deploy.toml, 80 columns."""
    config = tmp_path_factory.mktemp("cli-aws") / "deploy.toml"
    config.write_text(TOML)
    with aws_environment(moto_server), pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEPLOY_CONFIG", str(config))
        patch.setenv("COLUMNS", "80")
        yield config


def deploy(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def tables_fit(text: str, width: int = 80) -> None:
    for line in text.splitlines():
        if line[:1] in BOX:
            assert len(line) <= width, line


def repository(root: Path) -> Path:
    repo = root / "repo"
    shutil.copytree(
        EXAMPLES / "addsub", repo / "addsub", ignore=shutil.ignore_patterns("__pycache__")
    )
    return repo


def stacks() -> set[str]:
    summaries = boto3.client("cloudformation").list_stacks()["StackSummaries"]
    return {s["StackName"] for s in summaries if s["StackStatus"] != "DELETE_COMPLETE"}


def test_plan_names_stacks_once_per_stage_and_its_region(aws: Path, tmp_path: Path) -> None:
    repo = repository(tmp_path)
    args = ["up", "--stage", "staging", "--repository", repo, "--package-dir", tmp_path / "out"]
    document = json.loads(deploy(*args, "--dry-run", "--json").stdout)
    plan = document["plan"]
    assert [r["stack"] for r in plan["resources"]] == [
        "deploy-triton-staging-model-store",
        "deploy-triton-staging-network",
        "deploy-triton-staging-endpoint",
        "deploy-triton-staging-api",
    ]
    assert (plan["region"], plan["region_source"]) == ("us-east-1", "AWS_DEFAULT_REGION")
    text = deploy(*args, "--dry-run", "--region", "us-east-1")
    assert "stage staging (aws, region us-east-1 from --region)" in text.stdout
    assert "staging-staging" not in text.output
    tables_fit(text.stdout)


def test_a_missing_cdk_bootstrap_is_found_while_planning(aws: Path, tmp_path: Path) -> None:
    # GIVEN a region nobody ran `cdk bootstrap` in (moto: no SSM parameter there)
    account = boto3.client("sts").get_caller_identity()["Account"]
    result = deploy(
        "up", "--stage", "staging", "--region", "us-west-2", "--dry-run",
        "--repository", repository(tmp_path), "--package-dir", tmp_path / "out",
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert f"account {account} in us-west-2 is not bootstrapped for CDK" in result.output
    assert "/cdk-bootstrap/hnb659fds/version is missing" in result.output
    assert f"deploy cdk bootstrap aws://{account}/us-west-2" in result.output
    assert "Traceback" not in result.output


def _down_on_a_terminal(answer: bytes) -> tuple[int, str]:
    """`deploy down --stage clidown` with a terminal on stdin/stderr, answering `answer`."""
    leader, follower = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="dumb")
    process = subprocess.Popen(
        [sys.executable, "-m", "deploy", "down", "--stage", "clidown"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    seen = b""
    answered = False
    try:
        while select.select([leader], [], [], 120)[0]:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the process closed the terminal
                break
            if not chunk:
                break
            seen += chunk
            if not answered and b"Delete them?" in seen:
                os.write(leader, answer)
                answered = True
    finally:
        os.close(leader)
        code = process.wait(timeout=300)
    return code, seen.decode(errors="replace")


def test_up_reports_each_stage_then_prune_and_down_say_what_they_delete(
    aws: Path, tmp_path: Path
) -> None:
    repo = repository(tmp_path)
    args = ["up", "--stage", "clidown", "--repository", repo, "--package-dir", tmp_path / "out"]
    # WHEN up runs (text), THEN a line says when each stage starts
    first = deploy(*args, "--skip-smoke", "--timeout", "120")
    assert first.exit_code == 0, first.output
    for stage in ("validate:", "package:", "plan:", "upload:", "provision:", "wait:", "publish:"):
        assert f"] {stage}" in first.stderr, stage
    tables_fit(first.stdout)
    old = json.loads((tmp_path / "out" / "manifest.json").read_text())["models"]["addsub"]

    # GIVEN a changed model deployed, so the old archive is superseded
    source = repo / "addsub" / "1" / "model.py"
    source.write_text(source.read_text() + "\n# revision 2\n")
    assert deploy(*args, "--skip-smoke", "--json").exit_code == 0

    # WHEN prune --dry-run, THEN it names each archive it would delete, and deletes none
    dry = deploy("prune", "--stage", "clidown", "--keep", "0", "--dry-run")
    assert dry.exit_code == 0, dry.output
    location = f"s3://cli-down-model-store/models/{old['target_model']}"
    assert "would delete 1 archive(s)" in dry.stdout and location in dry.stdout
    assert "dry run: nothing was deleted" in dry.stdout
    s3 = boto3.client("s3")
    assert s3.head_object(Bucket="cli-down-model-store", Key=f"models/{old['target_model']}")

    status = deploy("status", "--stage", "clidown")
    assert status.exit_code == 0, status.output
    tables_fit(status.stdout)

    # WHEN down runs with no terminal and no --yes, THEN it refuses and deletes nothing
    before = stacks()
    refused = deploy("down", "--stage", "clidown")
    assert refused.exit_code == 2 and "--yes" in refused.output
    assert "cli-down-clidown-endpoint" in refused.output
    assert stacks() == before

    # WHEN a person declines on a terminal, THEN nothing is deleted and it says what was kept
    code, shown = _down_on_a_terminal(b"n\n")
    assert code == 1, shown
    assert "stack cli-down-clidown-endpoint" in shown
    assert "kept: model store s3://cli-down-model-store/models/" in shown
    assert "nothing was deleted; kept: cli-down-clidown-endpoint" in shown
    assert stacks() == before

    # WHEN they accept, THEN the endpoint stack goes and the model store stays
    code, shown = _down_on_a_terminal(b"y\n")
    assert code == 0, shown
    assert "removed stacks: cli-down-clidown-endpoint" in shown
    assert "cli-down-clidown-endpoint" not in stacks()
    assert "cli-down-clidown-model-store" in stacks()
