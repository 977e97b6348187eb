"""TorchScript and ONNX models through the python-backend adapters.

The adapter's outputs must equal running the model file directly with
torch.jit.load / onnxruntime.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from google.protobuf import text_format

from deploy.errors import LocalEndpointError
from deploy.local.models.adapters import adapt_folder, read_config
from deploy.repository import COMPLETED_CONFIG_HEADER
from deploy.repository.schema import model_config_pb2 as mc
from tests.functional.local_models import folder_files, invoke, runtime_client, write_archive

TORCH_CONFIG = """
name: "ts"
platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "INPUT__1" data_type: TYPE_FP32 dims: [3] },
        { name: "INPUT__0" data_type: TYPE_FP32 dims: [3] } ]
output [ { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [2] },
         { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [2] } ]
instance_group [ { kind: KIND_GPU count: 1 } ]
"""

ONNX_CONFIG = """
name: "ox"
platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [3] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [2] } ]
"""


def torchscript_model(folder: Path) -> Path:
    import torch

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(3, 2)

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.linear(a) - self.linear(b), torch.relu(self.linear(a + b))

    torch.manual_seed(0)
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(TORCH_CONFIG)
    with warnings.catch_warnings():  # TorchScript is deprecated; Triton still serves it
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(Net()).save(str(folder / "1" / "model.pt"))
    return folder


def onnx_model(folder: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("Tanh", ["m"], ["y"]),
        ],
        "ox",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2])],
        [numpy_helper.from_array(weight, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(ONNX_CONFIG)
    onnx.save(model, str(folder / "1" / "model.onnx"))
    return folder


def test_rewrite_keeps_tensors_and_moves_gpu_groups_to_cpu(tmp_path: Path) -> None:
    folder = torchscript_model(tmp_path / "ts")
    report = adapt_folder(tmp_path, cuda_devices=0)
    config = read_config(folder / "config.pbtxt")
    assert report.adapted == {"ts": "pytorch_libtorch"}
    assert report.moved_to_cpu == ["ts"]
    assert (config.backend, config.platform) == ("python", "")
    assert [i.name for i in config.input] == ["INPUT__1", "INPUT__0"]
    assert config.max_batch_size == 4
    assert config.instance_group[0].kind == mc.ModelInstanceGroup.KIND_CPU
    assert config.parameters["DEPLOY_ADAPTER_MODEL_FILE"].string_value == "model.pt"
    assert (folder / "1" / "model.py").is_file()


def test_gpu_groups_stay_where_cuda_is_visible(tmp_path: Path) -> None:
    folder = torchscript_model(tmp_path / "ts")
    report = adapt_folder(tmp_path, cuda_devices=1)
    assert report.moved_to_cpu == []
    config = read_config(folder / "config.pbtxt")
    assert config.instance_group[0].kind == mc.ModelInstanceGroup.KIND_GPU


@pytest.mark.parametrize(
    ("field", "kind", "known"),
    [
        ("platform", "tensorrt_plan", "TensorRT"),
        ("platform", "tensorflow_savedmodel", "TensorFlow"),
        ("backend", "dali", "DALI"),
        ("backend", "fil", "FIL"),
        ("backend", "vllm", "vLLM"),
        ("backend", "my_custom", ""),
    ],
)
def test_backends_without_emulation_are_refused_by_name(
    tmp_path: Path, field: str, kind: str, known: str
) -> None:
    # No inputs or outputs: the backend is the cause given, not config auto-completion.
    config = mc.ModelConfig(name="engine", max_batch_size=1, **{field: kind})
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "config.pbtxt").write_text(text_format.MessageToString(config))
    with pytest.raises(LocalEndpointError) as caught:
        adapt_folder(tmp_path, cuda_devices=0, auto_complete=False)
    named = f"{field} '{kind}'" + (f" ({known})" if known else "")
    assert caught.value.message.startswith(f"{named} is not available on the local endpoint")
    assert "auto-completion" not in str(caught.value)
    assert "engine" in (caught.value.where or "")


def test_a_config_without_backend_gets_the_one_its_model_file_implies(tmp_path: Path) -> None:
    # What Triton's auto-completion fills in; the local tritonserver runs without it.
    folder = onnx_model(tmp_path / "ox")
    config = folder / "config.pbtxt"
    config.write_text(config.read_text().replace('platform: "onnxruntime_onnx"', ""))
    (tmp_path / "py" / "1").mkdir(parents=True)
    (tmp_path / "py" / "config.pbtxt").write_text(
        ONNX_CONFIG.replace('platform: "onnxruntime_onnx"', "").replace('"ox"', '"py"')
    )
    (tmp_path / "py" / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")

    report = adapt_folder(tmp_path, cuda_devices=0, auto_complete=False)

    assert report.adapted == {"ox": "onnxruntime_onnx"}
    assert read_config(config).backend == "python"
    assert read_config(tmp_path / "py" / "config.pbtxt").backend == "python"


def test_a_complete_config_is_served_although_model_py_defines_the_hook(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "py" / "1").mkdir(parents=True)
    (tmp_path / "py" / "config.pbtxt").write_text(
        ONNX_CONFIG.replace('platform: "onnxruntime_onnx"', 'backend: "python"')
    )
    (tmp_path / "py" / "1" / "model.py").write_text(
        "class TritonPythonModel:\n"
        "    @staticmethod\n"
        "    def auto_complete_config(config):\n"
        "        return config\n"
    )
    with caplog.at_level("WARNING"):
        adapt_folder(tmp_path, cuda_devices=0, auto_complete=False)
    assert "does not run" in caplog.text

    (tmp_path / "py" / "config.pbtxt").write_text('backend: "python"\n')
    with pytest.raises(LocalEndpointError, match=r"declares no inputs.*auto_complete_config"):
        adapt_folder(tmp_path, cuda_devices=0, auto_complete=False)
    adapt_folder(tmp_path, cuda_devices=0, auto_complete=True)  # Triton completes it


def test_a_config_deploy_package_completed_is_served_without_the_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "py" / "1").mkdir(parents=True)
    completed = (
        COMPLETED_CONFIG_HEADER
        + "\n"
        + ONNX_CONFIG.replace('platform: "onnxruntime_onnx"', 'backend: "python"')
        + "instance_group [ { kind: KIND_GPU } ]\n"
    )
    (tmp_path / "py" / "config.pbtxt").write_text(completed)
    (tmp_path / "py" / "1" / "model.py").write_text(
        "class TritonPythonModel:\n"
        "    @staticmethod\n"
        "    def auto_complete_config(config):\n"
        "        return config\n"
    )
    with caplog.at_level("WARNING"):
        adapt_folder(tmp_path, cuda_devices=0, auto_complete=False)
    assert "does not run" not in caplog.text
    # Rewritten for the CPU, it still says where it came from (a reload warns no more).
    rewritten = (tmp_path / "py" / "config.pbtxt").read_text()
    assert rewritten.startswith(COMPLETED_CONFIG_HEADER + "\n") and "KIND_CPU" in rewritten


@pytest.mark.triton
@pytest.mark.slow
def test_onnx_config_and_graph_must_agree_on_tensor_names(
    local_endpoint: Any, tmp_path: Path
) -> None:
    folder = onnx_model(tmp_path / "ox")
    config = folder / "config.pbtxt"
    config.write_text(config.read_text().replace('name: "x"', 'name: "features"'))
    write_archive(
        local_endpoint.store_dir / "tests" / "misnamed.tar.gz", folder_files(folder, "ox")
    )
    runtime = runtime_client(local_endpoint.url)
    with pytest.raises(runtime.exceptions.ModelError, match=r"declares input 'features'.*\['x'\]"):
        invoke(
            runtime, "local", "tests/misnamed.tar.gz", {"features": np.zeros((1, 3), np.float32)}
        )


@pytest.mark.triton
@pytest.mark.slow
def test_adapters_answer_like_the_model_files(local_endpoint: Any, tmp_path: Path) -> None:
    import onnxruntime
    import torch

    ts = torchscript_model(tmp_path / "ts")
    ox = onnx_model(tmp_path / "ox")
    write_archive(local_endpoint.store_dir / "tests" / "ts.tar.gz", folder_files(ts, "ts"))
    write_archive(local_endpoint.store_dir / "tests" / "ox.tar.gz", folder_files(ox, "ox"))
    runtime = runtime_client(local_endpoint.url)
    rng = np.random.default_rng(1)
    a = rng.normal(size=(2, 3)).astype(np.float32)
    b = rng.normal(size=(2, 3)).astype(np.float32)

    # INPUT__0 is forward's first argument whatever the config's order.
    _, outputs = invoke(runtime, "local", "tests/ts.tar.gz", {"INPUT__0": a, "INPUT__1": b})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = torch.jit.load(str(ts / "1" / "model.pt"))
    expected = module(torch.from_numpy(a), torch.from_numpy(b))
    np.testing.assert_allclose(outputs["OUTPUT__0"], expected[0].detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(outputs["OUTPUT__1"], expected[1].detach().numpy(), rtol=1e-6)

    _, outputs = invoke(runtime, "local", "tests/ox.tar.gz", {"x": a})
    session = onnxruntime.InferenceSession(
        str(ox / "1" / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    np.testing.assert_allclose(outputs["y"], session.run(["y"], {"x": a})[0], rtol=1e-6)

    log = local_endpoint.endpoint.supervisor.log_path.read_text(errors="replace")
    assert "deploy adapter: model 'tests/ts.tar.gz' (pytorch_libtorch)" in log
    assert "on cpu" in log
