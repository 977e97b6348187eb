"""A per-model canary on the local multi-model endpoint (real tritonserver), split by
the SDK and by the front door's real handler (its manifest in the moto server's S3).

GIVEN `addsub` deployed with `deploy up --local` WHEN a version whose OUTPUT0 is
100 higher goes up with `--canary 10%` THEN the published manifest keeps the live
version and names the new one as its canary; of 1,000 SDK calls and of 1,000
front door calls about 10% reach the canary (within 4 standard deviations of the
binomial), each answer's values match the TargetModel said to answer; a sticky
key always reaches the same version, the same one through the SDK and the front
door; a client that read the manifest before the canary routes by it once its
`manifest_ttl` has passed, and the front door drops a rolled-back canary once
its manifest's lifetime has passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.client import AsyncEndpoint, Endpoint
from deploy.client.manifest import STICKY_KEY_HEADER, loads, split
from deploy_handlers.front_door.app import TARGET_MODEL_RESPONSE_HEADER, FrontDoor
from deploy_handlers.front_door.manifest import ManifestCache
from tests.conftest import EXAMPLES

pytestmark = [pytest.mark.triton, pytest.mark.moto, pytest.mark.slow]

EVENTS = Path(__file__).resolve().parents[1] / "events"
CALLS = 1000
PERCENT = 10
BUCKET = "canary-front-door-store"
KEY = "models/manifest.json"
A = np.array([[1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
B = np.full((1, 4), 0.5, dtype=np.float32)


def assert_binomial_share(count: int, calls: int, percent: float) -> None:
    """`count` of `calls` is within 4 standard deviations of `percent`%."""
    p = percent / 100
    mean, sd = calls * p, math.sqrt(calls * p * (1 - p))
    assert abs(count - mean) <= 4 * sd, f"{count} of {calls} calls, expected {mean} ± {4 * sd:.0f}"


def aws_client(service: str, url: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def store(root: Path) -> Path:
    (path,) = (root / ".deploy" / "local").rglob("store/manifest.json")
    return path.parent


def published(root: Path) -> bytes:
    return (store(root) / "manifest.json").read_bytes()


def infer_event(sticky_key: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / "infer.json").read_text(encoding="utf-8"))
    if sticky_key is not None:
        event["headers"][STICKY_KEY_HEADER.lower()] = sticky_key
    return event


def test_canary_split_by_sdk_and_front_door_on_the_local_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_server: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEPLOY_LOCAL_PORT", "0")  # any free port: the machine is shared
    repo = tmp_path / "models"
    shutil.copytree(
        EXAMPLES / "addsub", repo / "addsub", ignore=shutil.ignore_patterns("__pycache__")
    )
    up_args = ["up", "--local", "--repository", str(repo), "--package-dir", "build"]
    runner = CliRunner()
    first = runner.invoke(app, [*up_args, "--json"])
    closing = contextlib.ExitStack()
    try:
        assert first.exit_code == 0, first.output
        url = json.loads(first.output)["url"]
        inputs = {"INPUT0": A, "INPUT1": B}
        # Clients that read the manifest before the canary: one with a 1 s lifetime,
        # one that never reads it again.
        fresh = closing.enter_context(Endpoint(endpoint_url=url, manifest_ttl=1.0))
        stale = closing.enter_context(Endpoint(endpoint_url=url, manifest_ttl=None))
        live = fresh.infer("addsub", inputs).target_model
        read_at = time.monotonic()
        assert stale.infer("addsub", inputs).target_model == live

        # WHEN a version whose answers differ goes up as a 10% canary
        model_py = repo / "addsub" / "1" / "model.py"
        model_py.write_text(model_py.read_text().replace("(a + b)", "(a + b + 100)"))
        canary_up = runner.invoke(app, [*up_args, "--canary", f"{PERCENT}%"])
        assert canary_up.exit_code == 0, canary_up.output
        # THEN the plan says so, and the manifest keeps the live version, naming the canary
        text = " ".join(canary_up.stdout.split())
        assert f"addsub canary {PERCENT}% → addsub-" in text, canary_up.stdout
        manifest = loads(published(tmp_path), "published manifest")
        info = manifest.models["addsub"]
        assert info.target_model == live
        assert info.canary is not None and info.canary.percent == PERCENT
        new = info.canary.target_model
        assert new != live and new in text
        # Both archives are in the store the endpoint loads from.
        assert (store(tmp_path) / new).is_file() and (store(tmp_path) / live).is_file()
        expected = {live: (A + B).ravel().tolist(), new: (A + B + 100).ravel().tolist()}

        # The TTL: once its second has passed, the client with a lifetime routes by the
        # new manifest; the other still sends every call to the live version.
        on_canary = next(k for k in (f"user-{n}" for n in range(1000)) if split(info, k) == new)
        time.sleep(max(0.0, read_at + 1.05 - time.monotonic()))
        assert fresh.infer("addsub", inputs, sticky_key=on_canary).target_model == new
        assert stale.infer("addsub", inputs, sticky_key=on_canary).target_model == live

        # WHEN 1,000 SDK calls go out without a sticky key
        with Endpoint(endpoint_url=url) as endpoint:
            answers = [endpoint.infer("addsub", inputs) for _ in range(CALLS)]
            # THEN about 10% reach the canary, and each answer is its version's
            counts = Counter(answer.target_model for answer in answers)
            assert set(counts) == {live, new}
            assert_binomial_share(counts[new], CALLS, PERCENT)
            for answer in answers:
                assert answer["OUTPUT0"].ravel().tolist() == expected[answer.target_model]

            # AND a sticky key always reaches the same version
            sdk_choice = {}
            for n in range(40):
                key = f"session-{n}"
                seen = {
                    endpoint.infer("addsub", inputs, sticky_key=key).target_model for _ in range(5)
                }
                assert len(seen) == 1, (key, seen)
                sdk_choice[key] = seen.pop()
            assert sdk_choice["session-0"] == split(info, "session-0")
        with Endpoint(endpoint_url=url, sticky_key=on_canary) as sticky:  # the client's default
            assert {sticky.infer("addsub", inputs).target_model for _ in range(10)} == {new}

        async def sticky_async() -> set[str | None]:
            async with AsyncEndpoint(endpoint_url=url) as endpoint:
                return {
                    (await endpoint.infer("addsub", inputs, sticky_key=key)).target_model
                    for key in (on_canary,) * 5
                }

        assert asyncio.run(sticky_async()) == {new}

        # WHEN the front door (the real handler) serves the same manifest from S3
        s3 = aws_client("s3", moto_server)
        s3.create_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key=KEY, Body=published(tmp_path))
        front_door = FrontDoor(
            runtime=aws_client("sagemaker-runtime", url),
            sagemaker=aws_client("sagemaker", moto_server),
            manifest=ManifestCache(s3, BUCKET, KEY, ttl_s=1.0),
            endpoint_name="local",
        )
        answered: Counter[str] = Counter()
        for _ in range(CALLS):
            response = front_door.handle(infer_event())
            assert response["statusCode"] == 200, response["body"]
            target = response["headers"][TARGET_MODEL_RESPONSE_HEADER]
            outputs = {o["name"]: o for o in json.loads(response["body"])["outputs"]}
            assert outputs["OUTPUT0"]["data"] == expected[target]
            answered[target] += 1
        # THEN the same share reaches the canary
        assert set(answered) == {live, new}
        assert_binomial_share(answered[new], CALLS, PERCENT)
        # AND the X-Deploy-Sticky-Key header keeps a caller on the version the SDK picks
        for key in ("session-0", "session-1", "session-2", on_canary):
            targets = {
                front_door.handle(infer_event(key))["headers"][TARGET_MODEL_RESPONSE_HEADER]
                for _ in range(5)
            }
            assert targets == {sdk_choice.get(key, new)}, key

        # WHEN the canary is rolled back (the manifest names the live version alone)
        rolled_back = json.loads(published(tmp_path))
        del rolled_back["models"]["addsub"]["canary"]
        s3.put_object(Bucket=BUCKET, Key=KEY, Body=json.dumps(rolled_back).encode())
        time.sleep(1.05)
        # THEN the front door sends every call to the live version within its lifetime
        targets = {
            front_door.handle(infer_event(key))["headers"][TARGET_MODEL_RESPONSE_HEADER]
            for key in (on_canary, None, None, None, None)
        }
        assert targets == {live}
    finally:
        closing.close()
        down = runner.invoke(app, ["down", "--local"])
    assert down.exit_code == 0, down.output
