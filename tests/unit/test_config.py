"""Configuration precedence: flag > DEPLOY_* env > deploy.toml stage > default."""

from pathlib import Path

import pytest

from deploy.config import load_settings
from deploy.errors import ConfigError


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_apply_without_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert settings.stage == "dev"
    assert settings.region == "us-east-1"


def test_precedence_flag_env_stage_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write(
        tmp_path / "deploy.toml",
        '[default]\nregion = "eu-west-1"\nendpoint_name = "base"\n'
        '[stages.prod]\nregion = "eu-central-1"\ninstance_type = "ml.g5.2xlarge"\n',
    )
    settings = load_settings(stage="prod", config_file=config)
    assert (settings.region, settings.instance_type, settings.endpoint_name) == (
        "eu-central-1",
        "ml.g5.2xlarge",
        "base",
    )
    monkeypatch.setenv("DEPLOY_REGION", "ap-south-1")
    assert load_settings(stage="prod", config_file=config).region == "ap-south-1"
    assert load_settings(stage="prod", config_file=config, region="us-west-2").region == "us-west-2"
    assert load_settings(stage="prod", config_file=config, region=None).region == "ap-south-1"


def test_unknown_stage_names_known_ones(tmp_path: Path) -> None:
    config = write(tmp_path / "deploy.toml", '[stages.prod]\nregion = "eu-west-1"\n')
    with pytest.raises(ConfigError, match=r"stage 'staging' has no \[stages.staging\].*prod"):
        load_settings(stage="staging", config_file=config)


def test_unknown_field_is_an_error_naming_it(tmp_path: Path) -> None:
    config = write(tmp_path / "deploy.toml", "[default]\nregoin = 'x'\n")
    with pytest.raises(ConfigError, match="regoin"):
        load_settings(config_file=config)


def test_broken_toml_names_the_file(tmp_path: Path) -> None:
    config = write(tmp_path / "deploy.toml", "[default\n")
    with pytest.raises(ConfigError, match=r"deploy\.toml"):
        load_settings(config_file=config)


def test_stack_names_do_not_repeat_the_stage(tmp_path: Path) -> None:
    config = write(
        tmp_path / "deploy.toml",
        '[stages.staging]\nendpoint_name = "deploy-triton-staging"\n'
        '[stages.prod-eu]\nendpoint_name = "triton-prod-eu-1"\n'
        '[stages.dev]\nendpoint_name = "deploy-triton"\n'
        '[stages.pro]\nendpoint_name = "deploy-triton-prod"\n',
    )
    names = {
        stage: load_settings(stage=stage, config_file=config).stack_name("endpoint")
        for stage in ("staging", "prod-eu", "dev", "pro")
    }
    assert names == {
        "staging": "deploy-triton-staging-endpoint",
        "prod-eu": "triton-prod-eu-1-endpoint",
        "dev": "deploy-triton-dev-endpoint",
        "pro": "deploy-triton-prod-pro-endpoint",  # "pro" is not a part of the name
    }
