"""Python models' auto_complete_config, run in a separate process as Triton runs it."""

from __future__ import annotations

import importlib.util
import json
import os
import time
import types
from pathlib import Path

import numpy as np
import pytest

from deploy.errors import RepositoryError
from deploy.local.triton.install import find_triton
from deploy.repository import LoadProblem, completed_config, config_json, load_model, parse_config
from deploy.repository.sandbox import triton_python_backend_utils as standin
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
    # The box lets the hook write nowhere the test could read: its child is found by
    # its unique command line instead.
    marker = f"{600 + os.getpid() % 1000}.{time.time_ns() % 10**6}"
    folder = python_model(
        tmp_path,
        "import subprocess, time\n"
        f'child = subprocess.Popen(["sleep", "{marker}"], start_new_session=True)\n'
        "time.sleep(600)",
        name="stuck",
    )
    problem = load_model(folder, timeout=2)
    assert isinstance(problem, LoadProblem)
    assert problem.model == "stuck"
    assert problem.message == "auto_complete_config did not return within 2 s"
    left = [
        proc.name
        for proc in Path("/proc").iterdir()
        if proc.name.isdigit() and marker.encode() in _cmdline(proc)
    ]
    assert left == [], f"processes started by auto_complete_config still run: {left}"


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


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


# -- the stand-in triton_python_backend_utils beside the python backend's own ----------

# What the python backend's stub adds to that module before auto_complete_config runs
# (python_backend src/pb_stub.cc, Stub::StubSetup and Stub::AutoCompleteModelConfig).
_ADDED_BY_THE_STUB = (
    "TritonError",
    "TritonModelException",
    "Tensor",
    "InferenceRequest",
    "InferenceResponse",
    "Logger",
    "PreferredMemory",
    "TRITONSERVER_MEMORY_GPU",
    "TRITONSERVER_MEMORY_CPU",
    "MetricFamily",
    "load_model",
    "unload_model",
    "is_model_ready",
    "get_model_dir",
)


