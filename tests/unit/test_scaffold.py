"""`deploy init`: a project's files, its defaults, and nothing overwritten without --force."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.config import load_settings
from deploy.scaffold import scaffold
from deploy.validation import validate_repository


def run(*args: str | Path) -> str:
    result = CliRunner().invoke(app, [str(arg) for arg in args])
    assert result.exit_code == 0, result.output
    return result.output


def test_init_writes_a_project_that_loads_validates_and_names_itself(tmp_path: Path) -> None:
    project = tmp_path / "Fraud_Scoring"
    output = run("init", project)
    for name in (
        "deploy.toml",
        "cdk.json",
        ".github/workflows/release.yml",
        "models/addsub/config.pbtxt",
        "models/addsub/1/model.py",
    ):
        assert f"wrote {project / name}" in output
    assert "deploy validate models" in output and "deploy up --dry-run" in output
    # The stages read back with this project's names, not this repository's.
    config = project / "deploy.toml"
    endpoints = {
        stage: load_settings(stage=stage, config_file=config).endpoint_name
        for stage in ("dev", "staging", "prod")
    }
    assert endpoints == {
        "dev": "fraud-scoring",
        "staging": "fraud-scoring-staging",
        "prod": "fraud-scoring-prod",
    }
    prod = load_settings(stage="prod", config_file=config)
    assert prod.repository == Path("models")
    assert (prod.infra.min_instance_count, prod.infra.max_instance_count) == (2, 6)
    assert validate_repository(project / "models").errors == []
    # cdk.json runs the packaged app with whichever python the venv gives: no path of ours.
    cdk = json.loads((project / "cdk.json").read_text())
    assert cdk["app"] == "python -m deploy_infra.app"
    assert str(Path.cwd()) not in (project / "cdk.json").read_text()
    workflow = (project / ".github/workflows/release.yml").read_text()
    assert "make " not in workflow and ".venv/bin" not in workflow
    assert 'MODEL_REPOSITORY: "models"' in workflow
    assert "triton-sagemaker-deploy[cli,infra]==" in workflow
    ignored = (project / ".gitignore").read_text().splitlines()
    assert {"build/", "cdk.out/", ".deploy/"} <= set(ignored)


def test_init_keeps_existing_files_without_force_and_replaces_them_with_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "deploy.toml").write_text("# mine\n")
    (tmp_path / ".gitignore").write_text("secrets/\nbuild/")  # no final newline
    output = run("init", tmp_path)
    assert f"kept {tmp_path / 'deploy.toml'} (it exists; --force replaces it)" in output
    assert (tmp_path / "deploy.toml").read_text() == "# mine\n"
    lines = (tmp_path / ".gitignore").read_text().splitlines()
    assert lines[:2] == ["secrets/", "build/"] and lines.count("build/") == 1
    assert "cdk.out/" in lines and ".deploy/" in lines
    again = scaffold(tmp_path)
    assert again.written == [] and again.gitignore_added == []
    assert "deploy.toml" in again.kept and "models/addsub/1/model.py" not in again.kept
    forced = scaffold(tmp_path, force=True)
    assert "deploy.toml" in forced.written
    assert "[stages.prod]" in (tmp_path / "deploy.toml").read_text()


@pytest.mark.parametrize("name", ["models", "model_repository"])
def test_init_uses_the_repository_it_finds_and_writes_no_skeleton(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / name / "mine" / "1").mkdir(parents=True)
    result = scaffold(tmp_path / ".", endpoint_name="scoring")
    assert result.repository == name and result.repository_found
    assert not any(path.startswith(f"{name}/") for path in result.written)
    assert not (tmp_path / name / "addsub").exists()
    settings = load_settings(config_file=tmp_path / "deploy.toml")
    assert (settings.repository, settings.endpoint_name) == (Path(name), "scoring")


def test_defaults_come_from_the_project_folder_not_this_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "acme.vision-2"
    (project / "model_repository").mkdir(parents=True)
    monkeypatch.chdir(project)
    monkeypatch.delenv("DEPLOY_CONFIG")
    settings = load_settings()
    assert settings.endpoint_name == "acme-vision-2"
    assert settings.repository == Path("model_repository")
    assert settings.stack_name("endpoint") == "acme-vision-2-dev-endpoint"
    # DEPLOY_CONFIG names the project by its folder.
    monkeypatch.setenv("DEPLOY_CONFIG", str(tmp_path / "Other Project" / "deploy.toml"))
    assert load_settings().endpoint_name == "other-project"


def test_a_new_project_runs_the_newest_image_that_the_catalogue_pairs_with_an_ami(
    tmp_path: Path,
) -> None:
    from deploy.catalogue.images import NEW_STAGE_TRITON_VERSION, image, known_tags

    scaffold(tmp_path / "proj")
    for stage in ("dev", "staging", "prod"):
        settings = load_settings(stage=stage, config_file=tmp_path / "proj" / "deploy.toml")
        assert settings.infra.triton_version == NEW_STAGE_TRITON_VERSION
    assert known_tags()[-1] == NEW_STAGE_TRITON_VERSION
    assert image(NEW_STAGE_TRITON_VERSION).inference_ami is not None
