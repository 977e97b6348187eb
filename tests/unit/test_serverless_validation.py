"""Serverless limits as diagnostics, and the serverless settings' own validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deploy.config import DeploySettings, load_settings
from deploy.errors import ConfigError
from deploy.repository import load_repository
from deploy.validation.serverless import (
    PAYLOAD_LIMIT_BYTES,
    START_WARNING_BYTES,
    require_cpu_instance,
    serverless_diagnostics,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "model_packages" / "examples"
SETTINGS_FILE = "deploy.toml"

CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: {batch}
input [{{ name: "IN" data_type: {dtype} dims: [ {dims} ] }}]
output [{{ name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }}]
{extra}
"""


def write_model(
    root: Path,
    name: str,
    *,
    batch: int = 8,
    dtype: str = "TYPE_FP32",
    dims: str = "4",
    extra: str = "",
    weights: int = 0,
) -> None:
    folder = root / name
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(
        CONFIG.format(name=name, batch=batch, dtype=dtype, dims=dims, extra=extra)
    )
    (folder / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    if weights:
        with (folder / "1" / "weights.bin").open("wb") as handle:
            handle.truncate(weights)  # sparse: size without the disk


def settings(**infra: object) -> DeploySettings:
    return load_settings(instance_type="ml.m5.xlarge", infra=infra or None)


def findings(root: Path, stage: DeploySettings, **kwargs: object) -> list[tuple[str, str, str]]:
    diagnostics = serverless_diagnostics(
        load_repository(root), stage, settings_file=SETTINGS_FILE, **kwargs
    )
    return [(d.severity, d.model, d.field) for d in diagnostics]


def test_the_examples_fit_a_serverless_stage() -> None:
    repository = load_repository(EXAMPLES)
    assert serverless_diagnostics(repository, settings(), settings_file=SETTINGS_FILE) == []


def test_a_gpu_instance_type_is_an_error_naming_the_setting(tmp_path: Path) -> None:
    write_model(tmp_path, "small")
    stage = load_settings(instance_type="ml.g5.xlarge")
    (found,) = serverless_diagnostics(load_repository(tmp_path), stage, settings_file="cfg.toml")
    assert (found.severity, found.file, found.field) == (
        "error",
        "cfg.toml",
        "instance_type (--instance)",
    )
    assert "CPU only" in found.message and "ml.g5.xlarge" in found.message
    assert "ml.m5.xlarge" in found.fix


def test_the_settings_check_refuses_a_gpu_instance_type_by_name() -> None:
    with pytest.raises(ConfigError, match="CPU only") as raised:
        require_cpu_instance(load_settings(instance_type="ml.g4dn.xlarge"), where="--instance")
    assert raised.value.where == "--instance" and "ml.m5.xlarge" in (raised.value.fix or "")
    require_cpu_instance(load_settings(instance_type="ml.c5.large"))


def test_kind_gpu_and_listed_gpus_are_errors_naming_the_config(tmp_path: Path) -> None:
    write_model(tmp_path, "gpu", extra="instance_group [{ kind: KIND_GPU }]")
    write_model(tmp_path, "listed", extra="instance_group [{ kind: KIND_AUTO gpus: [0] }]")
    write_model(tmp_path, "cpu", extra="instance_group [{ kind: KIND_CPU count: 2 }]")
    diagnostics = serverless_diagnostics(
        load_repository(tmp_path), settings(), settings_file=SETTINGS_FILE
    )
    assert [(d.severity, d.model, d.field) for d in diagnostics] == [
        ("error", "gpu", "instance_group[0].kind"),
        ("error", "listed", "instance_group[0].gpus"),
    ]
    assert diagnostics[0].file == str(tmp_path / "gpu" / "config.pbtxt")
    assert "no GPU" in diagnostics[0].message


def test_model_files_against_the_memory_setting(tmp_path: Path) -> None:
    write_model(tmp_path, "big", weights=1500 * 1024 * 1024)
    # Over the memory: an error; over half of it: a warning; well under: nothing.
    assert findings(tmp_path, settings(serverless_memory_mb=1024)) == [
        ("error", "", "infra.serverless_memory_mb"),
        ("warning", "", "hosting"),  # and the archive would be large to start
    ]
    (memory, _) = serverless_diagnostics(
        load_repository(tmp_path), settings(serverless_memory_mb=2048), settings_file="x.toml"
    )
    assert memory.severity == "warning" and memory.file == "x.toml"
    assert "big 1.46 GB" in memory.message and "2048 MB" in memory.message
    assert "3072 MB" in memory.fix  # twice the files, rounded up to a step
    assert ("warning", "", "infra.serverless_memory_mb") not in findings(
        tmp_path, settings(serverless_memory_mb=6144)
    )


def test_start_budget_warning_names_the_archive_size(tmp_path: Path) -> None:
    write_model(tmp_path, "small")
    stage = settings()
    assert findings(tmp_path, stage, archive_bytes=START_WARNING_BYTES - 1) == []
    (found,) = serverless_diagnostics(
        load_repository(tmp_path),
        stage,
        settings_file=SETTINGS_FILE,
        archive_bytes=700 * 1024 * 1024,
    )
    assert found.severity == "warning"
    assert "the archive is 700.0 MB" in found.message and "3 minutes" in found.message
    assert "serverless_provisioned_concurrency" in found.fix


def test_full_batches_over_4_mb_are_warned_with_both_sizes(tmp_path: Path) -> None:
    # 64 x 3x224x224 FP32 = 38.5 MB per full batch; a -1 dim or BYTES is not knowable.
    write_model(tmp_path, "images", batch=64, dims="3, 224, 224")
    write_model(tmp_path, "ragged", batch=64, dims="-1, 224")
    write_model(tmp_path, "text", batch=64, dtype="TYPE_STRING", dims="1")
    write_model(tmp_path, "fits", batch=0, dims="1024, 1024")  # exactly 4 MB
    diagnostics = serverless_diagnostics(
        load_repository(tmp_path), settings(), settings_file=SETTINGS_FILE
    )
    assert [(d.severity, d.model, d.field) for d in diagnostics] == [
        ("warning", "images", "max_batch_size")
    ]
    (found,) = diagnostics
    assert "36.8 MB" in found.message and "4.0 MB" in found.message
    assert 'hosting = "async"' in found.fix
    assert PAYLOAD_LIMIT_BYTES == 4 * 1024 * 1024


def test_queueing_past_the_60_s_call_limit_is_warned(tmp_path: Path) -> None:
    write_model(
        tmp_path,
        "slow",
        extra="dynamic_batching { max_queue_delay_microseconds: 90000000 "
        "default_queue_policy { default_timeout_microseconds: 120000000 } }",
    )
    write_model(
        tmp_path,
        "quick",
        extra="dynamic_batching { max_queue_delay_microseconds: 500 "
        "default_queue_policy { default_timeout_microseconds: 30000000 } }",
    )
    assert findings(tmp_path, settings()) == [
        ("warning", "slow", "dynamic_batching.max_queue_delay_microseconds"),
        ("warning", "slow", "dynamic_batching.default_queue_policy.default_timeout_microseconds"),
    ]


# --- the settings -----------------------------------------------------------------------


def test_serverless_settings_default_to_sagemakers_sdk_defaults() -> None:
    infra = load_settings().infra
    assert (infra.serverless_memory_mb, infra.serverless_max_concurrency) == (2048, 5)
    assert infra.serverless_provisioned_concurrency is None


@pytest.mark.parametrize(
    ("infra", "field", "words"),
    [
        ({"serverless_memory_mb": 1500}, "infra.serverless_memory_mb", "1024, 2048"),
        ({"serverless_memory_mb": 8192}, "infra.serverless_memory_mb", "6144"),
        ({"serverless_max_concurrency": 0}, "infra.serverless_max_concurrency", "1"),
        ({"serverless_max_concurrency": 201}, "infra.serverless_max_concurrency", "200"),
        (
            {"serverless_max_concurrency": 3, "serverless_provisioned_concurrency": 4},
            "serverless_provisioned_concurrency (4)",
            "serverless_max_concurrency (3)",
        ),
    ],
)
def test_bad_serverless_settings_name_the_field(
    infra: dict[str, int], field: str, words: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(infra=infra)
    assert field in raised.value.message and words in raised.value.message


def test_serverless_settings_come_from_the_stage_section(tmp_path: Path) -> None:
    config = tmp_path / "deploy.toml"
    config.write_text(
        "[stages.sls.infra]\nserverless_memory_mb = 4096\nserverless_max_concurrency = 20\n"
        "serverless_provisioned_concurrency = 20\n"
    )
    infra = load_settings(stage="sls", config_file=config).infra
    assert (infra.serverless_memory_mb, infra.serverless_provisioned_concurrency) == (4096, 20)


# --- the price --------------------------------------------------------------------------


def test_serverless_price_is_per_second_of_memory_with_a_dated_source() -> None:
    from deploy.lifecycle.prices import price_table, serverless_estimate

    table = price_table()["serverless"]
    assert table["as_of"] and "aws.amazon.com/sagemaker/pricing" in table["source"]
    per_gb = table["regions"]["us-east-1"]["per_gb_second"]
    cost = serverless_estimate(
        "us-east-1", memory_mb=3072, max_concurrency=8, provisioned_concurrency=None
    )
    # Billed per GB of configured memory: 3 GB costs three times 1 GB.
    assert cost.per_second == pytest.approx(3 * per_gb)
    assert cost.hourly_max == pytest.approx(3 * per_gb * 3600 * 8)
    text = cost.describe()
    assert "per second of inference at 3072 MB" in text and "$0 while idle" in text
    assert "estimate as of" in text and "provisioned" not in text
    document = cost.to_dict()
    assert document["hosting"] == "serverless" and document["estimate"] is True
    assert document["hourly_max_usd"] == pytest.approx(cost.hourly_max)


def test_serverless_price_says_what_it_does_not_know() -> None:
    from deploy.lifecycle.prices import serverless_estimate

    warm = serverless_estimate(
        "us-east-1", memory_mb=1024, max_concurrency=4, provisioned_concurrency=2
    )
    assert "2 provisioned copies" in warm.describe()
    assert "not in the price table" in warm.describe()
    assert warm.to_dict()["provisioned_concurrency_priced"] is False
    elsewhere = serverless_estimate(
        "ap-south-1", memory_mb=1024, max_concurrency=4, provisioned_concurrency=None
    )
    assert elsewhere.per_second is None and elsewhere.hourly_max is None
    assert "no price in the table for ap-south-1" in elsewhere.describe()


# --- deploy validate --hosting serverless ------------------------------------------------


def test_validate_with_hosting_serverless_reports_the_modes_rules(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from deploy.cli import app

    write_model(
        tmp_path,
        "slow",
        extra="dynamic_batching { default_queue_policy { default_timeout_microseconds: "
        "120000000 } }",
    )
    runner = CliRunner()
    args = ["validate", str(tmp_path), "--hosting", "serverless", "--instance", "ml.m5.xlarge"]
    # Warnings only: exit 0, the setting named.
    ok = runner.invoke(app, [*args, "--json"])
    assert ok.exit_code == 0, ok.output
    (found,) = json.loads(ok.stdout)["diagnostics"]
    assert found["field"] == "dynamic_batching.default_queue_policy.default_timeout_microseconds"
    assert "60 s" in found["message"]
    # Without --hosting the same repository is clean: the rule is the mode's.
    plain = runner.invoke(app, ["validate", str(tmp_path), "--json"])
    assert json.loads(plain.stdout)["diagnostics"] == []
    # A GPU group: an error naming the config, exit 1.
    write_model(tmp_path, "gpu", extra="instance_group [{ kind: KIND_GPU }]")
    failed = runner.invoke(app, args)
    assert failed.exit_code == 1
    assert "instance_group[0].kind: KIND_GPU, but serverless endpoints have no GPU" in " ".join(
        failed.output.split()
    )
