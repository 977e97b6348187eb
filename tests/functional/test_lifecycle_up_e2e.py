"""`deploy up / status / prune / down` through the CLI, AWS played by the moto server.

The control plane (S3, CloudFormation, SageMaker) is moto's; the data plane
for smoke tests is a local SageMaker endpoint (real tritonserver) reading the
same S3 model store the AWS provider uploads to, as SageMaker would.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.config import load_settings
from deploy.hosting import mode_for
from deploy.lifecycle.aws_provider import AwsProvider
from deploy.lifecycle.progress import SilentReporter
from deploy.lifecycle.stages import package, pending_files, plan
from tests.functional.test_lifecycle_aws import aws_environment

pytestmark = [
    pytest.mark.moto,
    pytest.mark.cdk,
    pytest.mark.triton,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning"),
]

EXAMPLES = Path(__file__).resolve().parents[2] / "model_packages" / "examples"
STAGE = "e2e"
BUCKET = "deploy-e2e-model-store"
DATA_PLANE = "e2e-data-plane"


@pytest.fixture(scope="module")
def aws(moto_server: str) -> Iterator[str]:
    with aws_environment(moto_server), pytest.MonkeyPatch.context() as patch:
        # Stage settings through the environment, as a CI job would set them.
        patch.setenv("DEPLOY_INFRA__API", "false")
        patch.setenv("DEPLOY_INFRA__MODEL_BUCKET_NAME", BUCKET)
        patch.setenv("DEPLOY_INFRA__MAX_INSTANCE_COUNT", "2")
        yield moto_server


@pytest.fixture(scope="module")
def data_plane(aws: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local endpoint serving the stage's S3 model store (what SageMaker would read)."""
    from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint

    work = tmp_path_factory.mktemp("e2e-data-plane")
    endpoint = LocalEndpoint(
        f"s3://{BUCKET}/models/",
        work_dir=work,
        options=EndpointOptions(endpoint_name=DATA_PLANE),
    ).start()
    try:
        yield endpoint.url
    finally:
        endpoint.stop()


