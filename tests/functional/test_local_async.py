"""The local asynchronous endpoint on the real tritonserver, with S3 on the moto server.

GIVEN one asynchronous endpoint (the router layout over `tests/fixtures/async_repo`
plus the example `strings` model) reading and writing `s3://<bucket>/async/`
on the moto server, and reading requests from `s3://<bucket>/requests/` too,
WHEN boto3's `invoke_endpoint_async` or the SDK call it, THEN answers and
failures land where the 202 said, and the SDK turns them into results and
errors; requests from elsewhere, bad headers, JSON too deep for tritonserver
and a full queue are refused, and every accepted request ends in an output
or a failure object, across a tritonserver restart and `deploy serve`'s SIGTERM.
"""

from __future__ import annotations

import contextlib
import http.client
import importlib.util
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest
from botocore.config import Config

from deploy.async_inference import AsyncLocations
from deploy.client import (
    AsyncEndpoint,
    AsyncInferenceOptions,
    Endpoint,
    InferenceTimeoutError,
    ModelError,
)
from deploy.client.codec import decode_response, encode

pytestmark = [pytest.mark.triton, pytest.mark.moto, pytest.mark.slow]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "async_repo"
EXAMPLES = Path(__file__).resolve().parents[2] / "model_packages" / "examples"
BUCKET = "async-endpoint-tests"
ENDPOINT = "my-async-endpoint"  # the README's snippet calls it by this name


