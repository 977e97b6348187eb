"""The router layouts build `requirements.txt` environments, and `deploy up --local`
serves the stage's hosting mode.

GIVEN a repository with a python model that imports a package its
      requirements.txt names, and one without requirements
WHEN  a single-model stage is packaged, and brought up with `deploy up --local`
THEN  the one archive holds the model's environment for the image's Python, the
      local endpoint serves the stage's mode (the router, not per-model archives)
      on the real tritonserver, the model imports what its environment ships while
      the other sees the image's packages only, and a changed model restarts the
      endpoint on the new archive.
"""

from __future__ import annotations

import gzip
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.repository import parse_config
from tests.functional.test_envs import PACKAGE, model

STAGE = '[stages.routed]\nhosting = "single-model"\n'


def _repository(root: Path) -> Path:
    repo = root / "repo"
    model(repo, "packaged", requirements=f"{PACKAGE}\n")
    model(repo, "bare")
    return repo


def test_the_router_archive_holds_each_models_environment(tmp_path: Path) -> None:
    from deploy.hosting import mode_named
    from deploy.lifecycle import stages

    repo = _repository(tmp_path)
    package = stages.package(
        mode_named("single-model"), repo, tmp_path / "out", triton_version="24.11"
    )

    assert package.archive is not None
    with tarfile.open(package.archive.path) as tar:
        names = tar.getnames()
        config = parse_config(tar.extractfile("packaged/config.pbtxt").read().decode())  # type: ignore[union-attr]
        env = tar.extractfile("packaged/python-env.tar.gz").read()  # type: ignore[union-attr]
    assert "bare/python-env.tar.gz" not in names and "router/config.pbtxt" in names
    value = config.parameters["EXECUTION_ENV_PATH"].string_value
    assert value == "$$TRITON_MODEL_DIRECTORY/python-env.tar.gz"
    assert b"lib/python3.12/site-packages/six.py" in gzip.decompress(env)  # 24.11's Python
    # The model's digest covers its environment: the plan sees it change with it.
    entry = package.document["models"]["packaged"]
    assert entry["source_digest"] and entry["bytes"] > len(env)


def _info(url: str, name: str) -> dict[str, Any]:
    from deploy.client import Endpoint

    with Endpoint("local", endpoint_url=url) as endpoint:
        result = endpoint.infer(name, {"X": np.zeros((1,), np.float32)})
    document: dict[str, Any] = json.loads(result["INFO"][0])
    return document


@pytest.mark.triton
@pytest.mark.slow
def test_up_local_serves_the_stages_single_model_layout_with_its_environments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repository(tmp_path)
    (tmp_path / "deploy.toml").write_text(STAGE, encoding="utf-8")
    monkeypatch.setenv("DEPLOY_CONFIG", str(tmp_path / "deploy.toml"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEPLOY_LOCAL_PORT", "0")  # any free port: the machine is shared
    runner = CliRunner()
    up = ["up", "--local", "--stage", "routed", "--repository", str(repo)]
    up += ["--package-dir", "build", "--json"]
    state_file = tmp_path / ".deploy" / "local" / "local.json"
    first = runner.invoke(app, up)
    try:
        assert first.exit_code == 0, first.output
        document = json.loads(first.output)
        assert document["plan"]["hosting"] == "single-model"
        assert {s["name"] for s in document["smoke"]} == {"packaged", "bare"}
        state = json.loads(state_file.read_text())
        served = Path(state["store"])
        assert served.parent.name == "served" and (served / "router").is_dir()
        published = tmp_path / ".deploy" / "local" / "local" / "store" / "inf1" / "manifest.json"
        assert json.loads(published.read_text())["hosting"] == "single-model"

        # THEN the model imports six from its environment (24.09: Python 3.10)
        packaged = _info(state["url"], "packaged")
        assert packaged["six"] == "1.17.0" and packaged["python"].startswith("3.10.")
        assert _info(state["url"], "bare")["six"].startswith("missing")

        # WHEN nothing changed THEN the endpoint keeps running as it is
        again = runner.invoke(app, up)
        assert again.exit_code == 0, again.output
        assert json.loads(again.output)["plan"]["infra_action"] == "none"
        assert json.loads(state_file.read_text())["pid"] == state["pid"]

        # WHEN a model changes THEN the endpoint restarts on the new archive
        with (repo / "bare" / "1" / "model.py").open("a") as script:
            script.write("\n# changed\n")
        changed = runner.invoke(app, up)
        assert changed.exit_code == 0, changed.output
        plan = json.loads(changed.output)["plan"]
        assert plan["infra_action"] == "update"
        assert {m["name"]: m["action"] for m in plan["models"]}["bare"] == "changed"
        restarted = json.loads(state_file.read_text())
        assert restarted["pid"] != state["pid"] and restarted["store"] != state["store"]
        assert not served.exists()  # the older extraction is removed
        assert _info(restarted["url"], "packaged")["six"] == "1.17.0"
    finally:
        down = runner.invoke(app, ["down", "--local"])
    assert down.exit_code == 0, down.output
    with pytest.raises(ProcessLookupError):
        os.kill(restarted["pid"], 0)
