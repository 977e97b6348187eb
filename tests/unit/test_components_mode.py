"""`hosting = "components"`: per-model settings, derived requirements and fit rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deploy.catalogue.instances import describe
from deploy.component_settings import ComponentSettings
from deploy.config import DeploySettings, load_settings
from deploy.errors import ConfigError
from deploy.hosting import MODES, mode_for
from deploy.hosting.component_sizing import component_name, component_specs, requirements
from deploy.repository.loader import load_repository

CONFIG = """
name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [{{ name: "x", data_type: TYPE_FP32, dims: [3] }}]
output [{{ name: "y", data_type: TYPE_FP32, dims: [3] }}]
instance_group [{groups}]
"""


def repository(root: Path) -> Path:
    models = {
        # Two GPUs listed: a copy needs both; count does not add GPUs.
        "detector": ("{ kind: KIND_GPU, count: 3, gpus: [0, 1] }", 50 * 1024 * 1024),
        "tabular": ("{ kind: KIND_CPU, count: 3 }", 10),
    }
    for name, (groups, size) in models.items():
        (root / "models" / name / "1").mkdir(parents=True)
        (root / "models" / name / "config.pbtxt").write_text(
            CONFIG.format(name=name, groups=groups), encoding="utf-8"
        )
        (root / "models" / name / "1" / "model.onnx").write_bytes(b"\0" * size)
    return root / "models"


def settings(repo: Path, **values: Any) -> DeploySettings:
    values.setdefault("instance_type", "ml.g5.12xlarge")
    return DeploySettings(hosting="components", repository=repo, endpoint_name="ic", **values)


def test_the_mode_is_registered_with_its_stack_key(tmp_path: Path) -> None:
    mode = mode_for(settings(tmp_path))
    assert mode is MODES["components"]
    assert mode.endpoint_stack == "components-endpoint"
    assert mode.on_instances and mode.network and mode.scales_to_zero


def test_requirements_come_from_instance_groups_files_and_the_catalogue(tmp_path: Path) -> None:
    repo = load_repository(repository(tmp_path))
    specs = {s.model: s for s in component_specs(settings(repo.root), repo)}
    gpu, cpu = specs["detector"].requirements, specs["tabular"].requirements
    assert (gpu.accelerators, gpu.cpus, gpu.memory_mb) == (2, 1.0, 1024 + 100)
    assert (cpu.accelerators, cpu.cpus, cpu.memory_mb) == (0, 3.0, 1025)
    # Never more than the instance has: ml.m5.large has 2 vCPUs and 8 GiB.
    small = describe("ml.m5.large")
    capped = requirements(repo.models["tabular"], small, ComponentSettings())
    assert capped.cpus == 2.0 and capped.accelerators == 0


def test_deploy_toml_overrides_each_field(tmp_path: Path) -> None:
    repo = load_repository(repository(tmp_path))
    override = {"accelerators": 1, "memory_mb": 4096, "cpus": 0.5, "min_copies": 0, "max_copies": 2}
    specs = component_specs(settings(repo.root, models={"detector": override}), repo)
    detector = specs[0]
    assert detector.model == "detector"
    assert (detector.requirements.accelerators, detector.requirements.cpus) == (1, 0.5)
    assert detector.requirements.memory_mb == 4096
    assert (detector.min_copies, detector.max_copies, detector.scales_to_zero) == (0, 2, True)


@pytest.mark.parametrize(
    ("section", "named"),
    [
        ("acelerators = 1", "models.detector.acelerators"),
        ("memory_mb = 64", "models.detector.memory_mb"),
        ("cpus = 0.1", "models.detector.cpus"),
        ("min_copies = 3\nmax_copies = 2", "max_copies (2) is below min_copies (3)"),
    ],
)
def test_bad_model_settings_name_the_field(tmp_path: Path, section: str, named: str) -> None:
    toml = tmp_path / "deploy.toml"
    toml.write_text(
        f'[stages.dev]\nhosting = "components"\n\n[stages.dev.models.detector]\n{section}\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(stage="dev", config_file=toml)
    assert named in caught.value.message


def test_a_model_the_repository_lacks_is_an_error_naming_it(tmp_path: Path) -> None:
    repo = load_repository(repository(tmp_path))
    with pytest.raises(ConfigError, match="no model 'detectr'") as caught:
        component_specs(settings(repo.root, models={"detectr": {}}), repo)
    assert caught.value.where == "models.detectr"


def test_validation_reports_what_does_not_fit_with_a_fix(tmp_path: Path) -> None:
    repo_root = repository(tmp_path)
    mode = MODES["components"]
    repo = load_repository(repo_root)
    # Fits: ml.g5.12xlarge has 4 GPUs, 48 vCPUs, 192 GiB.
    assert mode.check_repository(settings(repo_root), repo, "deploy.toml") == []
    # ml.g5.xlarge has 1 GPU: the detector's copy asks for 2.
    found = mode.check_repository(settings(repo_root, instance_type="ml.g5.xlarge"), repo, "x")
    fields = {d.field: d for d in found}
    too_many = fields["[stages.dev.models.detector] accelerators"]
    assert too_many.severity == "error" and "has 1" in too_many.message
    assert "at most 1" in too_many.fix
    # Minimum copies past the instances: 3 copies × 2 GPUs > 4 GPUs × 1 instance.
    crowded = settings(
        repo_root, models={"detector": {"min_copies": 3}}, infra={"max_instance_count": 1}
    )
    (finding,) = mode.check_repository(crowded, repo, "deploy.toml")
    assert finding.field == "[stages.dev.models] min_copies"
    assert "need 6 accelerators" in finding.message and "hold 4" in finding.message
    assert "max_instance_count" in finding.fix


def test_every_model_at_zero_with_instances_kept_is_a_warning(tmp_path: Path) -> None:
    repo = load_repository(repository(tmp_path))
    zero = {"min_copies": 0}
    found = MODES["components"].check_repository(
        settings(repo.root, models={"detector": zero, "tabular": zero}), repo, "deploy.toml"
    )
    assert [(d.severity, d.field) for d in found] == [("warning", "infra.min_instance_count")]


def test_component_names_fit_sagemaker_and_stay_distinct() -> None:
    assert component_name("ic", "detector") == "ic-detector"
    a, b = component_name("ic", "my_model"), component_name("ic", "my.model")
    assert a != b and a.startswith("ic-my-model-")
    assert len(component_name("e" * 60, "model")) <= 63


def test_the_mode_takes_gpu_and_cpu_instances_and_refuses_neuron(tmp_path: Path) -> None:
    mode = MODES["components"]
    with pytest.raises(ConfigError, match=r"ml\.inf1\.xlarge.*GPU or CPU"):
        mode.check_settings(settings(tmp_path, instance_type="ml.inf1.xlarge"))
    # `deploy up` deploys the mode: its settings check passes on GPU and CPU instances.
    mode.check_settings(settings(tmp_path))
    mode.check_settings(settings(tmp_path, instance_type="ml.m5.xlarge"))
    assert mode.components is not None and mode.bind_manifest is not None


@pytest.mark.parametrize(
    ("rollout", "batch"),
    [
        ({}, {"Type": "CAPACITY_PERCENT", "Value": 50}),  # linear 50% by default
        ({"traffic": "linear", "linear_step": "20%"}, {"Type": "CAPACITY_PERCENT", "Value": 20}),
        ({"traffic": "linear", "linear_step": 2}, {"Type": "COPY_COUNT", "Value": 2}),
        # SageMaker's batches take 5-50% of the copies: a 1% canary is 5%.
        ({"traffic": "canary", "canary_size": "1%"}, {"Type": "CAPACITY_PERCENT", "Value": 5}),
        # All at once: every copy the component may have (max_copies 3) in one batch.
        ({"traffic": "all-at-once"}, {"Type": "COPY_COUNT", "Value": 3}),
    ],
)
def test_a_component_update_rolls_out_as_the_stage_rollout_says(
    tmp_path: Path, rollout: dict[str, Any], batch: dict[str, Any]
) -> None:
    from deploy.hosting.components import deployment_config

    stage = settings(
        repository(tmp_path),
        rollout={**rollout, "wait_interval_s": 60, "alarms": ["shop-errors"]},
        models={"tabular": {"max_copies": 3}},
    )
    spec = {s.model: s for s in component_specs(stage, load_repository(stage.repository))}
    assert deployment_config(stage, spec["tabular"]) == {
        "RollingUpdatePolicy": {
            "MaximumBatchSize": batch,
            "WaitIntervalInSeconds": 60,
            "MaximumExecutionTimeoutInSeconds": 3600,
            "RollbackMaximumBatchSize": batch,
        },
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "shop-errors"}]},
    }


def test_deploy_validate_with_the_mode_reports_a_component_that_fits_no_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from deploy.cli import app

    repository(tmp_path)
    (tmp_path / "deploy.toml").write_text(
        '[stages.dev]\ninstance_type = "ml.g5.xlarge"\n', encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["validate", "models", "--hosting", "components"])
    assert result.exit_code == 1, result.output
    assert "[stages.dev.models.detector] accelerators" in result.output
    assert "ml.g5.xlarge has 1" in result.output and "at most 1" in result.output