def _bytestats() -> Any:
    spec = importlib.util.spec_from_file_location(
        "bytestats_model", FIXTURES / "bytestats/1/model.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Served:
    url: str
    locations: AsyncLocations
    s3: Any
    endpoint: Any

    def keys(self, prefix: str = "async/") -> list[str]:
        listed = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
        return sorted(item["Key"] for item in listed.get("Contents", []))

    def wait_for(self, url: str, timeout: float = 60.0) -> dict[str, Any]:
        bucket, _, key = url.removeprefix("s3://").partition("/")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(self.s3.exceptions.NoSuchKey):
                answer: dict[str, Any] = self.s3.get_object(Bucket=bucket, Key=key)
                return answer
            time.sleep(0.1)
        raise AssertionError(f"{url} did not appear in {timeout}s; have {self.keys()}")


@pytest.fixture(scope="module")
def served(moto_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from deploy.local.modes.async_endpoint import AsyncLocalEndpoint
    from deploy.local.modes.endpoint import EndpointOptions

    repository = tmp_path_factory.mktemp("async-repo")
    for model in ("bytestats", "sleepy"):
        shutil.copytree(FIXTURES / model, repository / model)
    # bls_addsub calls addsub through BLS: the router must load addsub first.
    for model in ("strings", "addsub", "bls_addsub"):
        shutil.copytree(EXAMPLES / model, repository / model)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ENDPOINT_URL", moto_server)
        patch.setenv("AWS_ACCESS_KEY_ID", "testing")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        locations = AsyncLocations.under(f"s3://{BUCKET}/async/")
        endpoint = AsyncLocalEndpoint(
            repository,
            locations=locations,
            options=EndpointOptions(endpoint_name=ENDPOINT),
            max_concurrent=2,
            input_prefixes=(f"s3://{BUCKET}/requests/",),
        ).start()
        try:
            yield Served(endpoint.url, locations, s3, endpoint)
        finally:
            endpoint.stop()


def runtime(url: str) -> Any:
    return boto3.client("sagemaker-runtime", endpoint_url=url, region_name="us-east-1")


def upload_request(served: Served, key: str, inputs: dict[str, Any], model: str) -> str:
    request = encode(inputs, parameters={"target_model": model})
    served.s3.put_object(Bucket=BUCKET, Key=key, Body=request.body)
    return request.content_type


# --- the wire API, through boto3 ----------------------------------------------------


def test_boto3_invoke_endpoint_async_answers_202_and_writes_the_output(served: Served) -> None:
    content_type = upload_request(
        served, "requests/strings", {"TEXT": np.array([b"ab", b"cde"], dtype=object)}, "strings"
    )
    answer = runtime(served.url).invoke_endpoint_async(
        EndpointName=ENDPOINT,
        InputLocation=f"s3://{BUCKET}/requests/strings",
        ContentType=content_type,
        InferenceId="my-id-1",
        InvocationTimeoutSeconds=120,
    )
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 202
    assert answer["InferenceId"] == "my-id-1"
    assert answer["OutputLocation"].startswith(served.locations.output_prefix)
    assert answer["OutputLocation"].endswith(".out")
    assert answer["FailureLocation"].startswith(served.locations.failure_prefix)
    assert answer["FailureLocation"].endswith("-error.out")
    stored = served.wait_for(answer["OutputLocation"])
    assert "json-header-size=" in stored["ContentType"]
    decoded = decode_response(stored["Body"].read(), stored["ContentType"])
    assert decoded.outputs["LENGTHS"].tolist() == [2, 3]
    assert decoded.outputs["UPPER"].tolist() == [b"AB", b"CDE"]


def test_a_model_error_lands_in_the_failure_location(served: Served) -> None:
    content_type = upload_request(
        served, "requests/unknown", {"TEXT": np.array([b"x"], dtype=object)}, "no_such_model"
    )
    answer = runtime(served.url).invoke_endpoint_async(
        EndpointName=ENDPOINT,
        InputLocation=f"s3://{BUCKET}/requests/unknown",
        ContentType=content_type,
    )
    text = served.wait_for(answer["FailureLocation"])["Body"].read().decode()
    assert "unknown model 'no_such_model'" in text
    assert "strings" in text  # the router lists what it serves


def test_a_missing_input_object_lands_in_the_failure_location(served: Served) -> None:
    answer = runtime(served.url).invoke_endpoint_async(
        EndpointName=ENDPOINT, InputLocation=f"s3://{BUCKET}/requests/never-uploaded"
    )
    text = served.wait_for(answer["FailureLocation"])["Body"].read().decode()
    assert f"cannot read the input s3://{BUCKET}/requests/never-uploaded" in text


def test_the_invocation_timeout_fails_the_request(served: Served) -> None:
    content_type = upload_request(
        served, "requests/sleep", {"SECONDS": np.array([4.0], dtype=np.float32)}, "sleepy"
    )
    started = time.monotonic()
    answer = runtime(served.url).invoke_endpoint_async(
        EndpointName=ENDPOINT,
        InputLocation=f"s3://{BUCKET}/requests/sleep",
        ContentType=content_type,
        InvocationTimeoutSeconds=1,
    )
    text = served.wait_for(answer["FailureLocation"])["Body"].read().decode()
    assert "did not answer within InvocationTimeoutSeconds 1s" in text
    assert time.monotonic() - started < 4.0
    time.sleep(3.5)  # let the model finish before the next test uses it


def test_invoke_endpoint_is_refused_on_an_asynchronous_endpoint(served: Served) -> None:
    client = runtime(served.url)
    with pytest.raises(client.exceptions.ValidationError, match="InvokeEndpointAsync"):
        client.invoke_endpoint(EndpointName=ENDPOINT, Body=b"{}", ContentType="application/json")


def _header_bytes(value: str) -> bytes:
    # As http.client sends a str (latin-1: '²' is the byte 0xb2), else UTF-8.
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode()


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "needs an InputLocation"),
        ({"X-Amzn-SageMaker-InputLocation": "ftp://x/y"}, "regular expression"),
        ({"X-Amzn-SageMaker-InputLocation": "https://x/y"}, "s3://bucket/key objects only"),
        (
            {
                "X-Amzn-SageMaker-InputLocation": f"s3://{BUCKET}/requests/k",
                "X-Amzn-SageMaker-InvocationTimeoutSeconds": "3601",
            },
            "between 1 and 3600",
        ),
        (
            {
                "X-Amzn-SageMaker-InputLocation": f"s3://{BUCKET}/requests/k",
                "X-Amzn-SageMaker-RequestTTLSeconds": "59",
            },
            "between 60 and 21600",
        ),
        # Numbers are plain ASCII decimals: Python's int() takes these three.
        (
            {
                "X-Amzn-SageMaker-InputLocation": f"s3://{BUCKET}/requests/k",
                "X-Amzn-SageMaker-RequestTTLSeconds": "²",
            },
            "between 60 and 21600",
        ),
        (
            {
                "X-Amzn-SageMaker-InputLocation": f"s3://{BUCKET}/requests/k",
                "X-Amzn-SageMaker-RequestTTLSeconds": "１２０",
            },
            "between 60 and 21600",
        ),
        (
            {
                "X-Amzn-SageMaker-InputLocation": f"s3://{BUCKET}/requests/k",
                "X-Amzn-SageMaker-InvocationTimeoutSeconds": "²",
            },
            "between 1 and 3600",
        ),
        (
            {
                "X-Amzn-SageMaker-InputLocation": f"s3://{BUCKET}/requests/k",
                "X-Amzn-SageMaker-InvocationTimeoutSeconds": "9" * 5000,
            },
            "between 1 and 3600",
        ),
        (
            {
                "X-Amzn-SageMaker-InputLocation": f"s3://{BUCKET}/requests/k",
                "X-Amzn-SageMaker-Content-Type": "application/jsön",
            },
            "at 'contentType' failed",
        ),
    ],
)
def test_bad_calls_get_a_validation_error(
    served: Served, headers: dict[str, str], message: str
) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", served.endpoint.port, timeout=10)
    encoded = {name: _header_bytes(value) for name, value in headers.items()}
    try:
        connection.request("POST", f"/endpoints/{ENDPOINT}/async-invocations", b"", encoded)
        response = connection.getresponse()
        body = json.loads(response.read())
    finally:
        connection.close()
    assert response.status == 400
    assert response.getheader("x-amzn-ErrorType") == "ValidationError"
    assert message in body["message"]


