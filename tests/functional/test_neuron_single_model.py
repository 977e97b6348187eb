"""The inf1 layout on the real tritonserver: generated Neuron models (CPU
fallback) behind the generated router, in SageMaker single-model mode, called
through the SDK and boto3.

GIVEN two Neuron models generated from an ordinary TorchScript classifier,
pinned to different NeuronCores, one batching by concatenation,
WHEN the local endpoint serves them in single-model mode,
THEN every model answers through the router as torch does, requests queued
together run as one batch, and each instance got its own cores.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.triton, pytest.mark.slow]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from model_packages.generate import write_classifier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch 2.13 deprecates TorchScript
        return write_classifier(tmp_path_factory.mktemp("examples"))


@pytest.fixture(scope="module")
def repository(compiled: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from model_packages.neuron.generate import write_repository

    root = tmp_path_factory.mktemp("neuron") / "repository"
    write_repository(root, compiled)
    return root


@pytest.fixture(scope="module")
def endpoint(repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from deploy.local.modes.endpoint import EndpointOptions
    from deploy.local.modes.single_model import SingleModelEndpoint

    # verbose: the generated model logs each concatenated batch at verbose level.
    options = EndpointOptions(endpoint_name="inf1-local", verbose=True)
    served = SingleModelEndpoint(
        repository, work_dir=tmp_path_factory.mktemp("single-model"), options=options
    )
    served.start()
    try:
        yield served
    finally:
        served.stop()


def _reference(compiled: Path, batch: np.ndarray) -> np.ndarray:
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        model = torch.jit.load(str(compiled), map_location="cpu")
    with torch.inference_mode():
        return np.asarray(model(torch.from_numpy(batch)).numpy())


def _images(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((count, 3, 32, 32), dtype=np.float32)


def _client(endpoint: object) -> object:
    from deploy.client import Endpoint

    return Endpoint(
        endpoint.endpoint_name,  # type: ignore[attr-defined]
        endpoint_url=endpoint.url,  # type: ignore[attr-defined]
        manifest=endpoint.manifest_path,  # type: ignore[attr-defined]
        region="us-east-1",
    )


def test_manifest_describes_single_model_hosting(endpoint: object) -> None:
    from deploy.client import Manifest

    manifest = Manifest.from_path(endpoint.manifest_path)  # type: ignore[attr-defined]
    assert manifest.hosting == "single-model"
    assert sorted(manifest.models) == ["classifier_batched", "classifier_single"]
    assert manifest.models["classifier_batched"].max_batch_size == 8


def test_each_model_answers_through_the_router_via_the_sdk(
    endpoint: object, compiled: Path
) -> None:
    images = _images(3, seed=1)
    expected = _reference(compiled, images)
    with _client(endpoint) as client:  # type: ignore[attr-defined]
        for model in ("classifier_batched", "classifier_single"):
            result = client.infer(model, {"INPUT__0": images})
            np.testing.assert_allclose(result["OUTPUT__0"], expected, rtol=1e-5, atol=1e-6)


def test_boto3_invoke_without_target_model(endpoint: object, compiled: Path) -> None:
    import boto3
    import tritonclient.http as triton_http

    images = _images(2, seed=2)
    tensor = triton_http.InferInput("INPUT__0", list(images.shape), "FP32")
    tensor.set_data_from_numpy(images, binary_data=True)
    body, header = triton_http.InferenceServerClient.generate_request_body(
        [tensor],
        outputs=[triton_http.InferRequestedOutput("OUTPUT__0", binary_data=True)],
        parameters={"target_model": "classifier_single"},
    )
    request = {
        "EndpointName": "inf1-local",
        "Body": body,
        "ContentType": f"application/vnd.sagemaker-triton.binary+json;json-header-size={header}",
    }
    runtime = boto3.client(
        "sagemaker-runtime",
        endpoint_url=endpoint.url,  # type: ignore[attr-defined]
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    try:
        answer = runtime.invoke_endpoint(**request)
        raw = answer["Body"].read()
        # A single-model endpoint refuses a TargetModel, as SageMaker does.
        with pytest.raises(runtime.exceptions.ValidationError, match="single-model endpoint"):
            runtime.invoke_endpoint(**request, TargetModel="classifier_single")
    finally:
        runtime.close()
    content_type = answer["ContentType"]
    size = int(content_type.rsplit("=", 1)[1]) if "json-header-size=" in content_type else None
    parsed = triton_http.InferenceServerClient.parse_response_body(raw, header_length=size)
    np.testing.assert_allclose(
        parsed.as_numpy("OUTPUT__0"), _reference(compiled, images), rtol=1e-5, atol=1e-6
    )


def test_queued_requests_run_as_one_batch(endpoint: object, compiled: Path) -> None:
    images = [_images(1, seed=10 + i) for i in range(8)]
    with _client(endpoint) as client, ThreadPoolExecutor(8) as pool:  # type: ignore[attr-defined]
        outputs = list(
            pool.map(
                lambda batch: client.infer("classifier_batched", {"INPUT__0": batch})["OUTPUT__0"],
                images,
            )
        )
    for batch, output in zip(images, outputs, strict=True):
        np.testing.assert_allclose(output, _reference(compiled, batch), rtol=1e-5, atol=1e-6)
    log = endpoint.supervisor.log_path.read_text(errors="replace")  # type: ignore[attr-defined]
    batches = [
        int(count)
        for count in re.findall(r"classifier_batched: ran (\d+) requests as one batch", log)
    ]
    assert batches and max(batches) > 1, "no concatenated batch in the log"


def test_each_instance_got_its_own_cores_and_logged_the_cpu_fallback(endpoint: object) -> None:
    log = endpoint.supervisor.log_path.read_text(errors="replace")  # type: ignore[attr-defined]
    cores = dict(re.findall(r"instance (\S+): NEURON_RT_VISIBLE_CORES=(\S+)", log))
    assert cores == {
        "classifier_batched_0_0": "0-1",
        "classifier_batched_0_1": "2-3",
        "classifier_single_0_0": "4-5",
    }
    assert log.count("torch.neuron is not importable") == 3


def test_unknown_model_names_the_served_ones(endpoint: object) -> None:
    from deploy.client import ClientError

    with _client(endpoint) as client, pytest.raises(ClientError) as raised:  # type: ignore[attr-defined]
        client.infer("resnet", {"INPUT__0": _images(1, seed=3)})
    message = str(raised.value)
    assert "unknown model 'resnet'" in message
    assert "classifier_batched, classifier_single" in message


def test_the_image_serve_script_serves_the_layout(
    repository: Path, compiled: Path, tmp_path: Path
) -> None:
    """deploy_infra/neuron/serve (the Neuron image's start command) over the extracted
    `deploy neuron package` archive, on this machine's tritonserver."""
    import signal
    import subprocess
    import tarfile
    import time
    import urllib.request

    import tritonclient.http as triton_http

    from deploy.hosting.router_archive import package_single_model
    from deploy.local.triton.install import find_triton, prepare_backends, triton_environment
    from deploy.local.triton.supervisor import free_port, ping

    install = find_triton()
    # As SageMaker does: the single-model archive extracted into /opt/ml/model.
    package_single_model(repository, tmp_path / "package", router_instances=1)
    staged = tmp_path / "opt-ml-model"
    with tarfile.open(tmp_path / "package" / "model.tar.gz") as archive:
        archive.extractall(staged, filter="data")
    port = free_port()
    env = triton_environment(
        install,
        {
            "SAGEMAKER_MULTI_MODEL": "false",
            "SAGEMAKER_TRITON_MODEL_REPOSITORY": str(staged),
            "SAGEMAKER_BIND_TO_PORT": str(port),
            "TRITONSERVER": str(install.binary),
            "TRITON_BACKEND_DIRECTORY": str(prepare_backends(install, tmp_path / "backends")),
        },
    )
    serve = Path(__file__).resolve().parents[2] / "deploy_infra" / "neuron" / "serve"
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [str(serve)], env=env, cwd=install.stub_site, stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 60
        while not ping(port):
            assert process.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.1)
        images = _images(2, seed=4)
        for model in ("classifier_batched", "classifier_single"):
            tensor = triton_http.InferInput("INPUT__0", list(images.shape), "FP32")
            tensor.set_data_from_numpy(images, binary_data=True)
            body, header = triton_http.InferenceServerClient.generate_request_body(
                [tensor],
                outputs=[triton_http.InferRequestedOutput("OUTPUT__0", binary_data=True)],
                parameters={"target_model": model},
            )
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/invocations",
                data=body,
                headers={
                    "Content-Type": "application/vnd.sagemaker-triton.binary+json;"
                    f"json-header-size={header}"
                },
            )
            with urllib.request.urlopen(request, timeout=30) as answer:
                content_type = answer.headers["Content-Type"]
                raw = answer.read()
            size = int(content_type.rsplit("=", 1)[1])
            parsed = triton_http.InferenceServerClient.parse_response_body(raw, header_length=size)
            np.testing.assert_allclose(
                parsed.as_numpy("OUTPUT__0"), _reference(compiled, images), rtol=1e-5, atol=1e-6
            )
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_the_image_serve_script_refuses_a_missing_router(tmp_path: Path) -> None:
    import subprocess

    (tmp_path / "classifier").mkdir()
    serve = Path(__file__).resolve().parents[2] / "deploy_infra" / "neuron" / "serve"
    result = subprocess.run(
        [str(serve)],
        env={"PATH": "/usr/bin:/bin", "SAGEMAKER_TRITON_MODEL_REPOSITORY": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "no model router" in result.stderr and "deploy neuron router" in result.stderr


def test_deploy_serve_single_model_command(repository: Path, tmp_path: Path) -> None:
    """`deploy serve --mode single-model REPO` as a user runs it, stopped with Ctrl-C."""
    import signal
    import subprocess
    import sys
    import time

    from deploy.client import Endpoint
    from deploy.hosting.router_model import write_manifest
    from deploy.local.triton.supervisor import free_port, ping

    port = free_port()
    log = tmp_path / "serve.log"
    command = [sys.executable, "-m", "deploy", "serve", "--mode", "single-model", str(repository)]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*command, "--port", str(port), "--endpoint-name", "inf1-cli"],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while not ping(port):
            assert process.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.2)
        manifest = tmp_path / "manifest.json"
        write_manifest(repository, manifest)
        with Endpoint(
            "inf1-cli", endpoint_url=f"http://127.0.0.1:{port}", manifest=manifest
        ) as client:
            result = client.infer("classifier_single", {"INPUT__0": _images(1, seed=5)})
        assert result["OUTPUT__0"].shape == (1, 10)
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(30)
    assert code == 0, log.read_text(errors="replace")
    assert not list(repository.glob("router")), "serve must not write into the repository"
