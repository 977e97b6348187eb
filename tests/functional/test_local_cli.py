"""`deploy up --local`, `deploy status --local`, `deploy down --local` end to end."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deploy.cli import app
from tests.conftest import EXAMPLES

pytestmark = [pytest.mark.triton, pytest.mark.slow]


def test_up_status_down_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("deploy.packaging")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEPLOY_LOCAL_PORT", "0")  # any free port: the machine is shared
    runner = CliRunner()
    up = runner.invoke(
        app,
        ["up", "--local", "--repository", str(EXAMPLES), "--package-dir", "build", "--json"],
    )
    try:
        assert up.exit_code == 0, up.output
        document = json.loads(up.output)
        smoked = {s["name"] for s in document["smoke"]}
        assert smoked == {p.parent.name for p in EXAMPLES.glob("*/config.pbtxt")}
        state = json.loads((tmp_path / ".deploy" / "local" / "local.json").read_text())
        assert document["url"] == state["url"]

        status = runner.invoke(app, ["status", "--local", "--json"])
        assert status.exit_code == 0, status.output
        listing = json.loads(status.output)
        assert listing["status"] == "InService"
        assert {m["target_model"] for m in listing["loaded"]} == set(listing["available"])

        again = runner.invoke(
            app,
            ["up", "--local", "--repository", str(EXAMPLES), "--package-dir", "build", "--json"],
        )
        assert again.exit_code == 0, again.output
        assert json.loads((tmp_path / ".deploy" / "local" / "local.json").read_text()) == state

        # WHEN the text output's boto3 snippet is pasted THEN the model answers.
        shown = runner.invoke(
            app, ["up", "--local", "--repository", str(EXAMPLES), "--package-dir", "build"]
        )
        assert shown.exit_code == 0, shown.output
        snippet = shown.output.split("call it with boto3:\n", 1)[1]
        printed: list[bytes] = []
        exec(snippet, {"print": printed.append})
        answer = json.loads(printed[0])
        assert [o["name"] for o in answer["outputs"]] == ["OUTPUT0", "OUTPUT1"]
    finally:
        down = runner.invoke(app, ["down", "--local"])
    assert down.exit_code == 0 and "stopped" in down.output
    with pytest.raises(ProcessLookupError):
        os.kill(state["pid"], 0)
    status = runner.invoke(app, ["status", "--local", "--json"])
    assert json.loads(status.output)["status"] == "NotRunning"


def test_serve_refuses_a_folder_that_is_no_store(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["serve", str(tmp_path), "--port", "0"])
    assert result.exit_code == 1
    assert "neither a model store" in result.output


def test_serve_packages_a_repository_given_as_store(tmp_path: Path) -> None:
    from deploy.local.modes.serve import resolve_store

    store = Path(resolve_store(str(EXAMPLES), package_dir=tmp_path / "store"))
    manifest = json.loads((store / "manifest.json").read_text())
    assert set(manifest["models"]) == {p.parent.name for p in EXAMPLES.glob("*/config.pbtxt")}
    # A store is served as it is.
    assert resolve_store(str(store)) == str(store)


def test_serve_accepts_a_repository_of_python_models_without_config_files(
    tmp_path: Path,
) -> None:
    # python_backend's auto_complete example: model.py completes each config.
    from deploy.local.modes.serve import resolve_store

    repo = Path(__file__).resolve().parents[1] / "corpus" / "repos" / "pb_auto_complete"
    assert not list(repo.glob("*/config.pbtxt"))
    store = Path(resolve_store(str(repo), package_dir=tmp_path / "store"))
    manifest = json.loads((store / "manifest.json").read_text())
    assert set(manifest["models"]) == {"batch_auto_complete", "nobatch_auto_complete"}
