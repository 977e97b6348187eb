"""`[stages.X.rollout]` in deploy.toml: what SageMaker accepts, and errors that name the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deploy.config import load_settings
from deploy.errors import ConfigError
from deploy.guardrails import policy_for


def settings_from(tmp_path: Path, rollout: str, instance_type: str = "ml.g5.xlarge") -> Any:
    config = tmp_path / "deploy.toml"
    config.write_text(
        f'[stages.prod]\nendpoint_name = "shop"\ninstance_type = "{instance_type}"\n\n'
        f"[stages.prod.rollout]\n{rollout}\n",
        encoding="utf-8",
    )
    return load_settings(stage="prod", config_file=config)


def error_for(tmp_path: Path, rollout: str) -> str:
    with pytest.raises(ConfigError) as caught:
        settings_from(tmp_path, rollout)
    return str(caught.value)


def test_a_canary_of_a_percentage_or_instances_becomes_sagemakers_capacity_size(
    tmp_path: Path,
) -> None:
    percent = policy_for(settings_from(tmp_path, 'traffic = "canary"\ncanary_size = "15%"'))
    assert (percent.routing, percent.size) == ("CANARY", ("CAPACITY_PERCENT", 15))
    count = policy_for(settings_from(tmp_path, 'traffic = "canary"\ncanary_size = 2'))
    assert (count.routing, count.size) == ("CANARY", ("INSTANCE_COUNT", 2))
    linear = policy_for(settings_from(tmp_path, 'traffic = "linear"\nlinear_step = "20%"'))
    assert (linear.routing, linear.size) == ("LINEAR", ("CAPACITY_PERCENT", 20))
    once = policy_for(settings_from(tmp_path, 'traffic = "all-at-once"'))
    assert (once.routing, once.size, once.fallback) == ("ALL_AT_ONCE", None, "")


def test_the_default_is_the_linear_half_fleet_shift_the_stacks_always_had(tmp_path: Path) -> None:
    policy = policy_for(settings_from(tmp_path, ""))
    assert (policy.routing, policy.size) == ("LINEAR", ("CAPACITY_PERCENT", 50))
    assert (policy.wait_interval_s, policy.termination_wait_s) == (300, 300)
    assert policy.maximum_execution_s == 3600
    assert policy.alarms == ("shop-Invocation5XXErrors", "shop-ModelLatencyP99")


def test_named_alarms_join_the_stages_own(tmp_path: Path) -> None:
    policy = policy_for(settings_from(tmp_path, 'alarms = ["slo-burn", "shop-ModelLatencyP99"]'))
    assert policy.alarms == ("shop-Invocation5XXErrors", "shop-ModelLatencyP99", "slo-burn")


@pytest.mark.parametrize(
    ("rollout", "expected"),
    [
        (
            'canary_size = "60%"',
            "rollout.canary_size: Value error, canary_size 60% is outside "
            "SageMaker's 1-50% of the fleet",
        ),
        (
            'linear_step = "5%"',
            "rollout.linear_step: Value error, linear_step 5% is outside "
            "SageMaker's 10-50% of the fleet",
        ),
        ('canary_size = "ten"', "canary_size 'ten' is neither a percentage nor an instance count"),
        ("canary_size = 0", "canary_size 0 is not an instance count: use 1 or more"),
        (
            'traffic = "blue-green"',
            "rollout.traffic: Input should be 'all-at-once', 'canary' or 'linear'",
        ),
        (
            "wait_interval_s = 4000",
            "rollout.wait_interval_s: Input should be less than or equal to 3600",
        ),
        (
            "maximum_execution_s = 300",
            "rollout.maximum_execution_s: Input should be greater than or equal to 600",
        ),
        ('trafic = "canary"', "rollout.trafic: Extra inputs are not permitted"),
        (
            'linear_step = "10%"\nmaximum_execution_s = 1800',
            "maximum_execution_s (1800) must exceed the update's waits (10 x wait_interval_s "
            "300 + termination_wait_s 300 = 3300 s): raise maximum_execution_s or shorten",
        ),
        (
            "alarms = [" + ", ".join(f'"a{i}"' for i in range(9)) + "]",
            "9 alarms named; SageMaker watches at most 10 and the stage's own 2 are always "
            "among them: name at most 8",
        ),
    ],
)
def test_a_setting_sagemaker_would_refuse_is_refused_naming_the_field_and_the_fix(
    tmp_path: Path, rollout: str, expected: str
) -> None:
    message = error_for(tmp_path, rollout)
    assert expected in message
    assert "deploy.toml" in message


def test_the_environment_sets_rollout_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEPLOY_ROLLOUT__TRAFFIC", "canary")
    monkeypatch.setenv("DEPLOY_ROLLOUT__CANARY_SIZE", "25%")
    policy = policy_for(settings_from(tmp_path, ""))
    assert (policy.routing, policy.size) == ("CANARY", ("CAPACITY_PERCENT", 25))


def test_inf1_and_serverless_say_what_sagemaker_runs_instead(tmp_path: Path) -> None:
    inf1 = settings_from(tmp_path, 'traffic = "linear"', instance_type="ml.inf1.2xlarge")
    policy = policy_for(inf1)
    assert (policy.routing, policy.wait_interval_s) == ("ALL_AT_ONCE", 0)
    assert "no deployment guardrails on ml.inf1" in policy.fallback
    serverless = policy_for(settings_from(tmp_path, 'traffic = "canary"'), on_instances=False)
    assert serverless.routing == "ALL_AT_ONCE" and "no instance fleet" in serverless.fallback
    asked_once = policy_for(settings_from(tmp_path, 'traffic = "all-at-once"'), on_instances=False)
    assert asked_once.fallback == ""
