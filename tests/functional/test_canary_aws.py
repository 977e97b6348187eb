"""`deploy up --canary` on AWS, played by the moto server: what is uploaded and published.

GIVEN `addsub` deployed to a multi-model stage WHEN a changed version goes up
with `--canary 10%` THEN both archives are in the model store and the published
manifest keeps the live version as `target_model`, naming the new one as its
canary; a third version with `--canary` replaces the canary (the live version
stays); `deploy up` of the canary's own version keeps it as it is (`--canary`
changes its percent); a fourth version without `--canary` takes every call. A canary on
another hosting, or outside (0, 50], is refused naming the flag or the field.
"""

from __future__ import annotations

import json
import shutil
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
    pytest.mark.filterwarnings("ignore:Tried to parse AWS:UserWarning"),
]

BUCKET = "canary-up-model-store"
TOML = f"""
[stages.canary]
endpoint_name = "canary-up"
instance_type = "ml.m5.xlarge"

[stages.canary.infra]
api = false
model_bucket_name = "{BUCKET}"

[stages.percent.models.addsub]
canary = 75
"""


@pytest.fixture(scope="module")
def aws(moto_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    config = tmp_path_factory.mktemp("canary-aws") / "deploy.toml"
    config.write_text(TOML)
    with aws_environment(moto_server), pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEPLOY_CONFIG", str(config))
        yield config


def deploy(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def repository(root: Path) -> Path:
    repo = root / "repo"
    shutil.copytree(
        EXAMPLES / "addsub", repo / "addsub", ignore=shutil.ignore_patterns("__pycache__")
    )
    return repo


def new_version(repo: Path, revision: int) -> None:
    source = repo / "addsub" / "1" / "model.py"
    source.write_text(source.read_text() + f"\n# revision {revision}\n")


def published() -> dict[str, Any]:
    body = boto3.client("s3").get_object(Bucket=BUCKET, Key="models/manifest.json")["Body"]
    document: dict[str, Any] = json.loads(body.read())
    return document


def stored(key: str) -> bool:
    listed = boto3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix=f"models/{key}")
    return any(item["Key"] == f"models/{key}" for item in listed.get("Contents", []))


@pytest.mark.cdk
@pytest.mark.slow
def test_up_canary_uploads_the_new_version_and_publishes_it_as_the_canary(
    aws: Path, tmp_path: Path
) -> None:
    repo = repository(tmp_path)
    args = ["up", "--stage", "canary", "--repository", repo, "--package-dir", tmp_path / "out"]
    args += ["--skip-smoke", "--timeout", "120"]
    first = deploy(*args, "--json")
    assert first.exit_code == 0, first.output
    live = published()["models"]["addsub"]["target_model"]

    # WHEN a changed version goes up as a 10% canary
    new_version(repo, 2)
    result = deploy(*args, "--canary", "10%", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    # THEN the plan names the canary, the new archive is uploaded and the manifest published
    (canary,) = document["plan"]["canaries"]
    second = canary["target_model"]
    assert canary | {"target_model": None} == {
        "name": "addsub",
        "state": "new",
        "percent": 10,
        "target_model": None,
        "live_target_model": live,
        "previous": None,
        "previous_percent": None,
    }
    publish = document["plan"]["actions"][-1]
    assert publish["action"] == "PublishManifest"
    assert publish["why"] == f"addsub canary 10% → {second}, live {live}"
    assert [upload["target_model"] for upload in document["uploads"]] == [second]
    assert document["manifest_published"]
    entry = published()["models"]["addsub"]
    assert entry["target_model"] == live
    assert entry["canary"]["target_model"] == second and entry["canary"]["percent"] == 10
    assert entry["canary"]["sha256"] == document["plan"]["models"][0]["sha256"]
    assert stored(live) and stored(second)

    # WHEN a third version goes up with a canary, THEN it replaces the canary; live stays
    new_version(repo, 3)
    text = deploy(*args, "--canary", "20")
    assert text.exit_code == 0, text.output
    flat = " ".join(text.stdout.split())
    entry = published()["models"]["addsub"]
    third = entry["canary"]["target_model"]
    assert f"addsub canary 20% → {third} (replaces {second}), live {live}" in flat
    assert entry["target_model"] == live and entry["canary"]["percent"] == 20
    assert stored(third)

    # WHEN the canary's own version goes up with another percent, THEN only that changes
    percent = deploy(*args, "--canary", "30%")
    assert percent.exit_code == 0, percent.output
    assert f"addsub canary 30% → {third} (was 20%), live {live}" in " ".join(percent.stdout.split())
    entry = published()["models"]["addsub"]
    assert entry["canary"]["target_model"] == third and entry["canary"]["percent"] == 30

    # WHEN the canary's own version goes up again without --canary, THEN it is kept as is
    again = deploy(*args, "--json")
    assert again.exit_code == 0, again.output
    kept = json.loads(again.stdout)
    assert kept["plan"]["canaries"][0]["state"] == "kept"
    assert kept["plan"]["models"][0]["action"] == "unchanged"
    assert not kept["manifest_published"]
    assert published()["models"]["addsub"] == entry

    # WHEN yet another version goes up without --canary, THEN it takes every call
    new_version(repo, 4)
    released = deploy(*args, "--json")
    assert released.exit_code == 0, released.output
    notes = " ".join(json.loads(released.stdout)["plan"]["notes"])
    assert f"its canary {third} is dropped" in notes
    final = published()["models"]["addsub"]
    assert "canary" not in final and final["target_model"] not in (live, second, third)


def test_canary_on_another_hosting_or_out_of_range_is_refused(aws: Path, tmp_path: Path) -> None:
    repo = repository(tmp_path)
    args = ["up", "--stage", "canary", "--repository", repo, "--package-dir", tmp_path / "out"]
    other = deploy(*args, "--hosting", "single-model", "--canary", "10%", "--dry-run")
    assert other.exit_code == 1, other.output
    flat = " ".join(other.output.split())
    assert "--canary" in flat and "needs a multi-model endpoint" in flat
    assert "hosts single-model" in flat and "DeploymentConfig" in flat
    assert "Traceback" not in other.output
    for wrong in ("75%", "0", "ten"):
        refused = deploy(*args, "--canary", wrong, "--dry-run")
        assert refused.exit_code == 1, refused.output
        flat = " ".join(refused.output.split())
        assert f"--canary: canary {wrong!r} is not a percent above 0 and at most 50" in flat
    per_model = deploy("up", "--stage", "percent", "--repository", repo, "--dry-run")
    assert per_model.exit_code != 0
    flat = " ".join(per_model.output.split())
    assert "models.addsub.canary" in flat and "50" in flat, flat
    assert "Traceback" not in per_model.output
