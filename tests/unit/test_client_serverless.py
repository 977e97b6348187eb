"""The SDK on a serverless endpoint: 4 MB requests at most, refused before sending."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from deploy.client import ClientError, Endpoint, PayloadTooLargeError, RetryPolicy

ADDSUB = {
    "name": "addsub",
    "target_model": "addsub",
    "max_batch_size": 0,
    "inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [-1]},
        {"name": "INPUT1", "datatype": "FP32", "shape": [-1]},
    ],
    "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [-1]}],
}
# 2 x 600k FP32 = 4.8 MB of tensor data: over serverless's 4 MB, under the 6 MB real-time.
BIG = np.zeros(600_000, np.float32)


def manifest(tmp_path: Path, hosting: str) -> Path:
    path = tmp_path / f"{hosting}.json"
    path.write_text(json.dumps({"format": 1, "hosting": hosting, "models": {"addsub": ADDSUB}}))
    return path


def endpoint(path: Path) -> Endpoint:
    # Nothing listens on port 9: a request that passes the checks fails to connect.
    return Endpoint(
        "sls",
        endpoint_url="http://127.0.0.1:9",
        manifest=path,
        region="us-east-1",
        retries=RetryPolicy(max_attempts=1),
    )


def test_a_request_over_4_mb_is_refused_naming_both_sizes_and_async(tmp_path: Path) -> None:
    client = endpoint(manifest(tmp_path, "serverless"))
    with client, pytest.raises(PayloadTooLargeError) as raised:
        client.infer("addsub", {"INPUT0": BIG, "INPUT1": BIG})
    error = raised.value
    assert error.limit == 4 * 1024 * 1024 and error.size > error.limit
    assert error.hosting == "serverless" and error.alternative == "async"
    text = str(error)
    assert f"request payload is {error.size} bytes" in text
    assert "over the serverless endpoint's limit of 4194304 bytes" in text
    assert "hosting 'async' takes requests up to 1073741824 bytes" in text
    assert 'hosting = "async"' in (error.fix or "")


def test_the_same_request_passes_the_check_on_a_real_time_endpoint(tmp_path: Path) -> None:
    client = endpoint(manifest(tmp_path, "single-model"))
    with client, pytest.raises(ClientError) as raised:
        client.infer("addsub", {"INPUT0": BIG, "INPUT1": BIG})
    # It got as far as sending (nothing listens): the 6 MB limit let it through.
    assert not isinstance(raised.value, PayloadTooLargeError)


def test_a_lower_max_payload_bytes_still_applies_on_serverless(tmp_path: Path) -> None:
    path = manifest(tmp_path, "serverless")
    small = Endpoint(
        "sls", endpoint_url="http://127.0.0.1:9", manifest=path, max_payload_bytes=1000
    )
    with small, pytest.raises(PayloadTooLargeError, match="limit of 1000 bytes"):
        small.infer("addsub", {"INPUT0": BIG[:1000], "INPUT1": BIG[:1000]})