@pytest.mark.parametrize(
    "location",
    [
        f"s3://{BUCKET}/elsewhere/secret.json",
        f"s3://{BUCKET}/requestsX/secret.json",  # a prefix of the name, not of the folder
        f"s3://{BUCKET}/requests/../elsewhere/secret.json",
        "s3://someone-elses-bucket/requests/secret.json",
    ],
)
def test_inputs_outside_the_allowed_prefixes_are_refused(served: Served, location: str) -> None:
    served.s3.put_object(Bucket=BUCKET, Key="elsewhere/secret.json", Body=b"{}")
    before = set(served.keys())
    client = runtime(served.url)
    with pytest.raises(client.exceptions.ValidationError) as raised:
        client.invoke_endpoint_async(EndpointName=ENDPOINT, InputLocation=location)
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    message = raised.value.response["Error"]["Message"]
    assert f"InputLocation {location}" in message
    assert f"{served.locations.input_prefix}, s3://{BUCKET}/requests/" in message
    assert set(served.keys()) == before  # nothing queued, nothing written


def test_json_too_deep_for_tritonserver_fails_each_request_and_the_server_lives(
    served: Served,
) -> None:
    # GIVEN six inputs of ~2.5 MB whose nesting starts after the first streamed chunk
    # (already sent to tritonserver when the scanner meets it)
    padding = b"x" * (1536 * 1024)
    body = (
        b'{"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1], "data": ["'
        + padding
        + b'"]}], "parameters": {"deep": '
        + b"[" * 500_000
        + b"]" * 500_000
        + b"}}"
    )
    served.s3.put_object(Bucket=BUCKET, Key="requests/deep", Body=body)
    crashes = served.endpoint.supervisor.crashes
    client = runtime(served.url)
    # WHEN each is invoked
    answers = [
        client.invoke_endpoint_async(
            EndpointName=ENDPOINT,
            InputLocation=f"s3://{BUCKET}/requests/deep",
            ContentType="application/json",
        )
        for _ in range(6)
    ]
    # THEN each ends in a failure object naming the limit, and tritonserver never crashed
    for answer in answers:
        text = served.wait_for(answer["FailureLocation"])["Body"].read().decode()
        assert "nests arrays and objects more than 64 levels deep" in text
        assert f"s3://{BUCKET}/requests/deep" in text
    assert served.endpoint.supervisor.crashes == crashes
    content_type = upload_request(
        served, "requests/after-deep", {"TEXT": np.array([b"ok"], dtype=object)}, "strings"
    )
    answer = client.invoke_endpoint_async(
        EndpointName=ENDPOINT,
        InputLocation=f"s3://{BUCKET}/requests/after-deep",
        ContentType=content_type,
    )
    stored = served.wait_for(answer["OutputLocation"])
    decoded = decode_response(stored["Body"].read(), stored["ContentType"])
    assert decoded.outputs["UPPER"].tolist() == [b"OK"]


