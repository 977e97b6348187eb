"""Reading model repositories: configs through model_config_pb2, versions, files, inference."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.errors import RepositoryError
from deploy.repository import load_repository, parse_config
from deploy.repository.backends import default_model_file, v2_datatype
from deploy.repository.files import model_entries

EXAMPLES = Path(__file__).resolve().parents[2] / "model_packages" / "examples"


def write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_examples_are_read_with_kinds_tensors_steps_and_dependencies() -> None:
    repo = load_repository(EXAMPLES)
    assert repo.problems == ()
    assert set(repo.models) == {
        "addsub",
        "bls_addsub",
        "classifier",
        "image_pipeline",
        "preprocess",
        "strings",
    }
    addsub = repo.models["addsub"]
    assert (addsub.kind, addsub.backend, addsub.max_batch_size) == ("model", "python", 8)
    assert [t.as_dict() for t in addsub.inputs] == [
        {"name": "INPUT0", "datatype": "FP32", "shape": [4]},
        {"name": "INPUT1", "datatype": "FP32", "shape": [4]},
    ]
    assert addsub.python_files == (EXAMPLES / "addsub" / "1" / "model.py",)
    assert repo.models["strings"].outputs[0].datatype == "BYTES"
    assert repo.models["classifier"].backend == "pytorch"
    assert repo.models["classifier"].label_files == ("labels.txt",)
    pipeline = repo.models["image_pipeline"]
    assert pipeline.kind == "ensemble"
    assert [s.model_name for s in pipeline.ensemble_steps] == ["preprocess", "classifier"]
    assert pipeline.ensemble_steps[1].input_map == {"INPUT__0": "pixels"}
    bls = repo.models["bls_addsub"]
    assert (bls.kind, bls.dependencies) == ("bls", ("addsub",))
    assert repo.closure("image_pipeline") == ["classifier", "image_pipeline", "preprocess"]
    assert repo.closure("bls_addsub") == ["addsub", "bls_addsub"]


def test_unparseable_config_is_a_problem_naming_file_and_field(tmp_path: Path) -> None:
    config = write(tmp_path / "m" / "config.pbtxt", 'name: "m"\nbackend: "python"\nnmae: 3\n')
    write(tmp_path / "ok" / "config.pbtxt", 'name: "ok"\nbackend: "python"\n')
    repo = load_repository(tmp_path)
    assert set(repo.models) == {"ok"}
    (problem,) = repo.problems
    assert (problem.model, problem.file, problem.field) == ("m", config, "nmae")
    assert "cannot parse" in problem.message


def test_missing_config_is_inferred_only_where_triton_can(tmp_path: Path) -> None:
    write(tmp_path / "plan" / "1" / "model.plan", "x")
    write(tmp_path / "py" / "1" / "model.py", "x")
    write(tmp_path / "weights" / "1" / "model.bin", "x")
    repo = load_repository(tmp_path)
    plan = repo.models["plan"]
    assert (plan.platform, plan.backend, plan.config_path, plan.inferred_from) == (
        "tensorrt_plan",
        "tensorrt",
        None,
        "model.plan",
    )
    # Triton fills in backend "python" from model.py; no hook: nothing else.
    python = repo.models["py"]
    assert (python.backend, python.inferred_from, python.auto_completed) == (
        "python",
        "model.py",
        False,
    )
    assert (python.inputs, python.outputs) == ((), ())
    (problem,) = repo.problems
    assert problem.model == "weights"
    assert problem.message == "no config.pbtxt, and Triton cannot infer one for this model"


def test_onnx_config_is_inferred_with_its_inputs_and_outputs(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
    )
    path = tmp_path / "relu" / "1" / "model.onnx"
    path.parent.mkdir(parents=True)
    onnx.save(helper.make_model(graph), str(path))
    model = load_repository(tmp_path).models["relu"]
    assert model.backend == "onnxruntime"
    assert [t.as_dict() for t in model.inputs] == [
        {"name": "x", "datatype": "FP32", "shape": [-1, 3]}
    ]


def test_model_entries_skip_leftovers_and_list_links_without_following(tmp_path: Path) -> None:
    write(tmp_path / "1" / "model.py")
    write(tmp_path / "1" / "__pycache__" / "model.cpython-311.pyc")
    write(tmp_path / ".DS_Store")
    write(tmp_path / "a.pyc")
    (tmp_path / "empty").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "1")
    assert [p.as_posix() for p in model_entries(tmp_path)] == ["1/model.py", "empty", "linked"]


def test_not_a_directory_raises_repository_error(tmp_path: Path) -> None:
    with pytest.raises(RepositoryError) as info:
        load_repository(tmp_path / "missing")
    assert info.value.where == str(tmp_path / "missing")


def test_helpers() -> None:
    assert v2_datatype("TYPE_STRING") == "BYTES"
    assert v2_datatype("TYPE_BF16") == "BF16"
    assert default_model_file("pytorch_libtorch", "", "") == "model.pt"
    assert default_model_file("", "python", "") == "model.py"
    assert default_model_file("", "python", "custom.py") == "custom.py"
    assert default_model_file("", "identity", "") is None
    # A named backend loads its own file whatever platform says; FIL's follows model_type.
    assert default_model_file("pytorch_libtorch", "python", "") == "model.py"
    assert default_model_file("tensorflow_savedmodel", "tensorflow", "") == "model.savedmodel"
    assert default_model_file("", "fil", "") == "xgboost.model"
    assert default_model_file("", "fil", "", {"model_type": "xgboost_json"}) == "xgboost.json"
    assert default_model_file("", "fil", "", {"model_type": "lightgbm"}) == "model.txt"
    assert default_model_file("", "fil", "", {"model_type": "treelite_checkpoint"}) == (
        "checkpoint.tl"
    )
    assert default_model_file("", "fil", "", {"model_type": "catboost"}) is None
    assert default_model_file("", "my_backend", "") is None
    assert parse_config('name: "x" max_batch_size: 4').max_batch_size == 4


def test_missing_backend_is_filled_in_from_the_model_file_like_triton(tmp_path: Path) -> None:
    write(tmp_path / "m" / "config.pbtxt", 'name: "m"\nmax_batch_size: 1\n')
    write(tmp_path / "m" / "1" / "model.py", "#")
    model = load_repository(tmp_path).models["m"]
    assert (model.config.backend, model.backend) == ("", "python")
