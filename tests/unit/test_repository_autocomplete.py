"""Python models' auto_complete_config, run in a separate process as Triton runs it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from deploy.errors import RepositoryError
from deploy.repository import LoadProblem, completed_config, config_json, load_model, parse_config
from deploy.repository.sandbox.triton_python_backend_utils import ModelConfig

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "repos" / "python_backend_examples"

HOOK = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
{body}

    def execute(self, requests):
        return []
"""


def python_model(root: Path, body: str, config: str | None = None, name: str = "m") -> Path:
    folder = root / name
    (folder / "1").mkdir(parents=True)
    indented = "\n".join(f"        {line}" if line else "" for line in body.splitlines())
    (folder / "1" / "model.py").write_text(HOOK.format(body=indented))
    if config is not None:
        (folder / "config.pbtxt").write_text(config)
    return folder


def tensors(entries: object) -> list[tuple[str, str, list[int]]]:
    from deploy.repository.schema import model_config_pb2 as pb

    return [(t.name, pb.DataType.Name(t.data_type), list(t.dims)) for t in entries]  # type: ignore[attr-defined]


def test_published_examples_are_completed_like_triton() -> None:
    batch = load_model(EXAMPLES / "batch_auto_complete")
    nobatch = load_model(EXAMPLES / "nobatch_auto_complete")
    assert not isinstance(batch, LoadProblem) and not isinstance(nobatch, LoadProblem)
    for model in (batch, nobatch):
        assert (model.config_path, model.auto_completed, model.backend) == (None, True, "python")
        assert model.config_source == "auto_complete_config in model.py"
        assert tensors(model.config.input) == [
            ("INPUT0", "TYPE_FP32", [4]),
            ("INPUT1", "TYPE_FP32", [4]),
        ]
        assert [t.name for t in model.outputs] == ["OUTPUT0", "OUTPUT1"]
    assert (batch.max_batch_size, batch.config.HasField("dynamic_batching")) == (4, True)
    assert (nobatch.max_batch_size, nobatch.config.HasField("dynamic_batching")) == (0, False)
    # Importing model.py must leave nothing behind in the repository.
    assert not list(EXAMPLES.rglob("__pycache__"))


def test_partial_config_is_completed_and_what_triton_keeps_is_taken(tmp_path: Path) -> None:
    folder = python_model(
        tmp_path,
        'config.add_input({"name": "A", "data_type": "TYPE_FP32", "dims": [2]})\n'
        'config.add_input({"name": "B", "data_type": "TYPE_INT32", "dims": [3],'
        ' "optional": True})\n'
        'config.add_output({"name": "C", "data_type": "TYPE_FP32", "dims": [2]})\n'
        "config.set_max_batch_size(8)\n"
        'config.set_model_transaction_policy({"decoupled": True})\n'
        'config.as_dict()["parameters"] = {"ignored": {"string_value": "x"}}\n'
        "return config",
        config='backend: "python"\nmax_batch_size: 2\n'
        'input [ { name: "A", data_type: TYPE_INVALID, dims: [ 2 ] } ]\n'
        "sequence_batching { }\n",
    )
    model = load_model(folder)
    assert not isinstance(model, LoadProblem)
    assert model.config_source == "config.pbtxt completed by auto_complete_config in model.py"
    assert tensors(model.config.input) == [("A", "TYPE_FP32", [2]), ("B", "TYPE_INT32", [3])]
    assert model.inputs[1].optional
    assert model.max_batch_size == 8
    assert model.config.model_transaction_policy.decoupled
    assert model.config.HasField("sequence_batching")  # the scheduler config.pbtxt set stays
    assert "ignored" not in model.config.parameters  # Triton takes back only its fields


@pytest.mark.parametrize(
    ("body", "config", "expected"),
    [
        (
            'config.add_input({"name": "A", "data_type": "TYPE_FP32", "dims": [4]})\nreturn config',
            'backend: "python"\ninput [ { name: "A", data_type: TYPE_FP32, dims: [ 5 ] } ]\n',
            "the model expects dims [4] but the model configuration specifies dims [5]",
        ),
        (
            "config.set_max_batch_size(2)\nreturn config",
            'backend: "python"\nmax_batch_size: 4\n',
            "configuration specified max_batch_size 4",
        ),
        (
            "config.set_dynamic_batching()\nreturn config",
            'backend: "python"\nsequence_batching { }\n',
            "tries to set scheduling_choice as 'dynamic_batching'",
        ),
        ("return None", None, "must return a valid pb_utils.ModelConfig object"),
        (
            'config.add_output({"name": "C", "data_type": "FP32", "dims": [1]})\nreturn config',
            None,
            "returned a config Triton cannot read",
        ),
        ('raise RuntimeError("no weights here")', None, "RuntimeError: no weights here"),
        ("import sys\nsys.exit(3)", None, "SystemExit: 3"),
        ("import os\nos._exit(3)", None, "exited with status 3 before reporting"),
        ("import os\nos.abort()", None, "killed by signal 6"),
    ],
)
def test_a_failing_hook_is_an_error_naming_the_model(
    tmp_path: Path, body: str, config: str | None, expected: str
) -> None:
    folder = python_model(tmp_path, body, config, name="broken")
    problem = load_model(folder)
    assert isinstance(problem, LoadProblem)
    assert (problem.model, problem.file) == ("broken", folder / "1" / "model.py")
    assert problem.field == "TritonPythonModel.auto_complete_config"
    assert expected in problem.message
    assert problem.fix
    with pytest.raises(RepositoryError) as info:
        completed_config(folder)
    assert "broken" in str(info.value) and expected in str(info.value)


