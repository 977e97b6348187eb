"""`deploy promote/rollback --local` on the local endpoint's manifest (what `deploy up
--local` publishes), and its conditional publish: a file changed since it was read is
not overwritten."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.client import manifest as contract
from deploy.lifecycle import release
from deploy.lifecycle.local_provider import LocalProvider
from deploy.lifecycle.manifest_writes import CONFLICT, ManifestConflictError
from deploy.local.state import STATE_DIR
from tests.functional.test_release_canary import NEW, OLD, canary_manifest


def local_manifest(root: Path, name: str) -> Path:
    path = LocalProvider(name, state_dir=root / STATE_DIR).store_dir / "manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(canary_manifest(percent=5)), encoding="utf-8")
    return path


def test_cli_promote_and_rollback_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the local endpoints' state is under ./.deploy/local
    runner = CliRunner()
    promoted = local_manifest(tmp_path, "rel-promote")
    done = runner.invoke(app, ["promote", "alpha", "--local", "--endpoint-name", "rel-promote"])
    assert done.exit_code == 0, done.output
    assert f"alpha: canary promoted; every call goes to {NEW} (was 5% to the canary)" in (
        " ".join(done.output.split())
    )
    alpha = json.loads(promoted.read_text())["models"]["alpha"]
    assert alpha["target_model"] == NEW and "canary" not in alpha

    rolled = local_manifest(tmp_path, "rel-rollback")
    done = runner.invoke(
        app, ["rollback", "alpha", "--local", "--endpoint-name", "rel-rollback", "--json"]
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.output) == {
        "model": "alpha",
        "action": "rollback",
        "live": OLD,
        "dropped": NEW,
        "percent": 5,
    }
    alpha = json.loads(rolled.read_text())["models"]["alpha"]
    assert alpha["target_model"] == OLD and "canary" not in alpha
    # Nothing left to roll back: exit 1 with the reason.
    again = runner.invoke(app, ["rollback", "alpha", "--local", "--endpoint-name", "rel-rollback"])
    assert again.exit_code == 1 and "has no canary" in " ".join(again.output.split())
    # AWS flags do not apply to --local.
    refused = runner.invoke(app, ["rollback", "alpha", "--local", "--region", "us-east-1"])
    assert refused.exit_code != 0


def test_a_local_publish_based_on_a_stale_read_loses(tmp_path: Path) -> None:
    path = local_manifest(tmp_path, "rel-race")
    provider = LocalProvider("rel-race", state_dir=tmp_path / STATE_DIR)
    document = provider.published_manifest()
    change = release.rolled_back(contract.parse(document, "t"), "alpha", "t")
    other = json.dumps(canary_manifest(percent=40)).encode()
    path.write_bytes(other)  # another `deploy up --local` published meanwhile
    with pytest.raises(ManifestConflictError) as lost:
        provider.publish_manifest(contract.dump(change))
    assert lost.value.message == CONFLICT and str(path) in str(lost.value)
    assert path.read_bytes() == other
    # A fresh read is a fresh basis: publishing then works, and again after that.
    fresh = LocalProvider("rel-race", state_dir=tmp_path / STATE_DIR)
    release.end_canary(fresh, "alpha", "rollback", where="t")
    fresh.publish_manifest(contract.dump(contract.parse(canary_manifest(), "t")))
    assert json.loads(path.read_text())["models"]["alpha"]["canary"]["percent"] == 10


def test_up_watch_is_for_aws_canaries_only() -> None:
    refused = CliRunner().invoke(app, ["up", "--local", "--watch"])
    assert refused.exit_code == 2
    assert "--watch does not apply to --local" in " ".join(refused.output.split())
