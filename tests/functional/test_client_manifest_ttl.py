"""The SDK's manifest has a bounded lifetime: a change published to S3 (a canary,
its rollback) reaches a running client within `manifest_ttl`, through real
botocore against the moto server.

GIVEN a client that read a manifest from s3:// WHEN a new manifest is published
THEN the client keeps the one it read until its lifetime is over, then routes
by the new one; a re-read that fails keeps the manifest read before.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from deploy.client import Endpoint

pytestmark = pytest.mark.moto

BUCKET = "manifest-ttl-store"
KEY = "models/manifest.json"
LIVE = "addsub-1111111111111111.tar.gz"
CANARY = "addsub-2222222222222222.tar.gz"


def manifest(canary: dict[str, Any] | None = None) -> bytes:
    entry: dict[str, Any] = {
        "name": "addsub",
        "target_model": LIVE,
        "max_batch_size": 8,
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}],
        "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [4]}],
    }
    if canary is not None:
        entry["canary"] = canary
    document = {
        "format": 1,
        "format_minor": 2,
        "hosting": "multi-model",
        "models": {"addsub": entry},
    }
    return json.dumps(document).encode()


@pytest.fixture
def s3(moto_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    client.put_object(Bucket=BUCKET, Key=KEY, Body=manifest())
    yield client
    client.delete_object(Bucket=BUCKET, Key=KEY)
    client.delete_bucket(Bucket=BUCKET)


def test_a_published_canary_and_its_rollback_reach_a_cached_client_within_the_ttl(
    s3: Any,
) -> None:
    ttl = 1.0
    url = f"s3://{BUCKET}/{KEY}"
    with Endpoint("ttl-endpoint", manifest=url, manifest_ttl=ttl) as endpoint:
        first = endpoint.model_info("addsub")
        assert first is not None and first.canary is None
        read_at = time.monotonic()

        # WHEN a canary is published
        s3.put_object(
            Bucket=BUCKET, Key=KEY, Body=manifest({"target_model": CANARY, "percent": 50})
        )
        cached = endpoint.model_info("addsub")
        # THEN within the lifetime the client keeps what it read (no read per call)
        if time.monotonic() - read_at < ttl:
            assert cached is not None and cached.canary is None
        time.sleep(ttl - (time.monotonic() - read_at) + 0.05)
        # AND once it is over, the next call routes by the new manifest
        info = endpoint.model_info("addsub")
        assert info is not None and info.canary is not None
        assert info.canary.target_model == CANARY

        # WHEN the canary is rolled back (the manifest names the live version alone)
        s3.put_object(Bucket=BUCKET, Key=KEY, Body=manifest())
        time.sleep(ttl + 0.05)
        # THEN the client drops it within the lifetime too
        back = endpoint.model_info("addsub")
        assert back is not None and back.canary is None

        # WHEN the manifest cannot be read at its next re-read
        s3.delete_object(Bucket=BUCKET, Key=KEY)
        time.sleep(ttl + 0.05)
        # THEN the client goes on with the manifest it read before
        kept = endpoint.model_info("addsub")
        assert kept is not None and kept.target_model == LIVE
        s3.put_object(Bucket=BUCKET, Key=KEY, Body=manifest())


def test_manifest_ttl_none_reads_once_and_a_negative_one_is_refused(s3: Any) -> None:
    url = f"s3://{BUCKET}/{KEY}"
    with Endpoint("ttl-endpoint", manifest=url, manifest_ttl=None) as endpoint:
        assert endpoint.model_info("addsub") is not None
        s3.put_object(Bucket=BUCKET, Key=KEY, Body=manifest({"target_model": CANARY, "percent": 5}))
        time.sleep(0.1)
        info = endpoint.model_info("addsub")
        assert info is not None and info.canary is None
    with pytest.raises(ValueError, match="manifest_ttl"):
        Endpoint("ttl-endpoint", manifest=url, manifest_ttl=-1)