def test_a_json_header_size_outside_the_input_fails_before_tritonserver_reads_it(
    served: Served,
) -> None:
    served.s3.put_object(Bucket=BUCKET, Key="requests/header-size", Body=b'{"inputs": []}')
    answer = runtime(served.url).invoke_endpoint_async(
        EndpointName=ENDPOINT,
        InputLocation=f"s3://{BUCKET}/requests/header-size",
        ContentType="application/vnd.sagemaker-triton.binary+json;json-header-size=99999",
    )
    text = served.wait_for(answer["FailureLocation"])["Body"].read().decode()
    assert f"the input s3://{BUCKET}/requests/header-size: json-header-size=99999" in text
    assert "larger than the request body (14 bytes)" in text


def test_manifest_names_the_s3_locations(served: Served) -> None:
    with Endpoint(ENDPOINT, endpoint_url=served.url) as endpoint:
        manifest = endpoint._manifest.get()
    assert manifest is not None and manifest.hosting == "async"
    assert manifest.async_inference is not None
    assert manifest.async_inference.input_prefix == served.locations.input_prefix
    assert manifest.async_inference.output_prefix == served.locations.output_prefix
    assert manifest.async_inference.failure_prefix == served.locations.failure_prefix
    assert sorted(manifest.models) == ["addsub", "bls_addsub", "bytestats", "sleepy", "strings"]


# --- the SDK ------------------------------------------------------------------------


def test_sdk_infer_is_unchanged_and_cleans_up(served: Served) -> None:
    before = set(served.keys())
    with Endpoint(ENDPOINT, endpoint_url=served.url) as endpoint:
        result = endpoint.infer("strings", {"TEXT": np.array([b"hello", b"s3"], dtype=object)})
    assert result["LENGTHS"].tolist() == [5, 2]
    assert result["UPPER"].tolist() == [b"HELLO", b"S3"]
    assert set(served.keys()) == before  # its request and its answer are gone


def test_a_bls_model_answers_through_the_router_which_loads_its_callee_first(
    served: Served,
) -> None:
    # SageMaker starts the router layout with only the router loaded; the router loads
    # a model's BLS callees (deploy.dependencies or literal names) before the model.
    a = np.arange(4, dtype=np.float32).reshape(1, 4)
    with Endpoint(ENDPOINT, endpoint_url=served.url) as endpoint:
        result = endpoint.infer("bls_addsub", {"A": a, "B": 2 * a})
    assert result["SUM"].tolist() == (6 * a).tolist()  # 2A + 2B
    assert result["DIFF"].tolist() == (-2 * a).tolist()


