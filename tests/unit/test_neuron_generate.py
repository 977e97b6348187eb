"""`deploy neuron generate`: the files written, and nothing written on bad input."""

from __future__ import annotations

import ast
import json
import warnings
from pathlib import Path

import pytest
from google.protobuf import text_format
from typer.testing import CliRunner

from deploy.cli import app
from deploy.errors import NeuronError
from deploy.neuron.generate import generate_model, model_config_text
from deploy.neuron.spec import build_spec
from deploy.repository.schema import model_config_pb2


@pytest.fixture(scope="module")
def torchscript(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    path = tmp_path_factory.mktemp("compiled") / "compiled.pt"
    with warnings.catch_warnings():
        # torch 2.13 deprecates TorchScript; torch-neuron (inf1) still compiles to it.
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.trace(torch.nn.Linear(4, 2), torch.zeros(1, 4)), str(path))
    return path


def _arguments(torchscript: Path, model_dir: Path, *extra: str) -> list[str]:
    return [
        "neuron",
        "generate",
        "--compiled-model",
        str(torchscript),
        "--input",
        "INPUT__0,FP32,4",
        "--output",
        "OUTPUT__0,FP32,2",
        "--cores",
        "4:7",
        "--instances",
        "2",
        "--max-batch-size",
        "8",
        "--preferred-batch-size",
        "4",
        "--model-dir",
        str(model_dir),
        *extra,
    ]


def test_config_carries_parameters_instances_and_batching(torchscript: Path) -> None:
    spec = build_spec(
        name="linear",
        compiled_model=torchscript,
        inputs=["INPUT__0,FP32,4", "INPUT__1,INT64,-1"],
        outputs=["OUTPUT__0,FP32,2"],
        cores="4:11",
        instances=4,
        threads_per_core=2,
        max_batch_size=8,
        preferred_batch_sizes=[4, 8],
        max_queue_delay_us=500,
    )
    config = model_config_pb2.ModelConfig()
    text_format.Parse(model_config_text(spec), config)
    assert (config.name, config.backend, config.max_batch_size) == ("linear", "python", 8)
    assert [(t.name, t.data_type, list(t.dims)) for t in config.input] == [
        ("INPUT__0", model_config_pb2.TYPE_FP32, [4]),
        ("INPUT__1", model_config_pb2.TYPE_INT64, [-1]),
    ]
    [group] = config.instance_group
    assert (group.kind, group.count) == (model_config_pb2.ModelInstanceGroup.KIND_MODEL, 4)
    assert list(config.dynamic_batching.preferred_batch_size) == [4, 8]
    assert config.dynamic_batching.max_queue_delay_microseconds == 500
    parameters = {key: value.string_value for key, value in config.parameters.items()}
    assert parameters == {
        "COMPILED_MODEL": "compiled.pt",
        "NEURON_CORE_START_INDEX": "4",
        "NEURON_CORE_END_INDEX": "11",
        "NUM_THREADS_PER_CORE": "2",
        "INSTANCE_CORE_RANGES": "4-5,6-7,8-9,10-11",
        "BATCHING": "concat",
    }


def test_cli_writes_a_self_contained_model_folder(torchscript: Path, tmp_path: Path) -> None:
    model_dir = tmp_path / "repo" / "linear"
    result = CliRunner().invoke(app, [*_arguments(torchscript, model_dir), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["instance_cores"] == ["4-5", "6-7"]
    assert sorted(p.relative_to(model_dir).as_posix() for p in model_dir.rglob("*")) == [
        "1",
        "1/compiled.pt",
        "1/model.py",
        "config.pbtxt",
    ]
    assert (model_dir / "1" / "compiled.pt").read_bytes() == torchscript.read_bytes()
    model_py = (model_dir / "1" / "model.py").read_text()
    ast.parse(model_py)
    # Found relative to model.py: no absolute path of this machine in the folder.
    assert str(tmp_path) not in model_py + (model_dir / "config.pbtxt").read_text()
    assert [p.name for p in (tmp_path / "repo").iterdir()] == ["linear"]


def test_existing_folder_needs_force(torchscript: Path, tmp_path: Path) -> None:
    model_dir = tmp_path / "linear"
    model_dir.mkdir()
    (model_dir / "keep.txt").write_text("mine")
    runner = CliRunner()
    refused = runner.invoke(app, _arguments(torchscript, model_dir))
    assert refused.exit_code == 1
    assert "already exists" in refused.output and "--force" in refused.output
    assert (model_dir / "keep.txt").read_text() == "mine"
    replaced = runner.invoke(app, [*_arguments(torchscript, model_dir), "--force"])
    assert replaced.exit_code == 0, replaced.output
    assert not (model_dir / "keep.txt").exists()
    assert (model_dir / "config.pbtxt").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["linear"]


@pytest.mark.parametrize(
    ("extra", "complaint"),
    [
        (["--instances", "5"], "5 instances for 4 NeuronCores"),
        (["--instance", "ml.inf1.xlarge"], "out of range"),
        (["--instance", "ml.inf1.3xlarge"], "unknown Inferentia instance type"),
        (["--input", "IN0,FP32,4"], "<name>__<index>"),
    ],
)
def test_bad_input_writes_nothing(
    torchscript: Path, tmp_path: Path, extra: list[str], complaint: str
) -> None:
    model_dir = tmp_path / "repo" / "linear"
    result = CliRunner().invoke(app, [*_arguments(torchscript, model_dir), *extra])
    assert result.exit_code == 1
    assert complaint in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "repo").exists()


def test_not_torchscript_writes_nothing(tmp_path: Path) -> None:
    import torch

    weights = tmp_path / "weights.pt"
    torch.save(torch.nn.Linear(4, 2).state_dict(), weights)
    model_dir = tmp_path / "repo" / "linear"
    result = CliRunner().invoke(app, _arguments(weights, model_dir))
    assert result.exit_code == 1
    assert "not a TorchScript model" in result.output
    assert not (tmp_path / "repo").exists()


def test_folder_name_must_match_model_name(torchscript: Path, tmp_path: Path) -> None:
    spec = build_spec(
        name="linear",
        compiled_model=torchscript,
        inputs=["INPUT__0,FP32,4"],
        outputs=["OUTPUT__0,FP32,2"],
        cores="0:0",
    )
    with pytest.raises(NeuronError, match="differs from model name"):
        generate_model(spec, tmp_path / "other")
    assert list(tmp_path.iterdir()) == []


def test_a_new_model_may_not_take_cores_of_the_repository_s_others(
    torchscript: Path, tmp_path: Path
) -> None:
    runner = CliRunner()
    first = runner.invoke(app, _arguments(torchscript, tmp_path / "repo" / "linear"))
    assert first.exit_code == 0, first.output
    arguments = _arguments(torchscript, tmp_path / "repo" / "other")
    arguments[arguments.index("4:7")] = "6:9"
    clash = runner.invoke(app, arguments)
    assert clash.exit_code == 1
    assert "linear (4:7) and other (6:9) overlap" in clash.output
    assert sorted(p.name for p in (tmp_path / "repo").iterdir()) == ["linear"]
    # Regenerating a model in place (--force) does not clash with its old self.
    again = runner.invoke(app, [*_arguments(torchscript, tmp_path / "repo" / "linear"), "--force"])
    assert again.exit_code == 0, again.output