@pytest.fixture(scope="module")
def real_utils() -> types.ModuleType:
    """The python backend's module as the wheel ships it (plain Python: numpy, json, struct)."""
    path = find_triton().python_backend / "triton_python_backend_utils.py"
    spec = importlib.util.spec_from_file_location("real_triton_python_backend_utils", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stand_in_has_every_name_of_the_python_backends_module(
    real_utils: types.ModuleType,
) -> None:
    real_names = {
        name
        for name, value in vars(real_utils).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert "TRITON_STRING_TO_NUMPY" in real_names and "ModelConfig" in real_names
    missing = sorted(
        name for name in real_names | set(_ADDED_BY_THE_STUB) if not hasattr(standin, name)
    )
    assert missing == []
    for name in real_names:
        if not callable(getattr(real_utils, name)):
            assert getattr(standin, name) == getattr(real_utils, name), name
    # Names the python backend lacks fail as in Triton (RawData was dropped from it).
    with pytest.raises(AttributeError):
        _ = standin.RawData


def test_stand_in_data_helpers_answer_as_the_python_backends(
    real_utils: types.ModuleType,
) -> None:
    for number in range(-1, 16):
        assert standin.triton_to_numpy_type(number) is real_utils.triton_to_numpy_type(number)
    kinds: list[object] = [bool, np.bytes_, np.str_, np.complex64, "FP32", None]
    for numpy_type in (*standin.TRITON_STRING_TO_NUMPY.values(), *kinds):
        for form in (numpy_type, _dtype_or_none(numpy_type)):
            assert standin.numpy_to_triton_type(form) == real_utils.numpy_to_triton_type(form), form
    for type_name in real_utils.TRITON_STRING_TO_NUMPY:
        assert standin.triton_string_to_numpy(type_name) is real_utils.triton_string_to_numpy(
            type_name
        )
    with pytest.raises(KeyError):
        standin.triton_string_to_numpy("TYPE_BF16")
    for array in (
        np.array([[b"ab", "c\u00e9"], [b"", 7]], dtype=np.object_),
        np.array([b"x\x00", b"yz"], dtype=np.bytes_),
        np.array([], dtype=np.object_),
        np.array([1.5], dtype=np.float32),
    ):
        encoded = standin.serialize_byte_tensor(array)
        assert encoded == real_utils.serialize_byte_tensor(array)
        if encoded:
            assert isinstance(encoded, bytes)
            decoded = standin.deserialize_bytes_tensor(encoded)
            assert decoded.dtype == np.object_
            assert list(decoded) == list(real_utils.deserialize_bytes_tensor(encoded))
    config = {
        "input": [{"name": "A", "dims": [1]}],
        "output": [{"name": "B", "dims": [2]}],
        "model_transaction_policy": {"decoupled": True},
    }
    for helper in ("get_input_config_by_name", "get_output_config_by_name"):
        for name in ("A", "B", "C"):
            assert getattr(standin, helper)(config, name) == getattr(real_utils, helper)(
                config, name
            )
    for document in (config, {}, {"model_transaction_policy": {"decoupled": False}}):
        assert standin.using_decoupled_model_transaction_policy(
            document
        ) == real_utils.using_decoupled_model_transaction_policy(document)


def _dtype_or_none(numpy_type: object) -> object:
    try:
        return np.dtype(numpy_type)  # type: ignore[call-overload]
    except TypeError:
        return None


def test_stand_in_objects_of_the_stub_behave_like_the_backends(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert issubclass(standin.TritonModelException, Exception)
    with pytest.raises(standin.TritonModelException, match="boom"):
        raise standin.TritonModelException("boom")
    error = standin.TritonError("bad input", standin.TritonError.INVALID_ARG)
    assert (error.message(), error.code()) == ("bad input", 3)
    assert standin.TritonError("x").code() == standin.TritonError.INTERNAL == 1
    tensor = standin.Tensor("T", np.zeros((2, 3), dtype=np.float16))
    assert (tensor.name(), tensor.triton_dtype(), tensor.shape()) == ("T", 10, [2, 3])
    with pytest.raises(standin.TritonModelException, match=r"np\.object_"):
        standin.Tensor("S", np.array(["text"]))
    response = standin.InferenceResponse(output_tensors=[tensor])
    assert standin.get_output_tensor_by_name(response, "T") is tensor
    assert not response.has_error()
    request = standin.InferenceRequest(
        model_name="other", inputs=[tensor], requested_output_names=["Y"]
    )
    assert standin.get_input_tensor_by_name(request, "T") is tensor
    for call in (
        request.exec,
        lambda: standin.load_model("other"),
        lambda: standin.unload_model("other"),
        lambda: standin.is_model_ready("other"),
    ):
        with pytest.raises(standin.TritonModelException, match="running Triton server"):
            call()
    standin.Logger.log_warn("careful")
    standin.Logger.log("note", standin.Logger.VERBOSE)
    assert capsys.readouterr().err == "WARNING: careful\nVERBOSE: note\n"
    counter = standin.MetricFamily("requests", "served", standin.MetricFamily.COUNTER)
    metric = counter.Metric(labels={"model": "m"})
    metric.increment(2)
    assert metric.value() == 2
    memory = standin.PreferredMemory(standin.TRITONSERVER_MEMORY_CPU)
    assert (memory.preferred_memory_type, memory.preferred_device_id) == (1, 0)


def test_a_hook_using_the_modules_tables_and_helpers_is_completed(tmp_path: Path) -> None:
    # As tutorials' identity model does: one optional input per type of TRITON_STRING_TO_NUMPY.
    folder = python_model(
        tmp_path,
        "import numpy as np\n"
        "for type_name, numpy_type in pb_utils.TRITON_STRING_TO_NUMPY.items():\n"
        "    number = pb_utils.numpy_to_triton_type(np.dtype(numpy_type))\n"
        "    size = np.dtype(pb_utils.triton_to_numpy_type(number)).itemsize\n"
        '    config.add_input({"name": type_name.lower(), "data_type": type_name,'
        ' "dims": [size], "optional": True})\n'
        'config.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [1]})\n'
        'pb_utils.Logger.log_info("completed")\n'
        "return config",
    )
    model = load_model(folder)
    assert not isinstance(model, LoadProblem), model
    assert len(model.inputs) == 13
    assert tensors(model.config.input)[:2] == [
        ("type_bool", "TYPE_BOOL", [1]),
        ("type_uint8", "TYPE_UINT8", [1]),
    ]
    assert tensors(model.config.input)[-1] == ("type_string", "TYPE_STRING", [8])
    # A name the python backend lacks fails there, so it fails here, naming the line.
    script = folder / "1" / "model.py"
    script.write_text(script.read_text().replace("pb_utils.Logger", "pb_utils.Logging"))
    problem = load_model(folder)
    assert isinstance(problem, LoadProblem)
    assert "has no attribute 'Logging'" in problem.message and "model.py:" in problem.message