def test_sdk_keeps_objects_when_told(served: Served) -> None:
    options = AsyncInferenceOptions(keep_objects=True)
    with Endpoint(ENDPOINT, endpoint_url=served.url, async_options=options) as endpoint:
        pending = endpoint.submit("strings", {"TEXT": np.array([b"keep"], dtype=object)})
        assert pending.wait()["LENGTHS"].tolist() == [4]
    assert pending.input_location is not None and pending.output_location is not None
    input_key = pending.input_location.split("/", 3)[3]
    assert input_key.startswith("async/input/") and len(input_key.rsplit("/", 1)[1]) == 64
    assert {input_key, pending.output_location.split("/", 3)[3]} <= set(served.keys())


def test_sdk_submit_returns_before_the_answer(served: Served) -> None:
    with Endpoint(ENDPOINT, endpoint_url=served.url) as endpoint:
        started = time.monotonic()
        pending = endpoint.submit("sleepy", {"SECONDS": np.array([4.0], dtype=np.float32)})
        # Well before the model's 4 s (the first call also finds the manifest; a loaded
        # 2-core machine took 1.6 s for that once).
        assert time.monotonic() - started < 3.0
        assert pending.inference_id and not pending.done()
        assert pending.wait(timeout=60)["SLEPT"].tolist() == [4.0]
        assert pending.done()


def test_sdk_turns_the_failure_object_into_the_error(served: Served) -> None:
    with (
        Endpoint(ENDPOINT, endpoint_url=served.url) as endpoint,
        pytest.raises(ModelError) as raised,
    ):
        endpoint.infer("no_such_model", {"TEXT": np.array([b"x"], dtype=object)})
    assert "unknown model 'no_such_model'" in raised.value.message
    assert "-error.out" in (raised.value.fix or "")


def test_sdk_times_out_naming_the_inference_and_failure_prefix(served: Served) -> None:
    options = AsyncInferenceOptions(wait_timeout=1.0)
    with (
        Endpoint(ENDPOINT, endpoint_url=served.url, async_options=options) as endpoint,
        pytest.raises(InferenceTimeoutError) as raised,
    ):
        pending = endpoint.submit("sleepy", {"SECONDS": np.array([3.0], dtype=np.float32)})
        pending.wait()
    text = str(raised.value)
    assert f"inference {pending.inference_id}" in text
    assert served.locations.failure_prefix in text
    time.sleep(2.5)  # the model is still busy: let it finish


def test_async_endpoint_class_infers_and_submits(served: Served) -> None:
    import asyncio

    async def run() -> tuple[list[int], list[float]]:
        async with AsyncEndpoint(ENDPOINT, endpoint_url=served.url) as endpoint:
            result = await endpoint.infer("strings", {"TEXT": np.array([b"xyz"], dtype=object)})
            pending = await endpoint.submit(
                "sleepy", {"SECONDS": np.array([0.5], dtype=np.float32)}
            )
            slept = await pending.wait(timeout=60)
            return result["LENGTHS"].tolist(), slept["SLEPT"].tolist()

    assert asyncio.run(run()) == ([3], [0.5])


def test_200_megabytes_through_the_sdk_match_the_model_run_directly(served: Served) -> None:
    # Done-when: a 200 MB request through the SDK to the local asynchronous endpoint,
    # S3 on the moto server; the same outputs as the model's own code run here.
    data = np.random.default_rng(13).integers(0, 256, 200 * 1000 * 1000, dtype=np.uint8)
    expected = _bytestats().reference(data)
    with Endpoint(ENDPOINT, endpoint_url=served.url) as endpoint:
        result = endpoint.infer("bytestats", {"DATA": data})
    for name, value in expected.items():
        np.testing.assert_array_equal(result[name], value, err_msg=name)
    assert int(result["SIZE"][0]) == 200_000_000


# --- the async lane of a paired stage -----------------------------------------------


