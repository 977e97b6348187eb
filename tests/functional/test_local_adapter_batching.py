"""Dynamic batching through the adapters: several requests, one model call.

Triton's PyTorch and onnxruntime backends run the requests the dynamic
batcher gathers as one call (inputs concatenated along the batch dimension,
outputs split back). The models here report the batch size they were called
with, so each answer says how many rows its call held.
"""

from __future__ import annotations

import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from botocore.exceptions import ClientError

from tests.functional.local_models import folder_files, invoke, runtime_client, write_archive
from tests.functional.onnx_models import batch_counting_model, variable_batch_counting_model

pytestmark = [pytest.mark.triton, pytest.mark.slow]

# Requests of 1 + 2 + 1 + 4 rows fill max_batch_size 8: the batcher runs them at once.
BATCH_SIZES = (1, 2, 1, 4)

TORCH_CONFIG = """
name: "counted_ts"
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] },
         { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 5000000 }
instance_group [ { kind: KIND_CPU count: 1 } ]
parameters { key: "INTRA_OP_THREAD_COUNT" value { string_value: "3" } }
"""


def torch_batch_counting_model(folder: Path) -> Path:
    """tanh(linear(x)) and the rows of its call; a value over 1e6 makes the call raise
    ("poisoned row": a request that fails the call it is batched into)."""
    import torch

    class Counted(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(3, 2)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            if bool((x > 1e6).any()):
                raise RuntimeError("poisoned row")
            rows = x.shape[0]
            return torch.tanh(self.linear(x)), torch.full((rows, 1), float(rows))

    torch.manual_seed(0)
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(TORCH_CONFIG)
    with warnings.catch_warnings():  # TorchScript is deprecated; Triton still serves it
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(Counted()).save(str(folder / "1" / "model.pt"))
    return folder


def concurrent_calls(
    url: str, target: str, name: str, widths: tuple[int, ...] = (3, 3, 3, 3)
) -> list[tuple[np.ndarray, Any]]:
    rng = np.random.default_rng(3)
    inputs = [
        rng.normal(size=(rows, width)).astype(np.float32)
        for rows, width in zip(BATCH_SIZES, widths, strict=True)
    ]
    clients = [runtime_client(url) for _ in inputs]  # one connection each

    def call(index: int) -> Any:
        return invoke(clients[index], "local", target, {name: inputs[index]})[1]

    with ThreadPoolExecutor(len(inputs)) as pool:
        answers = list(pool.map(call, range(len(inputs))))
    return list(zip(inputs, answers, strict=True))


def test_onnx_requests_batched_by_triton_run_as_one_call(
    local_endpoint: Any, tmp_path: Path
) -> None:
    import onnxruntime

    folder = batch_counting_model(tmp_path / "counted")
    target = "batching/counted.tar.gz"
    write_archive(local_endpoint.store_dir / target, folder_files(folder, "counted"))
    session = onnxruntime.InferenceSession(
        str(folder / "1" / "model.onnx"), providers=["CPUExecutionProvider"]
    )

    results = concurrent_calls(local_endpoint.url, target, "X")

    for x, outputs in results:
        # One call held every request's rows...
        assert outputs["BATCH"].ravel().tolist() == [float(sum(BATCH_SIZES))] * len(x)
        # ...and each request got back its own rows.
        np.testing.assert_allclose(outputs["Y"], session.run(["Y"], {"X": x})[0], rtol=1e-6)


def test_torchscript_requests_batched_by_triton_run_as_one_call(
    local_endpoint: Any, tmp_path: Path
) -> None:
    import torch

    folder = torch_batch_counting_model(tmp_path / "counted_ts")
    target = "batching/counted_ts.tar.gz"
    write_archive(local_endpoint.store_dir / target, folder_files(folder, "counted_ts"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = torch.jit.load(str(folder / "1" / "model.pt"))

    results = concurrent_calls(local_endpoint.url, target, "INPUT__0")

    for x, outputs in results:
        assert outputs["OUTPUT__1"].ravel().tolist() == [float(sum(BATCH_SIZES))] * len(x)
        expected = module(torch.from_numpy(x))[0].detach().numpy()
        np.testing.assert_allclose(outputs["OUTPUT__0"], expected, rtol=1e-6)
    # The PyTorch backend's thread parameter is honoured.
    log = local_endpoint.endpoint.supervisor.log_path.read_text(errors="replace")
    served = [line for line in log.splitlines() if f"model '{target}' (pytorch_libtorch)" in line]
    assert served and served[-1].endswith('on cpu with 3 intra-op threads"')


def test_requests_of_different_shapes_run_as_one_call_per_shape(
    local_endpoint: Any, tmp_path: Path
) -> None:
    folder = variable_batch_counting_model(tmp_path / "widths")
    target = "batching/widths.tar.gz"
    write_archive(local_endpoint.store_dir / target, folder_files(folder, "widths"))

    # Rows of width 3 and of width 5 cannot be stacked. Whether Triton's batcher hands the
    # four over in one execute call depends on arrival order, so a call holds either the
    # request alone or every request of its width, never rows of the other width.
    results = concurrent_calls(local_endpoint.url, target, "X", widths=(3, 5, 3, 5))

    rows_per_width = {3: BATCH_SIZES[0] + BATCH_SIZES[2], 5: BATCH_SIZES[1] + BATCH_SIZES[3]}
    for x, outputs in results:
        batch = outputs["BATCH"].ravel().tolist()
        assert batch in ([float(len(x))] * len(x), [float(rows_per_width[x.shape[1]])] * len(x))
        np.testing.assert_array_equal(outputs["Y"], 2 * x)


def test_the_profile_parameter_logs_where_an_instance_spends_its_calls(
    local_endpoint: Any, tmp_path: Path
) -> None:
    folder = torch_batch_counting_model(tmp_path / "profiled_ts")
    config = (folder / "config.pbtxt").read_text()
    config = config.replace('name: "counted_ts"', 'name: "profiled_ts"')
    config = config.replace("max_queue_delay_microseconds: 5000000", "")
    config += 'parameters { key: "DEPLOY_ADAPTER_PROFILE" value { string_value: "1" } }\n'
    (folder / "config.pbtxt").write_text(config)
    target = "batching/profiled_ts.tar.gz"
    write_archive(local_endpoint.store_dir / target, folder_files(folder, "profiled_ts"))
    client = runtime_client(local_endpoint.url)
    x = np.ones((2, 3), np.float32)

    for _ in range(100):  # one call each: the adapter reports every 100 calls
        invoke(client, "local", target, {"INPUT__0": x})

    # The 100th call is answered before its log line is written (the stub logs through
    # tritonserver): wait for it.
    deadline = time.monotonic() + 30
    while True:
        log = local_endpoint.endpoint.supervisor.log_path.read_text(errors="replace")
        profiles = [line for line in log.splitlines() if f"profile of '{target}'" in line]
        if profiles or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(profiles) == 1, profiles
    assert "over 100 calls, 2.0 rows a call, mean ms: between " in profiles[0]
    for stage in ("prepare", "to_device", "launch", "wait", "answer"):
        assert f", {stage} " in profiles[0]


def test_torchscript_executor_parameters_of_the_pytorch_backend(
    local_endpoint: Any, tmp_path: Path
) -> None:
    """DISABLE_OPTIMIZED_EXECUTION, ENABLE_JIT_PROFILING and ENABLE_TENSOR_FUSER mean
    what Triton's PyTorch backend makes of them; a value that is not a boolean
    stops the model's load, naming the parameter."""
    folder = torch_batch_counting_model(tmp_path / "counted_ts")
    config = folder / "config.pbtxt"
    base = config.read_text()
    config.write_text(
        base
        + 'parameters { key: "DISABLE_OPTIMIZED_EXECUTION" value { string_value: "true" } }\n'
        + 'parameters { key: "ENABLE_JIT_PROFILING" value { string_value: "false" } }\n'
        + 'parameters { key: "ENABLE_TENSOR_FUSER" value { string_value: "off" } }\n'
    )
    target = "batching/settings.tar.gz"
    write_archive(local_endpoint.store_dir / target, folder_files(folder, "counted_ts"))

    for x, outputs in concurrent_calls(local_endpoint.url, target, "INPUT__0"):
        assert outputs["OUTPUT__1"].ravel().tolist() == [float(sum(BATCH_SIZES))] * len(x)
    log = local_endpoint.endpoint.supervisor.log_path.read_text(errors="replace")
    served = [line for line in log.splitlines() if f"model '{target}' (pytorch_libtorch)" in line]
    assert served and (
        "DISABLE_OPTIMIZED_EXECUTION=true, ENABLE_JIT_PROFILING=false, ENABLE_TENSOR_FUSER=off"
        in served[-1]
    )

    config.write_text(
        base + 'parameters { key: "ENABLE_JIT_PROFILING" value { string_value: "maybe" } }\n'
    )
    bad = "batching/bad_setting.tar.gz"
    write_archive(local_endpoint.store_dir / bad, folder_files(folder, "counted_ts"))
    client = runtime_client(local_endpoint.url)
    with pytest.raises(ClientError) as failed:
        invoke(client, "local", bad, {"INPUT__0": np.zeros((1, 3), np.float32)})
    assert "'ENABLE_JIT_PROFILING' is 'maybe'; give true or false" in str(failed.value)
