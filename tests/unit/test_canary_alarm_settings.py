"""`[stages.X.rollout]`'s canary alarm settings and the alarms' names."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.config import load_settings
from deploy.errors import ConfigError
from deploy.lifecycle.canary_alarms import (
    CanaryThresholds,
    alarm_definitions,
    alarm_name,
    alarm_prefix,
)


def test_settings_come_from_the_stage_rollout_table(tmp_path: Path) -> None:
    config = tmp_path / "deploy.toml"
    config.write_text(
        "[stages.prod.rollout]\ncanary_max_error_rate = 0.01\ncanary_max_p99_ms = 120\n"
        "canary_window_s = 900\n[stages.other]\n",
        encoding="utf-8",
    )
    settings = load_settings(stage="prod", config_file=config)
    assert CanaryThresholds.of(settings.rollout) == CanaryThresholds(0.01, 120.0, 900)
    default = load_settings(stage="other", config_file=config)
    assert CanaryThresholds.of(default.rollout) == CanaryThresholds(0.05, 1000.0, 300)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("canary_window_s = 90", "canary_window_s"),  # CloudWatch periods: multiples of 60
        ("canary_window_s = 0", "canary_window_s"),
        ("canary_max_error_rate = 1.5", "canary_max_error_rate"),
        ("canary_max_p99_ms = 0", "canary_max_p99_ms"),
    ],
)
def test_bad_values_name_the_setting(tmp_path: Path, line: str, field: str) -> None:
    config = tmp_path / "deploy.toml"
    config.write_text(f"[stages.prod.rollout]\n{line}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as bad:
        load_settings(stage="prod", config_file=config)
    assert field in str(bad.value)


def test_names_keep_endpoints_apart_and_fit_cloudwatch() -> None:
    # The rule matches a prefix: one endpoint's may not be the start of another's.
    assert not alarm_name("shop-2", "m", "t", "error-rate").startswith(alarm_prefix("shop"))
    long = alarm_name("e", "m" * 200, "t" * 100, "p99-latency")
    assert len(long) <= 255 and long.startswith(alarm_prefix("e"))
    assert long != alarm_name("e", "m" * 200, "u" * 100, "p99-latency")
    requests = alarm_definitions("e", "m", "t", CanaryThresholds(0.05, 500, 300))
    assert [r["AlarmName"] for r in requests] == [
        "deploy-canary-e/m/t/error-rate",
        "deploy-canary-e/m/t/p99-latency",
    ]
