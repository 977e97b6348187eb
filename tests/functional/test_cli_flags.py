"""The CLI as a person runs it, without AWS or a running endpoint.

Flags are honoured or refused (exit 2), never ignored; `deploy package`
validates first; instance types are SageMaker's; a dry run without AWS
credentials prints the offline part of the plan; the region comes from one
order everywhere; messages name flags. AWS is absent here on purpose: no
credentials, no config files, no instance metadata.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from deploy.cli import app
from tests.conftest import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
INVALID = ROOT / "tests" / "fixtures" / "repos" / "invalid"
BOX = "│┃┏┗┡└┌┐┘├┤━─"


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder with no AWS credentials or configuration anywhere."""
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("AWS_") or name.startswith("DEPLOY_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DEPLOY_CONFIG", str(tmp_path / "deploy.toml"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("COLUMNS", "80")
    return tmp_path


def deploy(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def tables_fit(text: str, width: int = 80) -> None:
    for line in text.splitlines():
        if line[:1] in BOX:
            assert len(line) <= width, line


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["up", "--local", "--region", "eu-west-1"], "--region"),
        (["up", "--local", "--instance", "ml.g5.xlarge"], "--instance"),
        (["up", "--local", "--profile", "prod"], "--profile"),
        (["up", "--local", "--smoke-endpoint-url", "http://127.0.0.1:1"], "--smoke-endpoint-url"),
        (["status", "--local", "--stage", "prod"], "--stage"),
        (["status", "--local", "--region", "eu-west-1"], "--region"),
        (["down", "--local", "--purge"], "--purge"),
        (["down", "--local", "--stage", "prod"], "--stage"),
        (["invoke", "addsub", "--input", "in.json", "--local", "--region", "x"], "--region"),
        (["invoke", "addsub", "--input", "in.json", "--local", "--profile", "x"], "--profile"),
        (["up", "--port", "8080", "--dry-run"], "--port"),
        (["up", "--smoke-endpoint-name", "data-plane", "--dry-run"], "--smoke-endpoint-name"),
        (["serve", "s3://bucket/models/", "--package-dir", "build"], "--package-dir"),
        (["serve", str(EXAMPLES), "--mode", "single-model", "--max-loaded-mb", "9"], "--max-"),
        (["serve", str(EXAMPLES), "--mode", "single-node"], "--mode"),
        (["serve", str(EXAMPLES), "--profile", "ops"], "--profile"),
    ],
)
def test_a_flag_that_does_not_apply_is_a_usage_error(
    user: Path, args: list[str], flag: str
) -> None:
    result = deploy(*args)
    assert result.exit_code == 2, result.output
    assert flag in result.output
    assert "Traceback" not in result.output
    assert not (user / ".deploy").exists() and not (user / "build").exists()


def test_up_local_dry_run_plans_against_the_local_store_and_changes_nothing(user: Path) -> None:
    # WHEN a dry run of the local endpoint (JSON)
    args = ["up", "--local", "--dry-run", "--port", "0", "--repository", EXAMPLES]
    result = deploy(*args, "--package-dir", "build", "--json")
    # THEN the plan lists every model as new, says dry_run, and nothing ran or was published
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["dry_run"] is True and document["manifest_published"] is False
    assert document["uploads"] == [] and document["smoke"] == [] and document["url"] is None
    plan = document["plan"]
    assert plan["provider"] == "local" and plan["endpoint"] == "local"
    models = {m["name"]: m["action"] for m in plan["models"]}
    assert models == dict.fromkeys((p.parent.name for p in EXAMPLES.glob("*/config.pbtxt")), "new")
    assert plan["infra_action"] == "create"
    assert not (user / ".deploy").exists()  # no store, no state file, no process
    # AND the text plan is the same kind AWS prints, inside 80 columns, with stage lines
    text = deploy(*args, "--package-dir", "build")
    assert text.exit_code == 0, text.output
    assert "deploy up stage dev (local), endpoint local" in text.stdout
    assert "models (↑ = to upload)" in text.stdout and "dry run: nothing was changed" in text.stdout
    for stage in ("validate:", "package:", "plan:"):
        assert stage in text.stderr
    tables_fit(text.stdout)
    assert not (user / ".deploy").exists()


