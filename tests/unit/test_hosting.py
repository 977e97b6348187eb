"""Hosting modes: how a stage picks one, and what each owns."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.client.manifest import HOSTINGS, ROUTER, TARGET_MODEL_HEADER
from deploy.config import load_settings
from deploy.errors import ConfigError
from deploy.hosting import MODES, mode_for, mode_named
from deploy.lifecycle.prices import estimate_for


def test_every_hosting_of_the_manifest_contract_is_a_mode() -> None:
    assert tuple(MODES) == HOSTINGS
    assert all(MODES[name].name == name for name in HOSTINGS)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, "multi-model"),
        ({"instance_type": "ml.inf1.xlarge"}, "single-model"),  # inf1 implies it
        ({"instance_type": "ml.g5.xlarge", "hosting": "single-model"}, "single-model"),
        ({"instance_type": "ml.inf1.xlarge", "hosting": "multi-model"}, "multi-model"),
    ],
)
def test_a_stage_picks_its_mode(overrides: dict[str, str], expected: str) -> None:
    assert mode_for(load_settings(**overrides)).name == expected


def test_deploy_toml_sets_the_mode_and_a_typo_is_named(tmp_path: Path) -> None:
    config = tmp_path / "deploy.toml"
    config.write_text('[stages.dev]\nhosting = "single-model"\n')
    assert mode_for(load_settings(config_file=config)).name == "single-model"
    config.write_text('[stages.dev]\nhosting = "single_model"\n')
    with pytest.raises(ConfigError, match=r"hosting: .*did you mean single-model"):
        load_settings(config_file=config)
    with pytest.raises(ConfigError, match="did you mean serverless") as raised:
        mode_named("serveless")
    assert raised.value.where == "hosting (--hosting)"


def test_the_cdk_app_takes_hosting_as_context() -> None:
    from deploy_infra.app import overrides_from_context

    assert overrides_from_context({"hosting": "single-model"}) == {"hosting": "single-model"}


def test_each_mode_checks_the_instance_it_is_given() -> None:
    mode_named("multi-model").check_settings(load_settings(instance_type="ml.g5.xlarge"))
    mode_named("single-model").check_settings(load_settings(instance_type="ml.g5.xlarge"))
    mode_named("single-model").check_settings(load_settings(instance_type="ml.inf1.xlarge"))
    with pytest.raises(ConfigError, match="cannot host a multi-model endpoint") as raised:
        mode_named("multi-model").check_settings(
            load_settings(instance_type="ml.inf1.xlarge", hosting="multi-model")
        )
    assert raised.value.where == "instance_type (--instance)"
    with pytest.raises(ConfigError, match="no Triton image here serves"):
        mode_named("single-model").check_settings(load_settings(instance_type="ml.inf2.xlarge"))


def test_async_runs_on_gpu_or_cpu_and_alone_scales_to_zero() -> None:
    to_zero = {"min_instance_count": 0}
    for instance in ("ml.g5.xlarge", "ml.m5.xlarge"):
        mode_named("async").check_settings(
            load_settings(instance_type=instance, hosting="async", infra=to_zero)
        )
    with pytest.raises(ConfigError, match="cannot host an asynchronous endpoint") as raised:
        mode_named("async").check_settings(
            load_settings(instance_type="ml.inf1.xlarge", hosting="async")
        )
    assert raised.value.where == "instance_type (--instance)"
    for name in ("multi-model", "single-model"):
        with pytest.raises(ConfigError, match="only an asynchronous endpoint") as raised:
            mode_named(name).check_settings(
                load_settings(instance_type="ml.m5.xlarge", hosting=name, infra=to_zero)
            )
        assert raised.value.where == "infra.min_instance_count"
        assert 'hosting = "async"' in (raised.value.fix or "")


def test_modes_say_how_a_client_addresses_a_model_and_where_the_manifest_goes() -> None:
    assert mode_named("multi-model").addressing == TARGET_MODEL_HEADER
    assert mode_named("multi-model").manifest_key == "manifest.json"
    assert mode_named("multi-model").front_door
    for name, folder in (
        ("single-model", "inf1/"),
        ("async", "async/"),
        ("serverless", "serverless/"),
    ):
        mode = mode_named(name)
        assert mode.addressing == ROUTER and not mode.front_door
        assert mode.manifest_key == f"{folder}manifest.json"
        assert mode.package_dir(Path("build/models")) == Path("build/models") / folder.rstrip("/")


def test_deploy_package_with_a_router_mode_writes_one_archive_and_its_manifest(
    tmp_path: Path,
) -> None:
    import json
    import shutil

    from typer.testing import CliRunner

    from deploy.cli import app
    from deploy.client.manifest import read

    neuron = Path(__file__).resolve().parents[2] / "model_packages" / "neuron" / "repository"
    repo = tmp_path / "repo"
    shutil.copytree(neuron, repo, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["package", str(repo), "--out", str(out), "--hosting", "single-model", "--json"]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    manifest = read(out)
    assert document["hosting"] == manifest.hosting == "single-model"
    assert manifest.archive is not None and (out / manifest.archive.key).is_file()
    assert sorted(manifest.models) == ["classifier_batched", "classifier_single"]
    unknown = CliRunner().invoke(app, ["package", str(repo), "--out", str(out), "--hosting", "mme"])
    assert unknown.exit_code == 1 and "unknown hosting 'mme'" in unknown.output


def test_serverless_takes_cpu_instances_only_and_no_network() -> None:
    mode = mode_named("serverless")
    mode.check_settings(load_settings(instance_type="ml.m5.xlarge", hosting="serverless"))
    with pytest.raises(ConfigError, match="CPU only") as raised:
        mode.check_settings(load_settings(instance_type="ml.g5.xlarge", hosting="serverless"))
    assert raised.value.where == "instance_type (--instance)"
    assert not mode.network and mode_named("multi-model").network


def test_serverless_capacity_and_price_are_memory_and_concurrency() -> None:
    settings = load_settings(
        instance_type="ml.m5.xlarge",
        hosting="serverless",
        infra={"serverless_memory_mb": 4096, "serverless_max_concurrency": 10},
    )
    mode = mode_for(settings)
    desired = mode.capacity(settings)
    assert desired.to_dict() == {
        "serverless_memory_mb": 4096,
        "serverless_max_concurrency": 10,
        "serverless_provisioned_concurrency": None,
    }
    cost = estimate_for(settings.region, desired).to_dict()
    assert cost["hosting"] == "serverless" and cost["memory_mb"] == 4096
    # The instance modes keep their instance spec and hourly price.
    instances = mode_named("multi-model").capacity(settings)
    assert instances.to_dict()["instance_type"] == "ml.m5.xlarge"
    assert estimate_for(settings.region, instances).to_dict()["hourly_min_usd"]


def test_a_change_of_capacity_is_a_planned_change() -> None:
    from deploy.lifecycle.plan import diff_infra

    before = mode_named("multi-model").capacity(load_settings(instance_type="ml.m5.xlarge"))
    settings = load_settings(instance_type="ml.m5.xlarge", hosting="serverless")
    after = mode_named("serverless").capacity(settings)
    # From instances to serverless: every serverless setting is new.
    assert [(c.setting, c.before, c.after) for c in diff_infra(before, after)] == [
        ("serverless_memory_mb", None, "2048"),
        ("serverless_max_concurrency", None, "5"),
    ]
    assert diff_infra(after, after) == ()