def test_the_lane_takes_20_megabytes_and_real_time_keeps_1_megabyte(
    served: Served, local_endpoint: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN the real-time multi-model endpoint (the shared local one, examples store)
    # paired with this asynchronous endpoint as its async lane.
    document = dict(local_endpoint.manifest)
    document["async_lane"] = {
        "endpoint_name": ENDPOINT,
        "input_prefix": served.locations.input_prefix,
        "output_prefix": served.locations.output_prefix,
        "failure_prefix": served.locations.failure_prefix,
    }
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(document))
    lane = served.endpoint.invocations
    big = np.array([b"a" * (1024 * 1024)] * 20, dtype=object)  # 20 MB
    small = np.array([b"b" * (1024 * 1024)], dtype=object)  # 1 MB
    with Endpoint(
        local_endpoint.endpoint_name,
        endpoint_url=local_endpoint.url,
        async_endpoint_url=served.url,
        manifest=manifest,
    ) as endpoint:
        done = lane.completed
        with caplog.at_level(logging.DEBUG, logger="deploy.client"):
            result = endpoint.infer("strings", {"TEXT": big})
        assert result["LENGTHS"].tolist() == [1024 * 1024] * 20
        assert result.target_model is None  # went through the router, not a TargetModel
        assert lane.completed == done + 1
        assert any(f"async lane, endpoint '{ENDPOINT}'" in r.getMessage() for r in caplog.records)

        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="deploy.client"):
            result = endpoint.infer("strings", {"TEXT": small})
        assert result["LENGTHS"].tolist() == [1024 * 1024]
        assert result.target_model == local_endpoint.target_model("strings")
        assert lane.completed == done + 1
        assert not any("async lane" in r.getMessage() for r in caplog.records)


def test_queued_requests_wait_for_a_tritonserver_restart_and_all_answer(served: Served) -> None:
    # GIVEN six requests of 1.5 s each, two running (max_concurrent=2) and four queued
    content_type = upload_request(
        served, "requests/restart", {"SECONDS": np.array([1.5], dtype=np.float32)}, "sleepy"
    )
    client = runtime(served.url)
    supervisor = served.endpoint.supervisor
    crashes = supervisor.crashes
    answers = [
        client.invoke_endpoint_async(
            EndpointName=ENDPOINT,
            InputLocation=f"s3://{BUCKET}/requests/restart",
            ContentType=content_type,
        )
        for _ in range(6)
    ]
    time.sleep(0.7)
    # WHEN tritonserver dies mid-queue (the supervisor restarts it)
    assert supervisor.pid is not None
    os.kill(supervisor.pid, signal.SIGKILL)
    # THEN every request ends in its output: the two that ran again, the rest after waiting
    for answer in answers:
        stored = served.wait_for(answer["OutputLocation"], timeout=120)
        decoded = decode_response(stored["Body"].read(), stored["ContentType"])
        assert decoded.outputs["SLEPT"].tolist() == [1.5]
    failures = served.keys(served.locations.bucket_and_prefix(served.locations.failure_prefix)[1])
    assert not [key for key in failures if any(a["InferenceId"] in key for a in answers)]
    assert supervisor.crashes == crashes + 1


