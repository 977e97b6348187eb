"""`deploy neuron compile` without torch-neuron (every machine but a Neuron one):
bad input first, then a message that says where torch-neuron comes from."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deploy.cli import app

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch_neuron") is not None,
    reason="torch-neuron is installed: these check the message shown without it",
)


@pytest.fixture(scope="module")
def torchscript(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    path = tmp_path_factory.mktemp("model") / "model.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.trace(torch.nn.Linear(4, 2), torch.zeros(1, 4)), str(path))
    return path


def _compile(model: Path, output: Path, *extra: str) -> tuple[int, str]:
    arguments = ["neuron", "compile", "--model", str(model), "--input", "INPUT__0,FP32,4"]
    result = CliRunner().invoke(app, [*arguments, "--output", str(output), *extra])
    return result.exit_code, result.output


def test_without_torch_neuron_says_where_to_get_it(torchscript: Path, tmp_path: Path) -> None:
    code, output = _compile(torchscript, tmp_path / "compiled.pt")
    assert code == 1
    assert "torch-neuron is not installed" in output
    assert "https://pip.repos.neuron.amazonaws.com" in output
    assert "Traceback" not in output
    assert list(tmp_path.iterdir()) == []


def test_bad_input_is_reported_before_the_missing_package(tmp_path: Path) -> None:
    weights = tmp_path / "weights.bin"
    weights.write_bytes(b"not a model")
    code, output = _compile(weights, tmp_path / "compiled.pt")
    assert code == 1 and "not a TorchScript model" in output
    code, output = _compile(weights, tmp_path / "compiled.pt", "--input", "INPUT__1,FP32,-1")
    assert code == 1 and "fixed shapes" in output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["weights.bin"]


def test_existing_output_needs_force(torchscript: Path, tmp_path: Path) -> None:
    output = tmp_path / "compiled.pt"
    output.write_bytes(b"keep")
    code, text = _compile(torchscript, output)
    assert code == 1 and "output file exists" in text
    assert output.read_bytes() == b"keep"