def test_up_shows_a_packaging_bar_on_a_terminal(user: Path) -> None:
    # GIVEN stderr is a terminal (stdout a pipe, as in `deploy up | tee`)
    leader, follower = pty.openpty()
    env = dict(os.environ, TERM="xterm", PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "deploy", "up", "--local", "--dry-run", "--port", "0"]
    command += ["--repository", str(EXAMPLES), "--package-dir", "build"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=follower, stdin=subprocess.DEVNULL, env=env
    )
    os.close(follower)
    seen = b""
    try:
        while select.select([leader], [], [], 60)[0]:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the process closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(leader)
        stdout = process.communicate(timeout=60)[0]
    # THEN packaging inside `up` draws its byte bar, between the stage lines
    assert process.returncode == 0, seen.decode(errors="replace")
    terminal = seen.decode(errors="replace")
    assert "package:" in terminal and "packaging" in terminal and "kB" in terminal
    assert terminal.index("package:") < terminal.index("packaging") < terminal.index("plan:")
    assert b"dry run: nothing was changed" in stdout


def test_package_validates_first_and_writes_nothing_on_errors(user: Path) -> None:
    repo = INVALID / "dims_zero"
    refused = deploy("package", repo, "--out", "out")
    assert refused.exit_code == 1
    assert "input[0].dims" in refused.output and "invalid dimension 0" in refused.output
    assert "nothing was packaged" in refused.output and "--no-validate" in refused.output
    assert not (user / "out").exists()
    # --no-validate packages what validation would refuse
    forced = deploy("package", repo, "--out", "out", "--no-validate", "--json")
    assert forced.exit_code == 0, forced.output
    assert (user / "out" / "manifest.json").is_file()


def test_package_table_fits_80_columns_with_whole_target_models(user: Path) -> None:
    result = deploy("package", EXAMPLES, "--out", "build")
    assert result.exit_code == 0, result.output
    assert all(len(line) <= 80 for line in result.stdout.splitlines()), result.stdout
    manifest = json.loads((user / "build" / "manifest.json").read_text())
    for model in manifest["models"].values():
        assert model["target_model"] in result.stdout  # one piece: people copy it


@pytest.mark.parametrize("typo", ["ml.g5.xlarg", "g5.xlarge", "foo"])
def test_instance_typos_fail_validate_and_the_dry_run(user: Path, typo: str) -> None:
    suggestion = "" if typo == "foo" else "did you mean ml.g5.xlarge?"
    for args in (
        ["validate", EXAMPLES, "--instance", typo],
        ["up", "--dry-run", "--instance", typo, "--repository", EXAMPLES, "--package-dir", "b"],
    ):
        result = deploy(*args)
        assert result.exit_code == 1, result.output
        assert f"{typo!r} is not a SageMaker hosting instance type" in result.output
        assert suggestion in result.output and "--instance" in result.output
    assert deploy("validate", EXAMPLES, "--instance", "ml.g5.xlarge").exit_code == 0


def test_dry_run_without_credentials_prints_the_offline_plan(user: Path) -> None:
    args = ["up", "--dry-run", "--instance", "ml.m5.xlarge"]
    args += ["--repository", str(EXAMPLES), "--package-dir", "build"]
    # WHEN there are no AWS credentials, THEN the dry run still shows what needs none
    result = deploy(*args, "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)["plan"]
    assert "no AWS credentials found" in plan["offline_reason"]
    assert any("published manifest" in part for part in plan["needs_credentials"])
    assert any("bootstrap" in part for part in plan["needs_credentials"])
    names = {p.parent.name for p in EXAMPLES.glob("*/config.pbtxt")}
    assert {m["name"] for m in plan["models"]} == names
    assert all(m["action"] == "unknown" and m["bytes"] > 0 for m in plan["models"])
    assert {c["setting"]: c["after"] for c in plan["infra"]}["instance_type"] == "ml.m5.xlarge"
    assert plan["cost"]["hourly_per_instance_usd"] > 0
    assert (plan["region"], plan["region_source"]) == ("us-east-1", "the built-in default")
    text = deploy(*args)
    assert text.exit_code == 0, text.output
    assert "offline plan: no AWS credentials found" in text.stdout
    assert "needs the published manifest" in text.stdout
    assert "estimated cost: $" in text.stdout and "dry run: nothing was changed" in text.stdout
    tables_fit(text.stdout)
    # AND without --dry-run it stops before packaging, saying what to do
    real = deploy("up", *args[2:])
    assert real.exit_code == 1
    assert "no AWS credentials found" in real.output and "--dry-run" in real.output
    assert "Traceback" not in real.output


def _plan_region(*extra: str) -> tuple[str, str]:
    args = ["up", "--dry-run", "--repository", str(EXAMPLES), "--package-dir", "build", "--json"]
    result = deploy(*args, *extra)
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)["plan"]
    return plan["region"], plan["region_source"]


