"""`deploy validate --instance ml.inf1.*`: NeuronCore fit and overlap, naming both models."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from deploy.cli import app
from deploy.validation import validate_repository


def _neuron_model(repository: Path, name: str, start: int, end: int) -> None:
    folder = repository / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(
        "import triton_python_backend_utils as pb_utils\n\n\nclass TritonPythonModel:\n"
        "    def execute(self, requests):\n        return []\n"
    )
    parameters = "\n".join(
        f'parameters {{ key: "{key}" value {{ string_value: "{value}" }} }}'
        for key, value in (("NEURON_CORE_START_INDEX", start), ("NEURON_CORE_END_INDEX", end))
    )
    (folder / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n'
        'input { name: "INPUT__0" data_type: TYPE_FP32 dims: [4] }\n'
        'output { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [4] }\n'
        "instance_group { kind: KIND_MODEL count: 1 }\n" + parameters + "\n"
    )


def _neuron_errors(repository: Path, instance_type: str | None) -> list[tuple[str, str]]:
    report = validate_repository(repository, instance_type=instance_type)
    return [
        (d.model, d.message)
        for d in report.errors
        if "NEURON_CORE" in d.field or d.field == "--instance"
    ]


def test_disjoint_ranges_that_fit_pass(tmp_path: Path) -> None:
    _neuron_model(tmp_path, "resnet", 0, 3)
    _neuron_model(tmp_path, "bert", 4, 7)
    assert _neuron_errors(tmp_path, "ml.inf1.6xlarge") == []


def test_overlap_is_reported_once_naming_both_models(tmp_path: Path) -> None:
    _neuron_model(tmp_path, "resnet", 0, 3)
    _neuron_model(tmp_path, "bert", 2, 5)
    errors = _neuron_errors(tmp_path, "ml.inf1.6xlarge")
    assert len(errors) == 1
    model, message = errors[0]
    assert model == "resnet"
    assert "resnet (0:3)" in message and "bert (2:5)" in message and "overlap" in message


def test_out_of_range_depends_on_the_size(tmp_path: Path) -> None:
    _neuron_model(tmp_path, "bert", 4, 7)
    assert _neuron_errors(tmp_path, "ml.inf1.6xlarge") == []
    assert _neuron_errors(tmp_path, "ml.inf1.2xlarge") == [
        ("bert", "NeuronCores 4:7 are out of range: ml.inf1.2xlarge has 4 (0:3)")
    ]


def test_rules_only_run_for_inf1(tmp_path: Path) -> None:
    _neuron_model(tmp_path, "resnet", 0, 70)
    _neuron_model(tmp_path, "bert", 0, 1)
    assert _neuron_errors(tmp_path, None) == []
    assert _neuron_errors(tmp_path, "ml.m5.xlarge") == []
    assert [m for m, _ in _neuron_errors(tmp_path, "ml.inf1.48xlarge")] == ["bert"]


def test_cli_validate_reports_both_models(tmp_path: Path) -> None:
    _neuron_model(tmp_path, "resnet", 0, 3)
    _neuron_model(tmp_path, "bert", 3, 3)
    result = CliRunner().invoke(
        app, ["validate", str(tmp_path), "--instance", "ml.inf1.6xlarge", "--json"]
    )
    assert result.exit_code == 1
    assert "resnet (0:3) and bert (3:3) overlap" in result.stdout


def test_instance_slices_must_match_the_instances_and_the_range(tmp_path: Path) -> None:
    def slices(case: str, value: str, count: int = 1) -> list[str]:
        repository = tmp_path / case
        _neuron_model(repository, "resnet", 0, 3)
        config = repository / "resnet" / "config.pbtxt"
        config.write_text(
            config.read_text().replace("count: 1", f"count: {count}")
            + f'parameters {{ key: "INSTANCE_CORE_RANGES" value {{ string_value: "{value}" }} }}\n'
        )
        report = validate_repository(repository)  # no --instance: checked anyway
        return [d.message for d in report.errors if d.field.endswith("INSTANCE_CORE_RANGES")]

    assert slices("ok", "0-1,2-3", count=2) == []
    assert slices("count", "0-1,2-3", count=3) == ["2 NeuronCore slices for 3 model instances"]
    outside = "slice '2-5' is not a first-last range inside NeuronCores 0:3"
    assert slices("outside", "2-5") == [outside]
    assert slices("garbled", "x") == ["slice 'x' is not a first-last range inside NeuronCores 0:3"]