def make_repository(root: Path) -> Path:
    repo = root / "repo"
    shutil.copytree(
        EXAMPLES / "addsub", repo / "addsub", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(
        EXAMPLES / "addsub", repo / "adder", ignore=shutil.ignore_patterns("__pycache__")
    )
    config = repo / "adder" / "config.pbtxt"
    config.write_text(config.read_text().replace('name: "addsub"', 'name: "adder"'))
    return repo


def cli(*args: str, ok: bool = True, answer: str | None = None) -> Any:
    result = CliRunner().invoke(app, list(args), input=answer, catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, result.output
    return result


def up(repo: Path, out: Path, url: str, *extra: str, ok: bool = True) -> Any:
    return cli(
        "up",
        "--stage",
        STAGE,
        "--repository",
        str(repo),
        "--package-dir",
        str(out),
        "--smoke-endpoint-url",
        url,
        "--smoke-endpoint-name",
        DATA_PLANE,
        "--timeout",
        "120",
        *extra,
        ok=ok,
    )


def published() -> dict[str, str]:
    body = boto3.client("s3").get_object(Bucket=BUCKET, Key="models/manifest.json")["Body"]
    manifest = json.loads(body.read())
    return {name: model["target_model"] for name, model in manifest["models"].items()}


def test_up_change_rollout_smoke_failure_resume_status_prune_down(
    aws: str, data_plane: str, tmp_path: Path
) -> None:
    repo = make_repository(tmp_path)
    out = tmp_path / "package"

    # GIVEN nothing deployed, WHEN --dry-run, THEN the plan is shown and nothing changes
    dry = up(repo, out, data_plane, "--instance", "ml.m5.xlarge", "--dry-run", "--json")
    document = json.loads(dry.stdout)
    assert document["dry_run"] and document["plan"]["infra_action"] == "create"
    assert {m["name"]: m["action"] for m in document["plan"]["models"]} == {
        "adder": "new",
        "addsub": "new",
    }
    assert document["plan"]["cost"]["hourly_per_instance_usd"] > 0
    stacks = boto3.client("cloudformation").list_stacks()["StackSummaries"]
    assert not [s for s in stacks if s["StackName"].startswith(f"deploy-triton-{STAGE}-")]
    text = up(repo, out, data_plane, "--instance", "ml.m5.xlarge", "--dry-run").stdout
    assert "models" in text and "new" in text and "estimated cost: $" in text
    assert "dry run: nothing was changed" in text

    # WHEN up runs from nothing, THEN stacks, archives, smoke tests and the manifest
    first = json.loads(up(repo, out, data_plane, "--instance", "ml.m5.xlarge", "--json").stdout)
    assert sorted(s["name"] for s in first["smoke"] if s["ok"]) == ["adder", "addsub"]
    assert all(s["outputs"] == ["OUTPUT0", "OUTPUT1"] for s in first["smoke"])
    assert first["manifest_published"] and first["endpoint"]["status"] == "InService"
    targets = published()
    assert set(targets) == {"adder", "addsub"}
    config = first["endpoint"]["config_name"]

    # WHEN one model changes, THEN only its archive is uploaded and smoke-tested,
    # the endpoint is untouched and the manifest switches to it afterwards
    source = repo / "addsub" / "1" / "model.py"
    source.write_text(source.read_text() + "\n# revision 2\n")
    second = json.loads(up(repo, out, data_plane, "--instance", "ml.m5.xlarge", "--json").stdout)
    changed = [m for m in second["plan"]["models"] if m["action"] != "unchanged"]
    assert [(m["name"], m["action"]) for m in changed] == [("addsub", "changed")]
    assert [u["target_model"] for u in second["uploads"]] == [changed[0]["target_model"]]
    assert [s["name"] for s in second["smoke"]] == ["addsub"]
    assert second["plan"]["infra_action"] == "none"
    assert second["endpoint"]["config_name"] == config
    assert published() == {**targets, "addsub": changed[0]["target_model"]}

    # WHEN the instance type changes, THEN a new endpoint config serves, no upload
    third = json.loads(up(repo, out, data_plane, "--instance", "ml.g4dn.xlarge", "--json").stdout)
    assert third["uploads"] == [] and third["plan"]["infra_action"] == "update"
    assert third["endpoint"]["instance_type"] == "ml.g4dn.xlarge"
    assert third["endpoint"]["config_name"] != config

    # WHEN a changed model fails its smoke test, THEN it is named with Triton's error
    # and the manifest keeps the previous archive
    before = published()
    broken = repo / "adder" / "1" / "model.py"
    good = broken.read_text()
    broken.write_text(good.replace("responses = []", 'raise ValueError("adder is broken")'))
    failed = up(repo, out, data_plane, "--instance", "ml.g4dn.xlarge", ok=False)
    assert failed.exit_code == 1
    assert "smoke test failed for 1 model(s): adder" in failed.output
    assert "adder is broken" in failed.output
    assert "Traceback" not in failed.output
    assert published() == before
    broken.write_text(good)

    # WHEN an upload is interrupted, THEN nothing incomplete is visible; a re-run resumes
    (repo / "adder" / "1" / "weights.bin").write_bytes(os.urandom(9 * 1024 * 1024))
    settings = load_settings(
        stage=STAGE, instance_type="ml.g4dn.xlarge", repository=repo, package_dir=out
    )
    mode = mode_for(settings)
    the_package = package(mode, repo, out)
    provider = AwsProvider(settings, before_part=_interrupt_at_part(2), upload_workers=1)
    the_plan, _ = plan(settings, provider, mode, the_package, _spec(settings))
    (pending,) = the_plan.uploads
    with pytest.raises(KeyboardInterrupt):
        provider.upload(pending_files(the_plan, the_package), SilentReporter())
    s3 = boto3.client("s3")
    assert "Contents" not in s3.list_objects_v2(
        Bucket=BUCKET, Prefix=f"models/{pending.target_model}"
    )
    resumed = json.loads(up(repo, out, data_plane, "--instance", "ml.g4dn.xlarge", "--json").stdout)
    (upload,) = resumed["uploads"]
    assert upload["resumed"] and upload["parts_reused"] == 1 and upload["parts_sent"] == 1
    assert [s["name"] for s in resumed["smoke"]] == ["adder"]
    assert published()["adder"] == pending.target_model

    # WHEN status is asked, THEN endpoint, variant, instances, scaling, models, metrics
    status = json.loads(cli("status", "--stage", STAGE, "--json").stdout)
    assert status["endpoint"]["instance_type"] == "ml.g4dn.xlarge"
    assert status["endpoint"]["variant"] == "AllTraffic"
    assert (status["scaling"]["min"], status["scaling"]["max"]) == (1, 2)
    assert status["models"] == published()
    assert status["metrics"]["errors_5xx"] == 0
    assert "endpoint" in cli("status", "--stage", STAGE).stdout

    # WHEN prune keeps nothing superseded, THEN only what the manifest names remains
    pruned = json.loads(cli("prune", "--stage", STAGE, "--keep", "0", "--json").stdout)
    assert targets["addsub"] in pruned["deleted"] and targets["adder"] in pruned["deleted"]
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="models/")["Contents"]}
    assert keys == {f"models/{t}" for t in published().values()} | {"models/manifest.json"}

    # WHEN --purge is not confirmed (no terminal to ask on, no --yes), THEN nothing is deleted
    refused = cli("down", "--stage", STAGE, "--purge", ok=False, answer="y\n")
    assert refused.exit_code == 2 and f"s3://{BUCKET}/models/" in refused.output
    assert "--yes" in refused.output
    assert json.loads(cli("status", "--stage", STAGE, "--json").stdout)["endpoint"] is not None

    # WHEN down runs, THEN the endpoint stack goes and the model store stays
    down = json.loads(cli("down", "--stage", STAGE, "--yes", "--json").stdout)
    assert down["removed_stacks"] == [f"deploy-triton-{STAGE}-endpoint"]
    assert down["model_store_kept"] == f"s3://{BUCKET}/models/"
    assert published()  # still there
    after = json.loads(cli("status", "--stage", STAGE, "--json").stdout)
    assert after["endpoint"] is None


def _interrupt_at_part(number: int) -> Any:
    def hook(_target: str, part: int) -> None:
        if part == number:
            raise KeyboardInterrupt

    return hook


def _spec(settings: Any) -> Any:
    from deploy.lifecycle.stages import desired_infra

    return desired_infra(settings)