def test_a_hook_that_hangs_is_stopped_with_everything_it_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    folder = python_model(
        tmp_path,
        "import subprocess, time\n"
        f'child = subprocess.Popen(["sleep", "600"])\n'
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(600)",
        name="stuck",
    )
    problem = load_model(folder, timeout=2)
    assert isinstance(problem, LoadProblem)
    assert problem.model == "stuck"
    assert problem.message == "auto_complete_config did not return within 2 s"
    child = int(pid_file.read_text())
    for _ in range(50):  # the child belongs to the killed process group
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"process {child} started by auto_complete_config is still running")


def test_modules_missing_here_are_stood_in_for(tmp_path: Path) -> None:
    header = (
        "import absent_package_for_deploy_tests as apt\n"
        "from absent_package_for_deploy_tests.sub import Layer\n"
    )
    folder = python_model(
        tmp_path,
        'config.add_input({"name": "A", "data_type": "TYPE_FP32", "dims": [4]})\nreturn config',
    )
    script = folder / "1" / "model.py"
    script.write_text(
        header
        + script.read_text().replace("class TritonPythonModel:", "class TritonPythonModel(Layer):")
    )
    model = load_model(folder)
    assert not isinstance(model, LoadProblem), model
    assert [t.name for t in model.inputs] == ["A"]
    # A hook whose result depends on the missing package fails, and says why.
    script.write_text(script.read_text().replace('"dims": [4]', '"dims": [apt.size]'))
    problem = load_model(folder)
    assert isinstance(problem, LoadProblem)
    assert "imports absent_package_for_deploy_tests, not installed where deploy runs" in (
        problem.message
    )
    assert problem.fix.startswith("install absent_package_for_deploy_tests here")


def test_the_model_imports_its_own_modules_as_triton_loads_it(tmp_path: Path) -> None:
    folder = python_model(
        tmp_path,
        "from .shapes import WIDTH\nfrom shared import NAME\n"
        'config.add_input({"name": NAME, "data_type": "TYPE_FP32", "dims": [WIDTH]})\n'
        "return config",
    )
    (folder / "1" / "shapes.py").write_text("WIDTH = 7\n")
    (folder / "shared.py").write_text('NAME = "FROM_MODEL_FOLDER"\n')
    model = load_model(folder)
    assert not isinstance(model, LoadProblem), model
    assert tensors(model.config.input) == [("FROM_MODEL_FOLDER", "TYPE_FP32", [7])]


def test_config_json_is_tritons_form() -> None:
    config = parse_config(
        'name: "m" max_batch_size: 2 input [ { name: "A" data_type: TYPE_FP32 dims: [ -1, 3 ] } ]'
        " dynamic_batching { max_queue_delay_microseconds: 100 }"
        " version_policy { specific { versions: [ 1, 3 ] } }"
    )
    document = config_json(config)
    assert document["input"][0]["dims"] == [-1, 3]  # numbers, not protobuf's strings
    assert document["dynamic_batching"]["max_queue_delay_microseconds"] == 100
    assert document["version_policy"]["specific"]["versions"] == [1, 3]
    assert document["output"] == [] and document["platform"] == ""  # every field present
    json.dumps(document)


def test_stand_in_model_config_follows_the_python_backend() -> None:
    config = ModelConfig(json.dumps({"name": "m", "max_batch_size": 0, "input": [], "output": []}))
    config.add_input({"name": "A", "data_type": "TYPE_FP32", "dims": [1]})
    config.add_input({"name": "A", "data_type": "TYPE_FP32", "dims": [1], "optional": True})
    assert config.as_dict()["input"] == [
        {"name": "A", "data_type": "TYPE_FP32", "dims": [1], "optional": True}
    ]
    with pytest.raises(ValueError, match="expects datatype TYPE_FP32 for input 'A'"):
        config.add_input({"name": "A", "data_type": "TYPE_INT8", "dims": [1]})
    with pytest.raises(ValueError, match="optional"):
        config.add_input({"name": "A", "data_type": "TYPE_FP32", "dims": [1], "optional": False})
    with pytest.raises(ValueError, match="contains property other than"):
        config.add_output({"name": "B", "data_type": "TYPE_FP32", "dims": [1], "optional": True})
    with pytest.raises(ValueError, match="is missing 'data_type' property"):
        config.add_output({"name": "B", "dims": [1]})
    config.set_max_batch_size(4)
    config.set_dynamic_batching()
    config.set_model_transaction_policy({"decoupled": False})
    with pytest.raises(ValueError, match="trying to change decoupled"):
        config.set_model_transaction_policy({"decoupled": True})
    with pytest.raises(ValueError, match="other than 'decoupled'"):
        config.set_model_transaction_policy({"stream": True})
    assert config.as_dict()["dynamic_batching"] == {}
    assert config.as_dict()["max_batch_size"] == 4
