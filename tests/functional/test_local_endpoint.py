"""The local endpoint through boto3's real sagemaker-runtime client.

GIVEN the session's local endpoint (real tritonserver + front end)
WHEN boto3 calls InvokeEndpoint with a TargetModel
THEN answers and errors look like SageMaker's: results for good requests,
the modelled exception classes for bad ones.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.functional.local_models import (
    addsub_files,
    encode,
    invoke,
    runtime_client,
    write_archive,
)

pytestmark = [pytest.mark.triton, pytest.mark.slow]

A = np.arange(8, dtype=np.float32).reshape(2, 4)
B = np.ones((2, 4), dtype=np.float32)


def get(port: int, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def store(local_endpoint: Any) -> Path:
    """Test archives beside the packaged examples (not listed in the manifest)."""
    store_dir: Path = local_endpoint.store_dir
    for name in ("addsub_a", "addsub_b", "addsub_c"):
        write_archive(store_dir / "tests" / f"{name}.tar.gz", addsub_files(name))
    write_archive(store_dir / "tests" / "slow.tar.gz", addsub_files("slow", delay=2.0))
    write_archive(store_dir / "tests" / "slow2.tar.gz", addsub_files("slow2", delay=1.5))
    return store_dir


@pytest.fixture(scope="module")
def runtime(local_endpoint: Any) -> Any:
    return runtime_client(local_endpoint.url)


def test_addsub_round_trip(local_endpoint: Any, store: Path, runtime: Any) -> None:
    response, outputs = invoke(
        runtime, "local", "tests/addsub_a.tar.gz", {"INPUT0": A, "INPUT1": B}
    )
    np.testing.assert_array_equal(outputs["OUTPUT0"], A + B)
    np.testing.assert_array_equal(outputs["OUTPUT1"], A - B)
    assert response["InvokedProductionVariant"] == "AllTraffic"
    assert response["ContentType"].startswith("application/vnd.sagemaker-triton.binary+json")


def test_ping_and_listing(local_endpoint: Any, store: Path, runtime: Any) -> None:
    invoke(runtime, "local", "tests/addsub_a.tar.gz", {"INPUT0": A, "INPUT1": B})
    assert get(local_endpoint.endpoint.port, "/ping")[0] == 200
    status, body = get(local_endpoint.endpoint.port, "/models")
    assert status == 200
    listing = json.loads(body)
    assert "tests/addsub_a.tar.gz" in [m["target_model"] for m in listing["loaded"]]
    assert listing["endpoint_name"] == "local"


def test_unknown_endpoint_is_validation_error(store: Path, runtime: Any) -> None:
    body, content_type = encode({"INPUT0": A, "INPUT1": B})
    with pytest.raises(runtime.exceptions.ValidationError, match=r"Endpoint nope .*not found"):
        runtime.invoke_endpoint(
            EndpointName="nope",
            TargetModel="tests/addsub_a.tar.gz",
            Body=body,
            ContentType=content_type,
        )


def test_unknown_or_unsafe_target_model_is_validation_error(store: Path, runtime: Any) -> None:
    body, content_type = encode({"INPUT0": A, "INPUT1": B})
    for target in ("tests/missing.tar.gz", "../outside.tar.gz", "/etc/passwd"):
        with pytest.raises(runtime.exceptions.ValidationError):
            runtime.invoke_endpoint(
                EndpointName="local", TargetModel=target, Body=body, ContentType=content_type
            )


def test_missing_target_model_is_validation_error(store: Path, runtime: Any) -> None:
    body, content_type = encode({"INPUT0": A, "INPUT1": B})
    with pytest.raises(runtime.exceptions.ValidationError, match="TargetModel"):
        runtime.invoke_endpoint(EndpointName="local", Body=body, ContentType=content_type)


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda body, ct: (body[:-4], ct), id="truncated-body"),
        pytest.param(lambda body, ct: (body, ct.rsplit("=", 1)[0] + "=7"), id="short-header"),
    ],
)
def test_bad_bodies_are_model_errors_with_tritons_message(
    store: Path, runtime: Any, mutate: Any
) -> None:
    # A json-header-size beyond the body is the front end's ValidationError
    # (tests/functional/test_frontend_limits.py).
    body, content_type = mutate(*encode({"INPUT0": A, "INPUT1": B}))
    with pytest.raises(runtime.exceptions.ModelError) as caught:
        runtime.invoke_endpoint(
            EndpointName="local",
            TargetModel="tests/addsub_a.tar.gz",
            Body=body,
            ContentType=content_type,
        )
    error = caught.value.response
    assert error["OriginalStatusCode"] == 400
    assert error["OriginalMessage"]
    assert error["LogStreamArn"]


def test_wrong_dtype_and_shape_are_model_errors(store: Path, runtime: Any) -> None:
    for inputs in (
        {"INPUT0": A.astype(np.int32), "INPUT1": B.astype(np.int32)},
        {"INPUT0": np.ones((2, 5), np.float32), "INPUT1": np.ones((2, 5), np.float32)},
    ):
        body, content_type = encode(inputs)
        with pytest.raises(runtime.exceptions.ModelError) as caught:
            runtime.invoke_endpoint(
                EndpointName="local",
                TargetModel="tests/addsub_a.tar.gz",
                Body=body,
                ContentType=content_type,
            )
        assert "INPUT" in caught.value.response["OriginalMessage"]


def test_oversized_payload_is_refused_like_sagemaker(store: Path, runtime: Any) -> None:
    big = np.zeros((2, 800_000), np.float32)  # 6.4 MB > 6 MB
    body, content_type = encode({"INPUT0": big, "INPUT1": big})
    with pytest.raises(runtime.exceptions.ClientError) as caught:
        runtime.invoke_endpoint(
            EndpointName="local",
            TargetModel="tests/addsub_a.tar.gz",
            Body=body,
            ContentType=content_type,
        )
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 413
    # The connection and the server survive it.
    invoke(runtime, "local", "tests/addsub_a.tar.gz", {"INPUT0": A, "INPUT1": B})


def test_model_still_loading_is_model_not_ready(
    local_endpoint: Any, store: Path, runtime: Any
) -> None:
    frontend = local_endpoint.endpoint.frontend
    saved, frontend.model_wait = frontend.model_wait, 0.3
    try:
        with pytest.raises(runtime.exceptions.ModelNotReadyException, match="still loading"):
            invoke(runtime, "local", "tests/slow.tar.gz", {"INPUT0": A, "INPUT1": B})
    finally:
        frontend.model_wait = saved
    # The load went on in the background; the retry succeeds.
    _, outputs = invoke(runtime, "local", "tests/slow.tar.gz", {"INPUT0": A, "INPUT1": B})
    np.testing.assert_array_equal(outputs["OUTPUT0"], A + B)


def test_disk_failure_while_loading_is_internal_failure(
    local_endpoint: Any, store: Path, runtime: Any
) -> None:
    write_archive(store / "tests" / "blocked.tar.gz", addsub_files("blocked"))
    platform = local_endpoint.endpoint.platform
    blocker = platform.work_dir / platform.hash_for("tests/blocked.tar.gz")
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("a file where the model folder must go")
    try:
        with pytest.raises(runtime.exceptions.InternalFailure):
            invoke(runtime, "local", "tests/blocked.tar.gz", {"INPUT0": A, "INPUT1": B})
    finally:
        blocker.unlink()


def test_traversal_archive_is_refused_and_writes_nothing_outside(
    local_endpoint: Any, store: Path, runtime: Any
) -> None:
    files = addsub_files("evil")
    files["../../escaped.txt"] = b"should never be written"
    write_archive(store / "tests" / "evil.tar.gz", files)
    platform = local_endpoint.endpoint.platform
    with pytest.raises(runtime.exceptions.ValidationError, match="refused"):
        invoke(runtime, "local", "tests/evil.tar.gz", {"INPUT0": A, "INPUT1": B})
    assert not list(platform.work_dir.parent.rglob("escaped.txt"))
    assert not (platform.work_dir / platform.hash_for("tests/evil.tar.gz") / "model").exists()


def test_model_needing_config_auto_completion_is_refused_by_name(store: Path, runtime: Any) -> None:
    files = addsub_files("autocomplete")
    files["autocomplete/config.pbtxt"] = b'backend: "python"\nmax_batch_size: 8\n'
    files["autocomplete/1/model.py"] += (
        b"\n    @staticmethod\n    def auto_complete_config(config):\n        return config\n"
    )
    write_archive(store / "tests" / "autocomplete.tar.gz", files)
    with pytest.raises(
        runtime.exceptions.ModelError,
        match=r"model autocomplete .*declares no inputs .*auto_complete_config",
    ):
        invoke(runtime, "local", "tests/autocomplete.tar.gz", {"INPUT0": A, "INPUT1": B})


def test_concurrent_cold_invocations_load_once(local_endpoint: Any, store: Path) -> None:
    platform = local_endpoint.endpoint.platform
    results: list[Any] = []

    def call() -> None:
        client = runtime_client(local_endpoint.url)
        results.append(invoke(client, "local", "tests/slow2.tar.gz", {"INPUT0": A, "INPUT1": B}))

    threads = [threading.Thread(target=call) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(results) == 6
    assert platform.loads["tests/slow2.tar.gz"] == 1


def test_lru_eviction_by_count(local_endpoint: Any, store: Path, runtime: Any) -> None:
    platform = local_endpoint.endpoint.platform
    for target in list(platform.listing()["loaded"]):
        platform.unload(target["target_model"])
    saved, platform.max_models = platform.max_models, 2
    try:
        for name in ("addsub_a", "addsub_b", "addsub_a", "addsub_c"):
            invoke(runtime, "local", f"tests/{name}.tar.gz", {"INPUT0": A, "INPUT1": B})
        loaded = {m["target_model"] for m in platform.listing()["loaded"]}
        # b was least recently used when c arrived.
        assert loaded == {"tests/addsub_a.tar.gz", "tests/addsub_c.tar.gz"}
        before = platform.loads.get("tests/addsub_b.tar.gz", 0)
        _, outputs = invoke(runtime, "local", "tests/addsub_b.tar.gz", {"INPUT0": A, "INPUT1": B})
        np.testing.assert_array_equal(outputs["OUTPUT1"], A - B)
        assert platform.loads["tests/addsub_b.tar.gz"] == before + 1
        assert len(platform.listing()["loaded"]) == 2
    finally:
        platform.max_models = saved


def test_out_of_memory_load_evicts_lru_and_retries_once(
    local_endpoint: Any, store: Path, runtime: Any, tmp_path: Path
) -> None:
    # The model's first initialize raises MemoryError, which Triton's SageMaker
    # frontend answers with 507 (its out-of-memory signal); the second succeeds.
    # The flag lives in the model's own folder: the only place its code may write.
    files = addsub_files("hungry")
    files["hungry/1/model.py"] = files["hungry/1/model.py"].replace(
        b"    def initialize(self, args):\n",
        b"    def initialize(self, args):\n"
        + b"        import os\n"
        + b"        flag = os.path.join(os.path.dirname(__file__), 'raised-once')\n"
        + b"        if not os.path.exists(flag):\n"
        + b"            open(flag, 'w').close()\n"
        + b"            raise MemoryError('out of memory for weights')\n",
    )
    write_archive(store / "tests" / "hungry.tar.gz", files)
    platform = local_endpoint.endpoint.platform
    invoke(runtime, "local", "tests/addsub_a.tar.gz", {"INPUT0": A, "INPUT1": B})
    evictions = platform.evictions

    _, outputs = invoke(runtime, "local", "tests/hungry.tar.gz", {"INPUT0": A, "INPUT1": B})

    np.testing.assert_array_equal(outputs["OUTPUT0"], A + B)
    assert platform.evictions == evictions + 1
    assert platform.loads["tests/hungry.tar.gz"] == 1


def test_expect_100_continue_is_answered(local_endpoint: Any, store: Path, runtime: Any) -> None:
    invoke(runtime, "local", "tests/addsub_a.tar.gz", {"INPUT0": A, "INPUT1": B})
    body, content_type = encode({"INPUT0": A, "INPUT1": B})
    head = (
        "POST /endpoints/local/invocations HTTP/1.1\r\nHost: x\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        "X-Amzn-SageMaker-Target-Model: tests/addsub_a.tar.gz\r\n"
        "Expect: 100-continue\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", local_endpoint.endpoint.port), timeout=5) as sock:
        sock.sendall(head.encode())
        assert sock.recv(4096).startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(body)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 OK")


def test_malformed_http_gets_a_400_and_server_survives(local_endpoint: Any, store: Path) -> None:
    with socket.create_connection(("127.0.0.1", local_endpoint.endpoint.port), timeout=5) as sock:
        sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 400")
    assert b"ValidationError" in answer
    assert get(local_endpoint.endpoint.port, "/ping")[0] == 200
