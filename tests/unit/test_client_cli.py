"""`deploy invoke` file handling: reading inputs, writing outputs atomically."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.cli.invoke import InvokeError, read_inputs, result_document, write_outputs
from deploy.client import InferResult, ModelInfo, Tensor, TensorSpec

INFO = ModelInfo(
    name="addsub",
    target_model="addsub-0.tar.gz",
    max_batch_size=0,
    inputs=(TensorSpec("INPUT0", "FP32", (4,)), TensorSpec("TEXT", "BYTES", (-1,))),
    outputs=(),
)


def test_npz_inputs_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "in.npz"
    np.savez(path, INPUT0=np.arange(4, dtype=np.float32))
    inputs = read_inputs(path, None)
    assert inputs["INPUT0"].dtype == np.float32


def test_json_shorthand_takes_datatypes_from_the_manifest(tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps({"INPUT0": [1, 2, 3, 4], "TEXT": ["a", "b"]}))
    inputs = read_inputs(path, INFO)
    assert inputs["INPUT0"].dtype == np.float32
    assert inputs["TEXT"].tolist() == ["a", "b"]


def test_json_v2_form_needs_no_manifest(tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    entry = {"name": "X", "datatype": "INT32", "shape": [2, 2], "data": [1, 2, 3, 4]}
    path.write_text(json.dumps({"inputs": [entry]}))
    tensor = read_inputs(path, None)["X"]
    assert isinstance(tensor, Tensor)
    assert tensor.data.shape == (2, 2)
    assert tensor.data.dtype == np.int32


def test_json_shorthand_with_unknown_names_lists_the_models_inputs(tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps({"inputs": {"INPUT0": [1, 2, 3, 4]}}))
    with pytest.raises(InvokeError, match=r"no input named 'inputs' \(its inputs: INPUT0, TEXT\)"):
        read_inputs(path, INFO)


def test_json_numbers_without_datatype_ask_for_one(tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_text(json.dumps({"X": [1.5]}))
    with pytest.raises(InvokeError, match="numbers need a datatype") as caught:
        read_inputs(path, None)
    assert "in.json: X" in str(caught.value)


def test_bad_files_are_invoke_errors(tmp_path: Path) -> None:
    with pytest.raises(InvokeError, match="cannot read inputs"):
        read_inputs(tmp_path / "missing.npz", None)
    (tmp_path / "in.csv").write_text("1,2")
    with pytest.raises(InvokeError, match="unknown input format"):
        read_inputs(tmp_path / "in.csv", None)
    (tmp_path / "bad.json").write_text(json.dumps({"inputs": [{"name": "X"}]}))
    with pytest.raises(InvokeError, match=r"inputs\[0\]: needs name, datatype and data"):
        read_inputs(tmp_path / "bad.json", None)


def result() -> InferResult:
    return InferResult(
        {
            "OUTPUT0": np.arange(4, dtype=np.float32),
            "UPPER": np.array([b"A\x00B", b"C"], dtype=object),
        },
        datatypes={"OUTPUT0": "FP32", "UPPER": "BYTES"},
        model="m",
        target_model="m.tar.gz",
    )


def test_outputs_written_as_npz_and_json(tmp_path: Path) -> None:
    write_outputs(result(), tmp_path / "out.npz")
    with np.load(tmp_path / "out.npz") as saved:
        np.testing.assert_array_equal(saved["OUTPUT0"], np.arange(4, dtype=np.float32))
        assert saved["UPPER"].tolist() == [b"A\x00B", b"C"]
    write_outputs(result(), tmp_path / "out.json")
    document = json.loads((tmp_path / "out.json").read_text())
    assert document == result_document(result())
    assert document["outputs"][1]["data"] == ["A\x00B", "C"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "out.npz"]


def test_unknown_output_format_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(InvokeError, match="unknown output format"):
        write_outputs(result(), tmp_path / "out.txt")
    assert list(tmp_path.iterdir()) == []


def test_cli_maps_sdk_errors_to_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "in.npz"
    np.savez(path, INPUT0=np.arange(4, dtype=np.float32))
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"format": 1, "models": {}}))
    outcome = CliRunner().invoke(
        app,
        ["invoke", "nope", "--input", str(path), "--local", "--manifest", str(manifest)],
    )
    assert outcome.exit_code == 1
    assert "model 'nope' is not in the manifest" in outcome.output
    assert "Traceback" not in outcome.output
