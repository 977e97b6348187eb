"""`async_lane`: only a multi-model stage on a GPU or CPU instance type has one."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.config import ASYNC_INCAPABLE_FAMILIES, load_settings
from deploy.errors import ConfigError
from deploy.hosting import mode_for
from deploy.hosting.async_lane import LANED_MODE, endpoint_name, manifest_sections
from deploy.hosting.rules import NO_MME_FAMILIES


def test_lane_comes_from_the_stage_section_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "deploy.toml"
    config.write_text("[stages.prod]\nasync_lane = true\n", encoding="utf-8")
    assert load_settings(stage="prod", config_file=config).async_lane is True
    assert load_settings(stage="dev", config_file=config).async_lane is False
    monkeypatch.setenv("DEPLOY_ASYNC_LANE", "true")
    assert load_settings(stage="dev", config_file=config).async_lane is True


@pytest.mark.parametrize("hosting", ["single-model", "async", "serverless"])
def test_lane_needs_hosting_multi_model(tmp_path: Path, hosting: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(
            config_file=_empty(tmp_path),
            instance_type="ml.m5.xlarge",
            hosting=hosting,
            async_lane=True,
        )
    assert "async_lane" in str(raised.value) and repr(hosting) in str(raised.value)


@pytest.mark.parametrize("instance", ["ml.inf1.xlarge", "ml.inf2.xlarge", "ml.trn1.2xlarge"])
def test_lane_needs_an_async_capable_instance(tmp_path: Path, instance: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(config_file=_empty(tmp_path), instance_type=instance, async_lane=True)
    message = str(raised.value)
    assert "async_lane" in message and instance in message and "GPU or CPU" in message


def test_a_laned_stage_is_multi_model_with_the_lanes_manifest_section(tmp_path: Path) -> None:
    settings = load_settings(
        config_file=_empty(tmp_path), endpoint_name="ep", instance_type="ml.g5.xlarge"
    )
    assert mode_for(settings).name == "multi-model" and mode_for(settings) is not LANED_MODE
    laned = settings.model_copy(update={"async_lane": True})
    assert mode_for(laned) is LANED_MODE and LANED_MODE.name == "multi-model"
    assert endpoint_name(laned) == "ep-async"
    assert manifest_sections(laned, "store") == {
        "async_lane": {
            "endpoint_name": "ep-async",
            "input_prefix": "s3://store/async/ep-async/input/",
            "output_prefix": "s3://store/async/ep-async/output/",
            "failure_prefix": "s3://store/async/ep-async/failure/",
        }
    }


def test_the_settings_refuse_the_families_the_hosting_rules_do() -> None:
    assert set(ASYNC_INCAPABLE_FAMILIES) == set(NO_MME_FAMILIES)


def _empty(tmp_path: Path) -> Path:
    config = tmp_path / "deploy.toml"
    config.write_text("", encoding="utf-8")
    return config