# --- `deploy serve --hosting async` ------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "exit_code", "message"),
    [
        (["--async-output", "s3://b/async/"], 2, "--async-output"),
        (["--hosting", "single-model", "--async-max-concurrent", "3"], 2, "apply to --hosting"),
        (["--hosting", "async"], 2, "needs the S3 prefix"),
        (["--hosting", "async", "--async-output", "/tmp/x"], 1, "is not an s3://BUCKET/PREFIX/"),
        (["--hosting", "async", "--async-output", "s3://b/", "--max-loaded-models", "2"], 2, ""),
        (["--hosting", "nonsense"], 2, "this version serves"),
        (["--async-input", "s3://b/requests/"], 2, "--async-input"),
        (["--async-max-queued", "5"], 2, "--async-max-queued"),
        (
            ["--hosting", "async", "--async-output", "s3://b/", "--async-input", "/tmp/x"],
            1,
            "is not an s3://BUCKET/PREFIX/",
        ),
        (
            ["--hosting", "async", "--async-output", "s3://b/", "--async-input", "s3://b/a/../"],
            1,
            "is not an s3://BUCKET/PREFIX/",
        ),
        (["--hosting", "async", "--async-output", "s3://b/", "--async-max-queued", "0"], 2, ""),
    ],
)
def test_serve_refuses_flags_that_do_not_fit(
    arguments: list[str], exit_code: int, message: str, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from deploy.cli import app

    repository = tmp_path / "repo"
    shutil.copytree(FIXTURES / "sleepy", repository / "sleepy")
    result = CliRunner().invoke(
        app, ["serve", str(repository), "--port", "0", "--state-dir", str(tmp_path), *arguments]
    )
    assert result.exit_code == exit_code, result.output
    assert message in result.output


def test_deploy_serve_hosting_async_serves_a_packaged_store(
    moto_server: str, tmp_path: Path
) -> None:
    import os
    import signal
    import subprocess
    import sys

    from deploy.hosting.router_archive import package_single_model
    from deploy.local.state import read_state

    # GIVEN a router-layout store (one archive + manifest) packaged from a repository
    repository = tmp_path / "repo"
    shutil.copytree(FIXTURES / "bytestats", repository / "bytestats")
    package_single_model(repository, tmp_path / "store")
    s3 = boto3.client(
        "s3",
        endpoint_url=moto_server,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    s3.create_bucket(Bucket="serve-cli-async")
    environment = {
        **os.environ,
        "AWS_ENDPOINT_URL": moto_server,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    # WHEN `deploy serve STORE --hosting async --async-output ...` runs
    state_dir = tmp_path / "state"
    command = [
        sys.executable,
        "-m",
        "deploy",
        "serve",
        str(tmp_path / "store"),
        "--hosting",
        "async",
        "--async-output",
        "s3://serve-cli-async/jobs/",
        "--port",
        "0",
        "--endpoint-name",
        "cli-async",
        "--state-dir",
        str(state_dir),
    ]
    process = subprocess.Popen(
        command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 120
        state = None
        while state is None and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.5)
            state = read_state("cli-async", state_dir)
        assert state is not None, process.stdout.read().decode() if process.stdout else ""
        # THEN the SDK gets its answer through the S3 prefixes it names
        data = np.arange(3000, dtype=np.uint8)
        with pytest.MonkeyPatch.context() as patch:
            for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
                patch.setenv(name, environment[name])
            with Endpoint("cli-async", endpoint_url=state.url, region="us-east-1") as endpoint:
                manifest = endpoint._manifest.get()
                result = endpoint.infer("bytestats", {"DATA": data})
        assert manifest is not None and manifest.async_inference is not None
        assert manifest.async_inference.input_prefix == "s3://serve-cli-async/jobs/input/"
        np.testing.assert_array_equal(
            result["HISTOGRAM"], _bytestats().reference(data)["HISTOGRAM"]
        )
    finally:
        process.send_signal(signal.SIGINT)
        output = process.communicate(timeout=60)[0].decode()
    assert process.returncode == 0, output
    assert "requests from s3://serve-cli-async/jobs/input/" in " ".join(output.split())


def test_the_readme_snippet_runs_as_printed(
    served: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    code = readme.split("<!-- readme-example: async-sdk -->\n```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("DEPLOY_ENDPOINT_URL", served.url)
    exec(compile(code, "README.md (async-sdk)", "exec"), {})
    assert capsys.readouterr().out.strip() == "[8000000] [8000000]"


@contextlib.contextmanager
def serve_async(
    moto_server: str, tmp_path: Path, bucket: str, *arguments: str
) -> Iterator[tuple[subprocess.Popen[bytes], str, Any]]:
    """`deploy serve --hosting async` of the sleepy model, S3 at `s3://bucket/jobs/`;
    yields the process, its URL and an S3 client. The caller stops it."""
    from deploy.local.state import read_state

    repository = tmp_path / "repo"
    shutil.copytree(FIXTURES / "sleepy", repository / "sleepy")
    environment = {
        **os.environ,
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
    s3.create_bucket(Bucket=bucket)
    state_dir = tmp_path / "state"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "deploy",
            "serve",
            str(repository),
            "--hosting",
            "async",
            "--async-output",
            f"s3://{bucket}/jobs/",
            "--async-max-concurrent",
            "1",
            "--port",
            "0",
            "--endpoint-name",
            bucket,
            "--state-dir",
            str(state_dir),
            *arguments,
        ],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        state = None
        while state is None and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.5)
            state = read_state(bucket, state_dir)
        assert state is not None, process.stdout.read().decode() if process.stdout else ""
        yield process, state.url, s3
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()  # closes its output pipe


def _sleepy_requests(s3: Any, bucket: str, url: str, count: int) -> list[dict[str, Any]]:
    request = encode(
        {"SECONDS": np.array([5.0], dtype=np.float32)}, parameters={"target_model": "sleepy"}
    )
    s3.put_object(Bucket=bucket, Key="jobs/input/sleep", Body=request.body)
    # No retries: a 503 is what the test looks for.
    client = boto3.client(
        "sagemaker-runtime",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )
    return [
        client.invoke_endpoint_async(
            EndpointName=bucket,
            InputLocation=f"s3://{bucket}/jobs/input/sleep",
            ContentType=request.content_type,
        )
        for _ in range(count)
    ]


def test_sigterm_answers_every_accepted_request_with_an_output_or_failure(
    moto_server: str, tmp_path: Path
) -> None:
    bucket = "serve-async-sigterm"
    with serve_async(moto_server, tmp_path, bucket) as (process, url, s3):
        # GIVEN three accepted requests of 5 s: one running, two queued
        answers = _sleepy_requests(s3, bucket, url, 3)
        time.sleep(1.0)
        # WHEN `deploy serve` gets SIGTERM
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=90)[0].decode()
    assert process.returncode == 0, output
    # THEN each has a failure object saying the endpoint stopped (or its output)
    texts = []
    for answer in answers:
        keys = [answer["OutputLocation"], answer["FailureLocation"]]
        found = [key for key in keys if _exists(s3, key)]
        assert found, f"{answer['InferenceId']}: no output or failure object; log:\n{output}"
        if found == [answer["FailureLocation"]]:
            texts.append(_read(s3, answer["FailureLocation"]))
    assert texts, "the requests were still queued: they cannot all have answered"
    assert all(f"the endpoint {bucket} stopped" in text for text in texts)
    assert all(f"s3://{bucket}/jobs/input/sleep" in text for text in texts)


def test_a_full_queue_answers_service_unavailable(moto_server: str, tmp_path: Path) -> None:
    from botocore.exceptions import ClientError

    bucket = "serve-async-queue"
    with serve_async(moto_server, tmp_path, bucket, "--async-max-queued", "3") as (
        process,
        url,
        s3,
    ):
        # GIVEN a queue bound of 3, filled
        accepted = _sleepy_requests(s3, bucket, url, 3)
        # WHEN one more request comes
        with pytest.raises(ClientError) as raised:
            _sleepy_requests(s3, bucket, url, 1)
        process.send_signal(signal.SIGINT)
        output = process.communicate(timeout=90)[0].decode()
    # THEN boto3 raises the error InvokeEndpointAsync defines for it
    error = raised.value.response
    assert error["Error"]["Code"] == "ServiceUnavailable", error
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert "3 requests queued or running" in error["Error"]["Message"]
    assert "--async-max-queued" in error["Error"]["Message"]
    assert process.returncode == 0, output
    assert all(
        _exists(s3, a["FailureLocation"]) or _exists(s3, a["OutputLocation"]) for a in accepted
    )


def _exists(s3: Any, url: str) -> bool:
    bucket, _, key = url.removeprefix("s3://").partition("/")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=key)
    return any(item["Key"] == key for item in listed.get("Contents", []))


def _read(s3: Any, url: str) -> str:
    bucket, _, key = url.removeprefix("s3://").partition("/")
    return str(s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode())
