"""`deploy up --local` honours its flags: --stage picks deploy.toml's repository,
--dry-run plans against what the running endpoint publishes and changes nothing
(models it would drop shown as removed), every stage is reported, and
`down --local --json` answers in JSON. The real tritonserver serves the models.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from deploy.cli import app
from tests.conftest import EXAMPLES

pytestmark = [pytest.mark.triton, pytest.mark.slow]


def deploy(*args: str | Path) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


def copy_models(root: Path, *names: str) -> Path:
    for name in names:
        shutil.copytree(EXAMPLES / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_local_dry_run_shows_models_it_would_drop_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "80")
    both = copy_models(tmp_path / "both", "addsub", "strings")
    only = copy_models(tmp_path / "only", "addsub")
    (tmp_path / "deploy.toml").write_text(
        f'[stages.demo]\nrepository = "{both}"\npackage_dir = "build/demo"\nlocal_port = 0\n'
    )
    monkeypatch.setenv("DEPLOY_CONFIG", str(tmp_path / "deploy.toml"))
    store = tmp_path / ".deploy" / "local" / "local" / "store"
    try:
        # GIVEN the endpoint serves the stage's repository (--stage picks it in deploy.toml)
        first = deploy("up", "--local", "--stage", "demo", "--timeout", "120")
        assert first.exit_code == 0, first.output
        for stage in ("validate:", "package:", "plan:", "upload:", "provision:", "wait:"):
            assert f"] {stage}" in first.stderr, stage
        assert "] smoke: 2 new or changed model(s)" in first.stderr
        assert "] publish: the manifest" in first.stderr
        assert (tmp_path / "build" / "demo" / "manifest.json").is_file()
        published = (store / "manifest.json").read_bytes()
        assert set(json.loads(published)["models"]) == {"addsub", "strings"}
        archives = sorted(p.name for p in store.iterdir())
        state = (tmp_path / ".deploy" / "local" / "local.json").read_bytes()

        # WHEN a dry run of a repository without `strings`
        args = ["up", "--local", "--dry-run", "--repository", only, "--package-dir", "build/only"]
        dry = deploy(*args, "--json")
        assert dry.exit_code == 0, dry.output
        document = json.loads(dry.stdout)
        # THEN the plan compares with what the endpoint publishes: strings would go
        assert document["dry_run"] is True and document["manifest_published"] is False
        actions = {m["name"]: m["action"] for m in document["plan"]["models"]}
        assert actions == {"addsub": "unchanged", "strings": "removed"}
        assert document["plan"]["infra_action"] == "none"  # it is running
        assert document["uploads"] == [] and document["smoke"] == []
        # AND nothing changed: manifest, store, process
        assert (store / "manifest.json").read_bytes() == published
        assert sorted(p.name for p in store.iterdir()) == archives
        assert (tmp_path / ".deploy" / "local" / "local.json").read_bytes() == state
        text = deploy(*args)
        assert text.exit_code == 0, text.output
        assert "removed: strings" in text.stdout and "dry run: nothing was changed" in text.stdout
        status = json.loads(deploy("status", "--local", "--json").stdout)
        assert any(t.startswith("strings-") for t in status["available"])
    finally:
        down = deploy("down", "--local", "--json")
    assert down.exit_code == 0, down.output
    stopped = json.loads(down.stdout)
    assert (stopped["endpoint_name"], stopped["stopped"]) == ("local", True)
    assert Path(stopped["triton_log"]).is_file()  # kept after the stop


def test_local_timeout_bounds_the_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    only = copy_models(tmp_path / "only", "addsub")
    # WHEN the endpoint may take 0.1 s to start (it needs more)
    result = deploy(
        "up",
        "--local",
        "--repository",
        only,
        "--package-dir",
        "build",
        "--timeout",
        "0.1",
        "--port",
        "0",
    )
    # THEN up stops, naming the limit, and leaves nothing running
    assert result.exit_code == 1, result.output
    assert "within 0.1 s (--timeout)" in result.output or "exited while starting" in result.output
    assert not (tmp_path / ".deploy" / "local" / "local.json").exists()
    status = json.loads(deploy("status", "--local", "--json").stdout)
    assert status["status"] == "NotRunning"