def test_region_comes_from_flag_environment_profile_then_deploy_toml(
    user: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (user / "deploy.toml").write_text('[default]\nregion = "eu-west-3"\n')
    assert _plan_region() == ("eu-west-3", str(user / "deploy.toml"))
    (user / "aws-config").write_text(
        "[default]\nregion = ap-southeast-2\n[profile ops]\nregion = sa-east-1\n"
    )
    assert _plan_region() == ("ap-southeast-2", "profile default")
    assert _plan_region("--profile", "ops") == ("sa-east-1", "profile ops")
    monkeypatch.setenv("AWS_PROFILE", "ops")
    assert _plan_region() == ("sa-east-1", "profile ops")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ca-central-1")
    assert _plan_region() == ("ca-central-1", "AWS_DEFAULT_REGION")
    monkeypatch.setenv("AWS_REGION", "eu-north-1")
    assert _plan_region() == ("eu-north-1", "AWS_REGION")
    assert _plan_region("--region", "us-west-2") == ("us-west-2", "--region")
    # `deploy invoke` resolves it the same way, deploy.toml included
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.delenv("AWS_PROFILE")
    (user / "aws-config").write_text("")
    (user / "in.json").write_text(
        '{"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": [1,2,3,4]}]}'
    )
    called = deploy(
        "invoke", "addsub", "--target-model", "addsub-0.tar.gz", "--input", "in.json",
        "--endpoint", "ep", "--endpoint-url", "http://127.0.0.1:9", "--attempts", "1",
    )  # fmt: skip
    assert called.exit_code == 1
    assert "endpoint ep in eu-west-3 (from " in called.output and "deploy.toml)" in called.output


def test_an_unknown_profile_is_named_never_as_none(
    user: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (user / "aws-config").write_text("[profile ops]\nregion = eu-west-1\n")
    monkeypatch.setenv("AWS_PROFILE", "foo")
    for args in (["status"], ["prune", "--dry-run"], ["down", "--yes"]):
        result = deploy(*args)
        assert result.exit_code == 1, result.output
        assert "profile None" not in result.output and "Traceback" not in result.output
        assert "'foo'" in result.output and "ops" in result.output
    flagged = deploy("status", "--profile", "bar")
    assert flagged.exit_code == 1 and "'bar'" in flagged.output and "--profile" in flagged.output


def test_invoke_names_its_flags_not_the_sdks_keywords(user: Path) -> None:
    assert deploy("package", EXAMPLES, "--out", "build").exit_code == 0
    (user / "in.json").write_text(
        '{"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": [1,2,3,4]}]}'
    )
    result = deploy(
        "invoke", "nosuch", "--input", "in.json", "--local",
        "--manifest", "build/manifest.json", "--endpoint-url", "http://127.0.0.1:9",
    )  # fmt: skip
    assert result.exit_code == 1
    assert "model 'nosuch' is not in the manifest" in result.output
    assert "--target-model" in result.output and "target_model=" not in result.output


def test_botocore_failures_reach_people_as_errors_not_tracebacks(
    user: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    (user / "in.json").write_text(
        '{"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": [1,2,3,4]}]}'
    )
    # botocore refuses a malformed endpoint URL with a bare ValueError
    called = deploy(
        "invoke", "addsub", "--target-model", "addsub-0.tar.gz", "--input", "in.json",
        "--endpoint-url", "not-a-url",
    )  # fmt: skip
    assert called.exit_code == 1
    assert "Invalid endpoint: not-a-url" in called.output and "--endpoint-url" in called.output
    monkeypatch.setenv("AWS_ENDPOINT_URL", "not-a-url")
    for args in (["status"], ["prune"], ["up", "--dry-run", "--repository", str(EXAMPLES)]):
        result = deploy(*args)
        assert result.exit_code == 1, result.output
        assert "Invalid endpoint: not-a-url" in result.output
        assert "AWS_ENDPOINT_URL" in result.output
