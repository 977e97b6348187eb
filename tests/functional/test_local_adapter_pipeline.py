"""The adapter's pipelined calls: launched and answered beside `execute`.

On a GPU the TorchScript adapter returns from `execute` once a call's inputs
are on the device; a launch thread runs the model and an answer thread sends
each request its answer through its response sender. The parameter
DEPLOY_ADAPTER_PIPELINE = "1" runs the same threads for a model on the CPU,
which is how this machine tests them (the GPU run is
bench/device/adapter_gpu_check.py):

- the requests Triton batches into one call get their own rows back;
- a request whose rows make the model raise gets that error, and its
  neighbours in the call are run again alone and answered;
- a request that asks for one output gets only that one (the response
  sender drops the others without the GIL, which crashed the stub);
- the calls Triton hands over while the model is busy run as one model
  call (the model's config asks for dynamic batching), each request still
  answered with its own rows.
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

from deploy.client import decode, encode
from tests.functional.local_models import folder_files, runtime_client, write_archive
from tests.functional.test_local_adapter_batching import BATCH_SIZES, torch_batch_counting_model

pytestmark = [pytest.mark.triton, pytest.mark.slow]

# BATCH_SIZES fill max_batch_size 8: the batcher hands the four requests over at once.
PIPELINE = 'parameters { key: "DEPLOY_ADAPTER_PIPELINE" value { string_value: "1" } }\n'


def piped_model(folder: Path) -> Any:
    """The batching tests' counting model (it raises on a value over 1e6), pipelined."""
    import torch

    torch_batch_counting_model(folder)
    config = (folder / "config.pbtxt").read_text().replace('name: "counted_ts"', 'name: "piped"')
    (folder / "config.pbtxt").write_text(config + PIPELINE)
    with warnings.catch_warnings():  # TorchScript is deprecated; Triton still serves it
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.load(str(folder / "1" / "model.pt"))


def call(client: Any, target: str, x: np.ndarray, outputs: list[str] | None = None) -> Any:
    request = encode({"INPUT__0": x}, outputs=outputs)
    response = client.invoke_endpoint(
        EndpointName="local",
        TargetModel=target,
        Body=request.body,
        ContentType=request.content_type,
    )
    return decode(response["Body"].read(), response["ContentType"]).outputs


@pytest.fixture
def piped(local_endpoint: Any, tmp_path: Path) -> tuple[str, Any]:
    module = piped_model(tmp_path / "piped")
    target = "pipeline/piped.tar.gz"
    write_archive(local_endpoint.store_dir / target, folder_files(tmp_path / "piped", "piped"))
    return target, module


def test_batched_requests_get_their_own_rows(local_endpoint: Any, piped: Any) -> None:
    import torch

    target, module = piped
    rng = np.random.default_rng(5)
    inputs = [rng.normal(size=(rows, 3)).astype(np.float32) for rows in BATCH_SIZES]
    clients = [runtime_client(local_endpoint.url) for _ in inputs]
    with ThreadPoolExecutor(len(inputs)) as pool:
        answers = list(pool.map(lambda i: call(clients[i], target, inputs[i]), range(4)))

    for x, outputs in zip(inputs, answers, strict=True):
        assert outputs["OUTPUT__1"].ravel().tolist() == [float(sum(BATCH_SIZES))] * len(x)
        expected = module(torch.from_numpy(x))[0].detach().numpy()
        np.testing.assert_allclose(outputs["OUTPUT__0"], expected, rtol=1e-6)
    log = local_endpoint.endpoint.supervisor.log_path.read_text(errors="replace")
    served = [line for line in log.splitlines() if f"model '{target}' (pytorch_libtorch)" in line]
    assert served and "calls launched and answered beside execute" in served[-1]


