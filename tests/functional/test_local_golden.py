"""Golden requests gate `deploy up --local` against the real tritonserver.

GIVEN a repository whose model holds a golden case recorded with
`deploy invoke --record-golden` WHEN the model changes and `deploy up --local`
runs THEN a matching case lets the release publish, and a wrong expected
output stops it with exit 1, the differing output shown and the manifest unchanged.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.repository.golden import load_cases, write_case
from tests.conftest import EXAMPLES

pytestmark = [pytest.mark.triton, pytest.mark.slow]


def manifest_files(root: Path) -> dict[str, str]:
    store = root / ".deploy" / "local"
    return {
        str(path.relative_to(store)): path.read_text()
        for path in store.rglob("store/*.json")
        if path.is_file()
    }


def test_golden_cases_gate_deploy_up_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEPLOY_LOCAL_PORT", "0")  # any free port: the machine is shared
    repo = tmp_path / "models"
    repo.mkdir()
    shutil.copytree(EXAMPLES / "addsub", repo / "addsub")
    up_args = ["up", "--local", "--repository", str(repo), "--package-dir", "build", "--json"]
    record = ["invoke", "addsub", "--local", "-i", "in.npz", "--record-golden", "basic"]
    record += ["--repository", str(repo)]
    runner = CliRunner()
    up = runner.invoke(app, up_args)
    try:
        assert up.exit_code == 0, up.output
        # WHEN a call on the current version is recorded as a golden case
        x = np.arange(4, dtype=np.float32).reshape(1, 4)
        np.savez(tmp_path / "in.npz", INPUT0=x, INPUT1=x * 2)
        recorded = runner.invoke(
            app,
            record,
        )
        assert recorded.exit_code == 0, recorded.output
        (case,) = load_cases(repo / "addsub")
        assert np.array_equal(case.outputs["OUTPUT0"], x * 3)
        again = runner.invoke(
            app,
            record,
        )
        assert again.exit_code == 1 and "--force" in again.output
        assert runner.invoke(app, ["validate", str(repo)]).exit_code == 0

        # AND the model changes (a new TargetModel) with its answers the same
        model_py = repo / "addsub" / "1" / "model.py"
        model_py.write_text(model_py.read_text() + "\n# same answers, new version\n")
        matched = runner.invoke(app, up_args)
        assert matched.exit_code == 0, matched.output
        (smoked,) = json.loads(matched.output)["smoke"]
        assert smoked["golden"] == ["basic"] and smoked["ok"]
        published = manifest_files(tmp_path)
        assert any(smoked["target_model"] in text for text in published.values())

        # WHEN the expected output is wrong and the model changes again
        wrong = x * 3
        wrong[0, 2] = 100.0
        write_case(
            repo / "addsub",
            "basic",
            dict(case.inputs),
            {"OUTPUT0": wrong, "OUTPUT1": case.outputs["OUTPUT1"]},
            force=True,
        )
        model_py.write_text(model_py.read_text() + "# another version\n")
        stopped = runner.invoke(app, up_args[:-1])
        # THEN the release stops, shows the difference, and publishes nothing
        assert stopped.exit_code == 1, stopped.output
        text = " ".join(stopped.output.split())
        assert "case basic, OUTPUT0: 1 of 4 values differ" in text
        assert "max abs diff 94" in text
        assert "first at [0, 2]: expected 100.0, got 6.0" in text
        assert "Traceback" not in stopped.output
        assert manifest_files(tmp_path) == published
    finally:
        down = runner.invoke(app, ["down", "--local"])
    assert down.exit_code == 0, down.output
