"""The image catalogue: tags against sagemaker-core, drivers against AMIs, and the rules
`deploy validate --instance --triton-version` applies with it."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deploy.catalogue.images import (
    DEFAULT_TRITON_VERSION,
    NEW_STAGE_TRITON_VERSION,
    ami_driver,
    differences_from_local,
    image,
    image_python,
    incompatibility,
    known_tags,
    local_triton,
)
from deploy.catalogue.instances import describe
from deploy.cli import app
from deploy.errors import ConfigError
from deploy.validation import validate_repository


def _sagemaker_core_tags() -> set[str]:
    config = resources.files("sagemaker.core").joinpath(
        "image_uri_config/sagemaker-tritonserver.json"
    )
    return set(json.loads(config.read_text(encoding="utf-8"))["versions"])


def test_the_catalogue_holds_every_tag_sagemaker_core_knows() -> None:
    assert set(known_tags()) == _sagemaker_core_tags()
    assert {DEFAULT_TRITON_VERSION, NEW_STAGE_TRITON_VERSION} <= set(known_tags())


def test_each_tag_names_an_ami_whose_driver_its_cuda_accepts() -> None:
    for tag in known_tags():
        entry = image(tag)
        if entry.inference_ami is not None:
            assert ami_driver(entry.inference_ami) >= entry.min_driver, tag
    assert image("26.05").inference_ami == "al2023-ami-sagemaker-inference-gpu-4-1"
    assert image("25.04").inference_ami == "al2023-ami-sagemaker-inference-gpu-4-1"
    assert image("24.09").inference_ami is None
    assert image("24.09").triton == (2, 50, 0) and image("24.09").triton < local_triton()


def test_pythons_follow_the_ubuntu_of_each_release() -> None:
    assert image("24.09").python.python == "3.10" and image("25.04").python.python == "3.12"
    assert image_python("24.10").glibc == (2, 35)  # a custom tag between the catalogue's
    assert image_python("24.11").python == "3.12"
    with pytest.raises(ConfigError):
        image("24.10")


def test_which_images_run_where() -> None:
    p3 = describe("ml.p3.2xlarge")
    assert incompatibility(image("24.09"), p3) is None
    reason = incompatibility(image("25.04"), p3)
    assert reason and "7.5" in reason and "V100" in reason and "7.0" in reason
    assert incompatibility(image("26.05"), describe("ml.g4dn.xlarge")) is None  # T4 is 7.5
    arm = incompatibility(image("24.09"), describe("ml.c7g.xlarge"))
    assert arm and "arm64" in arm
    assert incompatibility(image("24.09"), describe("ml.inf2.xlarge"))
    assert incompatibility(image("26.05"), describe("ml.p5e.48xlarge")) is None


def _repo(tmp_path: Path, extra: str = "", size: int = 0) -> Path:
    model = tmp_path / "repo" / "net"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    if size:
        with (model / "1" / "weights.bin").open("wb") as sparse:
            sparse.truncate(size)  # sparse: no disk used
    (model / "config.pbtxt").write_text(
        'name: "net"\nbackend: "python"\nmax_batch_size: 0\n'
        'input [{ name: "X" data_type: TYPE_FP32 dims: [1] }]\n'
        'output [{ name: "Y" data_type: TYPE_FP32 dims: [1] }]\n' + extra
    )
    return tmp_path / "repo"


METRICS = """model_metrics {
  metric_control: [{
    metric_identifier: { family: "nv_inference_first_response_histogram_ms" }
    histogram_options: { buckets: [1, 2, 4, 8] }
  }]
}
"""


def test_config_fields_newer_than_the_image_are_errors_naming_the_release(tmp_path: Path) -> None:
    repo = _repo(tmp_path, METRICS)
    old = validate_repository(repo, triton_version="24.09").errors
    assert [(e.field, e.severity) for e in old] == [("model_metrics", "error")]
    assert "Triton 2.52.0" in old[0].message and "25.04" in old[0].fix
    assert validate_repository(repo, triton_version="25.04").errors == []
    assert validate_repository(repo).errors == []  # no image named: nothing to compare


def test_validate_cli_refuses_an_image_the_instance_cannot_run(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    runner = CliRunner()
    args = ["validate", str(repo), "--instance", "ml.p3.2xlarge"]
    refused = runner.invoke(app, [*args, "--triton-version", "25.04"])
    assert refused.exit_code == 1, refused.output
    assert "compute capability 7.5" in refused.output and "24.09" in refused.output
    assert runner.invoke(app, [*args, "--triton-version", "24.09"]).exit_code == 0
    unknown = runner.invoke(app, ["validate", str(repo), "--triton-version", "24.10"])
    assert unknown.exit_code == 1 and "26.05" in unknown.output


def test_model_files_larger_than_one_gpu_warn(tmp_path: Path) -> None:
    repo = _repo(tmp_path, size=20 * 1024**3)
    warnings = validate_repository(repo, instance_type="ml.g4dn.xlarge").warnings
    assert [w.field for w in warnings] == ["files"]
    assert "one T4's memory (16 GiB)" in warnings[0].message
    assert validate_repository(repo, instance_type="ml.g6e.xlarge").warnings == []
    cpu = validate_repository(repo, instance_type="ml.m5.large").warnings
    assert [w.field for w in cpu] == ["files"] and "ml.m5.large's memory" in cpu[0].message
    assert (repo / "net" / "1" / "weights.bin").stat().st_blocks == 0


def test_an_unknown_instance_type_warns_with_the_assumption(tmp_path: Path) -> None:
    from deploy.repository import load_repository
    from deploy.validation.registry import Context
    from deploy.validation.rules.image import image_on_instance

    repo = load_repository(_repo(tmp_path))
    found = list(image_on_instance(Context(repository=repo, instance_type="ml.g9.xlarge")))
    assert [d.severity for d in found] == ["warning"]
    assert "not in deploy's instance catalogue" in found[0].message


def test_serving_locally_names_what_a_newer_stage_image_does_differently() -> None:
    assert differences_from_local("24.09") == []  # older than the local 2.51
    newest = differences_from_local("26.05")
    assert any("model_metrics" in d for d in newest)
    assert any("--http-max-input-size" in d for d in newest)
    assert len(differences_from_local("25.04")) < len(newest)