def test_a_failing_request_does_not_fail_its_neighbours(local_endpoint: Any, piped: Any) -> None:
    import torch

    target, module = piped
    rng = np.random.default_rng(6)
    inputs = [rng.normal(size=(rows, 3)).astype(np.float32) for rows in BATCH_SIZES]
    inputs[1][0, 0] = 1e7  # this request's rows make the model raise
    clients = [runtime_client(local_endpoint.url) for _ in inputs]

    def one(index: int) -> Any:
        try:
            return call(clients[index], target, inputs[index])
        except ClientError as exc:
            return exc

    with ThreadPoolExecutor(len(inputs)) as pool:
        answers = list(pool.map(one, range(4)))

    assert isinstance(answers[1], ClientError)
    assert "poisoned row" in str(answers[1])
    for index in (0, 2, 3):
        outputs = answers[index]
        assert isinstance(outputs, dict), outputs
        # The batch failed as a whole, so each was run again alone: its own rows.
        rows = BATCH_SIZES[index]
        assert outputs["OUTPUT__1"].ravel().tolist() == [float(rows)] * rows
        expected = module(torch.from_numpy(inputs[index]))[0].detach().numpy()
        np.testing.assert_allclose(outputs["OUTPUT__0"], expected, rtol=1e-6)


def test_a_request_for_one_output_gets_that_output(local_endpoint: Any, piped: Any) -> None:
    target, _ = piped
    rng = np.random.default_rng(7)
    inputs = [rng.normal(size=(rows, 3)).astype(np.float32) for rows in BATCH_SIZES]
    clients = [runtime_client(local_endpoint.url) for _ in inputs]
    wanted: list[list[str] | None] = [["OUTPUT__0"], None, ["OUTPUT__1"], ["OUTPUT__0"]]

    with ThreadPoolExecutor(len(inputs)) as pool:
        answers = list(pool.map(lambda i: call(clients[i], target, inputs[i], wanted[i]), range(4)))

    for names, outputs in zip(wanted, answers, strict=True):
        assert sorted(outputs) == sorted(names or ["OUTPUT__0", "OUTPUT__1"])
    # The stub is still there: a later call is answered.
    assert "OUTPUT__0" in call(clients[0], target, inputs[0])


SLOW_CONFIG = """
name: "slow"
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] },
         { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { }
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


def slow_model(folder: Path) -> None:
    """2x and the rows of its call; a row over 100 keeps the model busy (that
    value times 500 small matrix products) before it answers."""
    import torch

    class Slow(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            busy = torch.ones(128, 128) / 128
            if bool((x > 100).any()):
                for _ in range(int(x.max().item()) * 500):
                    busy = torch.tanh(busy @ busy)
            rows = x.shape[0]
            return x * 2 + busy[0, 0] * 0, torch.full((rows, 1), float(rows))

    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(SLOW_CONFIG + PIPELINE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(Slow()).save(str(folder / "1" / "model.pt"))


def test_calls_queued_while_the_model_runs_share_one_launch(
    local_endpoint: Any, tmp_path: Path
) -> None:
    slow_model(tmp_path / "slow")
    target = "pipeline/slow.tar.gz"
    write_archive(local_endpoint.store_dir / target, folder_files(tmp_path / "slow", "slow"))
    busy = np.full((1, 3), 150, dtype=np.float32)  # 75,000 products: about 2 s here
    rows = (2, 3, 1)
    rng = np.random.default_rng(8)
    inputs = [rng.normal(size=(n, 3)).astype(np.float32) for n in rows]
    clients = [runtime_client(local_endpoint.url) for _ in range(len(rows) + 1)]
    call(clients[0], target, np.zeros((1, 3), np.float32))  # loaded before the clock starts

    def busy_call() -> tuple[Any, float]:
        return call(clients[0], target, busy), time.monotonic()

    with ThreadPoolExecutor(len(clients)) as pool:
        first = pool.submit(busy_call)
        time.sleep(0.5)  # the busy call is in the model; the next ones come one by one
        later = []
        for index, x in enumerate(inputs, start=1):
            later.append(pool.submit(call, clients[index], target, x))
            time.sleep(0.1)
        all_sent = time.monotonic()
        answers = [future.result() for future in later]
        busy_outputs, busy_done = first.result()

    assert busy_outputs["OUTPUT__1"].ravel().tolist() == [1.0]
    assert busy_done > all_sent, "the busy call ended before the others came: lengthen it"
    # Triton handed each over alone (no queue delay, a free instance); they ran as one call.
    for x, outputs in zip(inputs, answers, strict=True):
        assert outputs["OUTPUT__1"].ravel().tolist() == [float(sum(rows))] * len(x)
        np.testing.assert_allclose(outputs["OUTPUT__0"], x * 2, rtol=1e-6)
