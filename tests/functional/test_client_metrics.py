"""The SDK's per-model metrics (`metrics=` / DEPLOY_MODEL_METRICS): off unless asked for,
then one EMF record per `infer` call, sync and async, checked against the EMF spec.

The endpoint is the scripted InvokeEndpoint server of test_client_retry (a
real Triton binary answer, or SageMaker's error answers); the SDK resolves
the logical name through a manifest file.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deploy.client import (
    AsyncEndpoint,
    ClientError,
    Endpoint,
    InvalidInputError,
    ModelError,
    RetriesExhaustedError,
    RetryPolicy,
)
from tests.emf_spec import check_emf
from tests.functional.test_client_retry import INPUTS, Reply, Script, make_handler

FAST = RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.02, total_timeout=10)
TARGET = "double-0123456789abcdef.tar.gz"
MANIFEST = {
    "format": 1,
    "hosting": "multi-model",
    "models": {
        "double": {
            "name": "double",
            "target_model": TARGET,
            "max_batch_size": 0,
            "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}],
            "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [4]}],
        }
    },
}


@pytest.fixture
def endpoint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[dict[str, Any], Script]]:
    """Keyword arguments for an endpoint on the scripted server, and its script."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("DEPLOY_MODEL_METRICS", raising=False)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(MANIFEST), encoding="utf-8")
    script = Script()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(script))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield {"endpoint_url": url, "manifest": manifest, "retries": FAST}, script
    httpd.shutdown()
    httpd.server_close()


def records(text: str) -> list[dict[str, Any]]:
    return [check_emf(line) for line in text.splitlines() if '"_aws"' in line]


def test_metrics_are_off_unless_asked_for(
    endpoint: tuple[dict[str, Any], Script],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    options, _ = endpoint
    with Endpoint("ep", **options) as quiet:
        quiet.infer("double", INPUTS)
    assert records(capsys.readouterr().out) == []
    # The environment turns them on; metrics=False wins over it.
    monkeypatch.setenv("DEPLOY_MODEL_METRICS", "stdout")
    with Endpoint("ep", metrics=False, **options) as off:
        off.infer("double", INPUTS)
    assert records(capsys.readouterr().out) == []
    with Endpoint("ep", **options) as on:
        on.infer("double", INPUTS)
    (record,) = records(capsys.readouterr().out)
    assert (record["Endpoint"], record["Model"], record["TargetModel"]) == ("ep", "double", TARGET)


def test_a_call_is_one_record_of_its_bytes_and_latency(
    endpoint: tuple[dict[str, Any], Script],
) -> None:
    options, script = endpoint
    stream = io.StringIO()
    with Endpoint("ep", metrics=stream, **options) as ep:
        result = ep.infer("double", INPUTS)
    assert result.target_model == TARGET
    (record,) = records(stream.getvalue())
    (directive,) = record["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "Deploy/Models"
    assert directive["Dimensions"] == [["Endpoint", "Model"], ["Endpoint", "Model", "TargetModel"]]
    assert record["Requests"] == 1
    assert (record["ClientErrors"], record["ModelErrors"], record["Throttles"]) == (0, 0, 0)
    assert record["RequestBytes"] == len(script.bodies[0])
    assert record["ResponseBytes"] > 16  # a JSON header and 16 bytes of FP32
    assert record["Latency"] > 0


def test_errors_are_counted_by_class(endpoint: tuple[dict[str, Any], Script]) -> None:
    options, script = endpoint
    stream = io.StringIO()
    script.replies = [
        Reply(429, "ThrottlingException"),
        Reply(429, "ThrottlingException"),
        Reply(424, "ModelError", {"OriginalStatusCode": 500, "OriginalMessage": "boom"}),
        Reply(400, "ValidationError"),
    ]
    with Endpoint("ep", metrics=stream, **options) as ep:
        with pytest.raises(RetriesExhaustedError):
            ep.infer("double", INPUTS)
        with pytest.raises(ModelError):
            ep.infer("double", INPUTS)
        with pytest.raises(ClientError):
            ep.infer("double", INPUTS)
        with pytest.raises(InvalidInputError):  # refused before sending
            ep.infer("double", {"INPUT0": np.zeros(3, np.float32)})
    counts = [
        (r["Throttles"], r["ModelErrors"], r["ClientErrors"]) for r in records(stream.getvalue())
    ]
    assert counts == [(1, 0, 0), (0, 1, 0), (0, 0, 1), (0, 0, 1)]
    assert len(script.bodies) == 4  # two throttled attempts are one call


def test_a_logger_gets_one_info_record_per_call(
    endpoint: tuple[dict[str, Any], Script], caplog: pytest.LogCaptureFixture
) -> None:
    options, _ = endpoint
    logger = logging.getLogger("my-service.model-metrics")
    with (
        caplog.at_level(logging.INFO, logger=logger.name),
        Endpoint("ep", metrics=logger, **options) as ep,
    ):
        ep.infer("double", INPUTS)
    (record,) = [r for r in caplog.records if r.name == logger.name]
    assert check_emf(record.getMessage())["Model"] == "double"


def test_the_async_endpoint_emits_the_same_record(
    endpoint: tuple[dict[str, Any], Script],
) -> None:
    options, script = endpoint
    stream = io.StringIO()

    async def call() -> None:
        async with AsyncEndpoint("ep", metrics=stream, **options) as ep:
            await ep.infer("double", INPUTS)

    asyncio.run(call())
    (record,) = records(stream.getvalue())
    assert (record["Model"], record["TargetModel"], record["Requests"]) == ("double", TARGET, 1)
    assert record["RequestBytes"] == len(script.bodies[0])


def test_an_unknown_destination_in_the_environment_is_an_error(
    endpoint: tuple[dict[str, Any], Script], monkeypatch: pytest.MonkeyPatch
) -> None:
    options, _ = endpoint
    monkeypatch.setenv("DEPLOY_MODEL_METRICS", "/var/log/metrics")
    with pytest.raises(ValueError, match="DEPLOY_MODEL_METRICS='/var/log/metrics'"):
        Endpoint("ep", **options)
