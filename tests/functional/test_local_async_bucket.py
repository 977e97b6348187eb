"""`deploy serve --hosting async` checks its bucket before it starts, against the moto server."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from tests.conftest import EXAMPLES

pytestmark = [pytest.mark.moto]
ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_bucket_is_named_before_the_endpoint_starts(
    moto_server: str, tmp_path: Path
) -> None:
    environment = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "AWS_ENDPOINT_URL": moto_server,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    s3 = boto3.client(
        "s3",
        endpoint_url=moto_server,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    assert "no-such-async-bucket" not in {b["Name"] for b in s3.list_buckets()["Buckets"]}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "deploy", "serve", str(EXAMPLES), "--hosting", "async",
         "--async-output", "s3://no-such-async-bucket/jobs/", "--port", "0",
         "--state-dir", str(tmp_path / "state")],
        env=environment, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "bucket no-such-async-bucket does not exist" in done.stderr
    assert "aws s3 mb s3://no-such-async-bucket" in done.stderr
    assert "Traceback" not in done.stderr
    assert "tritonserver pid" not in done.stdout + done.stderr  # nothing was started
    assert time.monotonic() - started < 60
