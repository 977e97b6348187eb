"""4.8 MB bodies through the local endpoint: answered byte for byte, errors read,
and the front end reusing memory between requests instead of faulting it in again.

The endpoint runs as `deploy serve` in its own process, as users run it: the
allocator's state of a long-lived test process would hide what a fresh one does.
"""

from __future__ import annotations

import http.client
import json
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deploy.client import Endpoint, ModelError, encode
from deploy.packaging import package_repository

pytestmark = [pytest.mark.triton, pytest.mark.slow]

FLOATS = 1_200_000  # 4.8 MB of FP32
MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        replies = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if {fail}:
                error = pb_utils.TritonError("no, " + str(x.size))
                replies.append(pb_utils.InferenceResponse(error=error))
                continue
            replies.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", {answer})]))
        return replies
"""
CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_FP32 dims: [-1] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [-1] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""
MODELS = {
    "echo": ("False", "x"),
    "sum": ("False", "np.array([x.sum()], dtype=np.float32)"),
    "refuse": ("True", "x"),
}


@dataclass
class Served:
    url: str
    port: int
    pid: int
    store: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("large-bodies")
    repository, store = root / "repo", root / "store"
    for name, (fail, answer) in MODELS.items():
        (repository / name / "1").mkdir(parents=True)
        (repository / name / "config.pbtxt").write_text(CONFIG.format(name=name))
        model = MODEL.format(fail=fail, answer=answer)
        (repository / name / "1" / "model.py").write_text(model)
    package_repository(repository, store)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    command = [sys.executable, "-m", "deploy", "serve", str(store), "--port", str(port)]
    with (root / "serve.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=root, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=1) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail(f"deploy serve did not start: {(root / 'serve.log').read_text()}")
        yield Served(f"http://127.0.0.1:{port}", port, process.pid, store)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def test_large_bodies_are_answered_byte_for_byte(served: Served) -> None:
    x = np.random.default_rng(1).random(FLOATS, dtype=np.float32)
    with Endpoint("local", endpoint_url=served.url, manifest=served.store) as client:
        echoed = client.infer("echo", {"X": x})["Y"]
        assert echoed.tobytes() == x.tobytes()  # a response passed on in its chunks
        total = client.infer("sum", {"X": x})["Y"]
        assert total[0] == pytest.approx(float(x.sum()), rel=1e-4)
        with pytest.raises(ModelError, match="no, 1200000"):  # an error answer is read
            client.infer("refuse", {"X": x})


def _post(connection: http.client.HTTPConnection, target: str, body: bytes, kind: str) -> Any:
    connection.request(
        "POST",
        "/endpoints/local/invocations",
        body=body,
        headers={"Content-Type": kind, "X-Amzn-SageMaker-Target-Model": target},
    )
    response = connection.getresponse()
    response.read()
    return response.status


def _minor_faults(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[7])  # minflt: this process only (tritonserver is a child)


def test_the_front_end_reuses_memory_between_large_requests(served: Served) -> None:
    """Each 4.8 MB request lands in the front end's buffers twice (the reads, the
    parsed body): ~2,400 fresh pages if freed memory goes back to the kernel
    after each request. Kept for the next one, it faults in once."""
    manifest = json.loads((served.store / "manifest.json").read_text())
    target = manifest["models"]["sum"]["target_model"]
    request = encode({"X": np.ones(FLOATS, np.float32)})
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
    try:
        for _ in range(3):  # load the model, grow the buffers
            assert _post(connection, target, request.body, request.content_type) == 200
        before = _minor_faults(served.pid)
        count = 10
        for _ in range(count):
            assert _post(connection, target, request.body, request.content_type) == 200
        faults = (_minor_faults(served.pid) - before) / count
    finally:
        connection.close()
    pages = len(request.body) / resource.getpagesize()
    assert faults < pages / 4, f"{faults:.0f} page faults per request ({pages:.0f} pages a body)"
