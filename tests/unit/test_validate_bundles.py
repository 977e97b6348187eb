"""`deploy validate` warns when a BLS model bundles a model an ensemble holds as a step."""

from __future__ import annotations

from pathlib import Path

from deploy.validation import validate_repository

TENSORS = (
    'input [{ name: "X", data_type: TYPE_FP32, dims: [1] }]\n'
    'output [{ name: "Y", data_type: TYPE_FP32, dims: [1] }]\n'
)
CODE = (
    "import triton_python_backend_utils as pb_utils\n\n"
    "class TritonPythonModel:\n"
    "    def execute(self, requests):\n"
    "        return []\n"
)


def python_model(repo: Path, name: str, dependencies: str = "") -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "1" / "model.py").write_text(CODE)
    parameters = (
        f'parameters {{ key: "deploy.dependencies" value {{ string_value: "{dependencies}" }} }}\n'
        if dependencies
        else ""
    )
    (repo / name / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n' + TENSORS + parameters
    )


def ensemble(repo: Path, name: str, step: str) -> None:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(
        f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: 0\n'
        + TENSORS
        + f'ensemble_scheduling {{ step [ {{ model_name: "{step}" model_version: -1 '
        'input_map { key: "X" value: "X" } output_map { key: "Y" value: "Y" } } ] }\n'
    )


def warnings_saying(repo: Path, text: str) -> list[tuple[str, str]]:
    return [(d.model, d.message) for d in validate_repository(repo).warnings if text in d.message]


def bundle_warnings(repo: Path) -> list[tuple[str, str]]:
    return warnings_saying(repo, "also holds as a step")


def test_a_bundled_step_is_warned_on_the_bls_model(tmp_path: Path) -> None:
    python_model(tmp_path, "preprocess")
    python_model(tmp_path, "caller", "preprocess")
    ensemble(tmp_path, "pipe", "preprocess")
    ((model, message),) = bundle_warnings(tmp_path)
    assert model == "caller"
    assert 'bundles model "preprocess", which ensemble "pipe"' in message
    assert "Model 'preprocess' is not ready" in message


def test_nested_bundles_and_nested_ensembles_count(tmp_path: Path) -> None:
    python_model(tmp_path, "preprocess")
    python_model(tmp_path, "middle", "preprocess")
    python_model(tmp_path, "caller", "middle")
    ensemble(tmp_path, "inner", "preprocess")
    ensemble(tmp_path, "outer", "inner")
    found = bundle_warnings(tmp_path)
    assert {(model, '"inner"' in m or '"outer"' in m) for model, m in found} == {
        ("caller", True),
        ("middle", True),
    }
    assert len(found) == 4  # caller and middle, each beside inner and outer


def test_no_warning_without_an_ensemble_holding_the_bundle(tmp_path: Path) -> None:
    python_model(tmp_path, "preprocess")
    python_model(tmp_path, "other")
    python_model(tmp_path, "caller", "preprocess")
    ensemble(tmp_path, "pipe", "other")
    assert bundle_warnings(tmp_path) == []


def several_files_warnings(repo: Path) -> list[tuple[str, str]]:
    return warnings_saying(repo, "keeps only one of several")


def test_a_bundled_model_of_several_files_is_warned_on_the_bls_model(tmp_path: Path) -> None:
    python_model(tmp_path, "preprocess")
    (tmp_path / "preprocess" / "1" / "helpers.py").write_text("SCALE = 2\n")
    (tmp_path / "preprocess" / "requirements.txt").write_text("numpy\n")  # not passed
    (tmp_path / "preprocess" / "1" / "__pycache__").mkdir()  # never packaged
    (tmp_path / "preprocess" / "1" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"")
    python_model(tmp_path, "middle", "preprocess")
    python_model(tmp_path, "caller", "middle")
    found = several_files_warnings(tmp_path)
    # Both BLS models bundle preprocess (caller through middle); middle itself is one file.
    assert sorted(model for model, _ in found) == ["caller", "middle"]
    assert all(
        'bundles model "preprocess", whose 2 files (1/helpers.py, 1/model.py)' in m
        for _, m in found
    )


def test_a_bundled_model_of_one_file_is_not_warned(tmp_path: Path) -> None:
    python_model(tmp_path, "preprocess")
    (tmp_path / "preprocess" / "requirements.txt").write_text("numpy\n")
    (tmp_path / "preprocess" / "1" / "__pycache__").mkdir()
    (tmp_path / "preprocess" / "1" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"")
    python_model(tmp_path, "caller", "preprocess")
    assert several_files_warnings(tmp_path) == []
