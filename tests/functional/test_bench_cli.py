"""`deploy bench` against the real local endpoint (tritonserver behind the front end).

Short runs: the point is the report's shape and its honesty (counts, rates,
failures), not the numbers, which belong in bench/.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.client.codec import encode_input, encode_response
from deploy.local.http.wire import AwsErrorReply
from tests.conftest import LocalEndpointHandle

pytestmark = [pytest.mark.triton, pytest.mark.slow]


def _bench(endpoint: LocalEndpointHandle, *args: str) -> Any:
    where = ["--endpoint-url", endpoint.url, "--endpoint", endpoint.endpoint_name]
    return CliRunner().invoke(app, ["bench", *args, *where])


def test_bench_json_report_against_the_local_endpoint(
    local_endpoint: LocalEndpointHandle, tmp_path: Path
) -> None:
    plot = tmp_path / "chart.html"
    result = _bench(
        local_endpoint,
        "addsub",
        "-c", "1,4",
        "--duration", "1",
        "--warmup", "0.3",
        "--instance", "ml.m5.xlarge",
        "--json",
        "--plot", str(plot),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["failed"] is False
    assert report["model"] == "addsub"
    assert report["target_model"] == local_endpoint.target_model("addsub")
    assert report["mode"] == "closed-loop"
    assert report["items_per_request"] == 1
    assert report["request_bytes"] > 2 * 4 * 4  # two FP32 [1, 4] tensors and their header
    assert report["pricing"]["instance_type"] == "ml.m5.xlarge"
    assert [step["concurrency"] for step in report["steps"]] == [1, 4]
    for step in report["steps"]:
        assert step["ok"] > 0 and step["failed"] == 0 and step["errors"] == {}
        latency = step["latency_ms"]
        assert 0 < latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["max"]
        assert step["throughput_rps"] == pytest.approx(step["ok"] / step["window_s"], rel=1e-3)
        assert step["client_cpu_ms_per_request"] > 0
        hourly = report["pricing"]["hourly_usd"]
        expected = hourly / (step["items_per_s"] * 3600) * 1e6
        assert step["cost_per_million_usd"] == pytest.approx(expected, rel=1e-2)
    page = plot.read_text()
    assert "<svg" in page and "c4" in page


def test_bench_fixed_rate_sends_on_schedule_with_batched_inputs(
    local_endpoint: LocalEndpointHandle,
) -> None:
    result = _bench(
        local_endpoint,
        "addsub",
        "--rate", "40",
        "-c", "4",
        "--batch", "4",
        "--duration", "1",
        "--warmup", "0.2",
        "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (step,) = report["steps"]
    assert report["mode"] == "fixed-rate" and step["rate_rps"] == 40
    assert report["items_per_request"] == 4
    assert 39 <= step["requests"] <= 41  # the schedule, whatever the machine's speed
    assert step["items_per_s"] == pytest.approx(4 * step["throughput_rps"])


class _Scripted(BaseHTTPRequestHandler):
    """InvokeEndpoint answered by request number: 3, 5 and 7 of every ten fail
    (throttled, model not ready, internal failure) in AWS's error shape."""

    protocol_version = "HTTP/1.1"
    counter = itertools.count()
    signed: ClassVar[list[bool]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.signed.append(self.headers.get("Authorization", "").startswith("AWS4-HMAC-SHA256"))
        failure = {3: ("ThrottlingException", 400), 5: ("ModelNotReadyException", 429)}
        failure[7] = ("InternalFailure", 500)
        number = next(self.counter)
        if number % 10 in failure:
            code, status = failure[number % 10]
            status, headers, payload = AwsErrorReply(code, status, "scripted").encode()
        else:
            encoded = encode_response([encode_input("OUTPUT0", np.zeros((1, 4), np.float32))])
            headers = [("Content-Type", encoded.content_type)]
            status, payload = 200, encoded.body
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    # Credentials in the environment: the SDK signs (SigV4), as on AWS; workers inherit them.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    manifest = tmp_path / "manifest.json"
    spec = {"name": "INPUT0", "datatype": "FP32", "shape": [4]}
    entry = {"target_model": "m-0.tar.gz", "max_batch_size": 8, "inputs": [spec]}
    manifest.write_text(json.dumps({"format": 1, "models": {"m": {**entry, "outputs": []}}}))
    _Scripted.counter = itertools.count()
    _Scripted.signed = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", manifest
    httpd.shutdown()
    httpd.server_close()


def test_bench_counts_errors_by_class_and_a_failed_run_exits_1(
    scripted: tuple[str, Path],
) -> None:
    url, manifest = scripted
    where = ["--endpoint-url", url, "--endpoint", "e", "--manifest", str(manifest)]
    run = ["bench", "m", *where, "-c", "2", "--duration", "0.5", "--warmup", "0"]
    result = CliRunner().invoke(app, [*run, "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["failed"] is True
    assert report["warnings"][0].startswith("FAILED: ")
    (step,) = report["steps"]
    errors = step["errors"]
    assert set(errors) == {"throttling", "model_not_ready", "5xx"}
    assert step["failed"] == sum(errors.values())
    assert step["error_fraction"] == pytest.approx(0.3, abs=0.05)
    assert "scripted" in step["error_examples"]["5xx"]
    assert all(_Scripted.signed)  # every request carried a SigV4 signature

    _Scripted.counter = itertools.count()  # the probe gets request 0, which succeeds
    text = CliRunner().invoke(app, run)
    assert text.exit_code == 0, text.output  # only --json turns a failed run into exit 1
    assert text.stdout.startswith("FAILED: ")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_bench_bad_input_is_a_clear_error_before_the_run(
    local_endpoint: LocalEndpointHandle, tmp_path: Path
) -> None:
    unknown = _bench(local_endpoint, "nosuchmodel", "--duration", "0.1")
    assert unknown.exit_code == 1
    assert "unknown model" in unknown.output and "addsub" in unknown.output  # known models

    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, NOPE=np.zeros((1, 4), np.float32))
    mismatch = _bench(local_endpoint, "addsub", "--input", str(wrong), "--duration", "0.1")
    assert mismatch.exit_code == 1
    assert "the inputs do not match the model" in mismatch.output
    assert "NOPE" in mismatch.output

    too_big = _bench(local_endpoint, "addsub", "--batch", "64", "--duration", "0.1")
    assert too_big.exit_code == 1
    assert "over the model's max_batch_size 8" in too_big.output

    down = CliRunner().invoke(
        app,
        ["bench", "addsub", "--endpoint-url", f"http://127.0.0.1:{_free_port()}",
         "--endpoint", "local", "--manifest", str(local_endpoint.store_dir), "--duration", "0.1"],
    )  # fmt: skip
    assert down.exit_code == 1
    assert "the endpoint is not reachable" in down.output
    assert "Traceback" not in down.output


def test_bench_reads_inputs_from_a_file(
    local_endpoint: LocalEndpointHandle, tmp_path: Path
) -> None:
    inputs = tmp_path / "in.json"
    inputs.write_text(json.dumps({"INPUT0": [[1, 2, 3, 4]] * 2, "INPUT1": [[0, 0, 0, 0]] * 2}))
    result = _bench(
        local_endpoint, "addsub", "--input", str(inputs), "-c", "1", "--duration", "0.3",
        "--warmup", "0", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["inputs"] == str(inputs)
    assert report["items_per_request"] == 2
