"""The local endpoint of `hosting = "components"`, through boto3 and the SDK.

GIVEN a repository of a GPU model (a KIND_GPU instance group: the local CPU
tritonserver runs it on the CPU, as the adapters rewrite it) and a CPU model,
served as two inference components by the real tritonserver
WHEN boto3 (`InferenceComponentName=`) and the SDK (`infer(model)`, which reads the
served manifest) call each component
THEN each answers; a component scaled to zero answers SageMaker's no-capacity
ValidationError until the copy its call started has loaded; an unknown component
and a call without the header are SageMaker's ValidationErrors.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.functional.local_models import addsub_files, decode, encode, runtime_client

pytestmark = [pytest.mark.triton, pytest.mark.slow]

A = np.arange(8, dtype=np.float32).reshape(2, 4)
B = np.ones((2, 4), dtype=np.float32)
ENDPOINT = "comps"
NO_CAPACITY = "Inference Component has no capacity to process this request"


def write_repository(root: Path) -> Path:
    """`detector` declares KIND_GPU, `scorer` KIND_CPU (both add/sub python models)."""
    for name, kind in (("detector", "KIND_GPU"), ("scorer", "KIND_CPU")):
        for relative, data in addsub_files(name).items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            if relative.endswith("config.pbtxt"):
                data = data.replace(b"KIND_CPU", kind.encode())
            path.write_bytes(data)
    assert b"KIND_GPU" in (root / "detector" / "config.pbtxt").read_bytes()
    return root


def call(runtime: Any, component: str, **extra: Any) -> dict[str, np.ndarray]:
    body, content_type = encode({"INPUT0": A, "INPUT1": B})
    response = runtime.invoke_endpoint(
        EndpointName=ENDPOINT,
        InferenceComponentName=component,
        Body=body,
        ContentType=content_type,
        **extra,
    )
    outputs: dict[str, np.ndarray] = decode(response["Body"].read(), response["ContentType"])
    return outputs


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_repository(tmp_path_factory.mktemp("components-repo"))


@pytest.fixture(scope="module")
def endpoint(repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from deploy.local.modes.components import ComponentEndpoint
    from deploy.local.modes.endpoint import EndpointOptions
    from deploy.packaging import package_repository

    store = tmp_path_factory.mktemp("components-store")
    package_repository(repository, store)
    served = ComponentEndpoint(store, options=EndpointOptions(endpoint_name=ENDPOINT))
    served.start()
    yield served
    served.stop()


def test_the_served_manifest_names_each_models_component(endpoint: Any) -> None:
    from deploy.client.manifest import INFERENCE_COMPONENT_HEADER, Manifest

    status, body = get(endpoint.port, "/deploy/manifest.json")
    assert status == 200
    manifest = Manifest.parse(json.loads(body), "served")
    assert manifest.hosting == "components"
    assert manifest.addressing == INFERENCE_COMPONENT_HEADER
    assert {name: info.inference_component for name, info in manifest.models.items()} == {
        "detector": f"{ENDPOINT}-detector",
        "scorer": f"{ENDPOINT}-scorer",
    }


def test_boto3_calls_each_component_by_its_name(endpoint: Any) -> None:
    runtime = runtime_client(endpoint.url)
    for component in (f"{ENDPOINT}-detector", f"{ENDPOINT}-scorer"):
        outputs = call(runtime, component)
        np.testing.assert_array_equal(outputs["OUTPUT0"], A + B)
        np.testing.assert_array_equal(outputs["OUTPUT1"], A - B)
    components = endpoint.listing()["components"]
    assert {name: state["copies"] for name, state in components.items()} == {
        f"{ENDPOINT}-detector": 1,
        f"{ENDPOINT}-scorer": 1,
    }


def test_the_sdk_calls_each_model_by_its_component(endpoint: Any) -> None:
    from deploy.client import Endpoint

    with Endpoint(ENDPOINT, endpoint_url=endpoint.url, region="us-east-1") as client:
        for model in ("detector", "scorer"):
            result = client.infer(model, {"INPUT0": A, "INPUT1": B})
            np.testing.assert_array_equal(result["OUTPUT0"], A + B)
            assert result.target_model is None  # addressed by component, not TargetModel


async def _async_infer(url: str) -> np.ndarray:
    from deploy.client import AsyncEndpoint

    async with AsyncEndpoint(ENDPOINT, endpoint_url=url, region="us-east-1") as client:
        result = await client.infer("detector", {"INPUT0": A, "INPUT1": B})
        return np.array(result["OUTPUT1"])


def test_the_async_sdk_calls_a_model_by_its_component(endpoint: Any) -> None:
    import asyncio

    np.testing.assert_array_equal(asyncio.run(_async_infer(endpoint.url)), A - B)


def test_deploy_bench_loads_a_component_as_on_sagemaker(endpoint: Any) -> None:
    from typer.testing import CliRunner

    from deploy.cli import app

    where = ["--endpoint-url", endpoint.url, "--endpoint", ENDPOINT]
    run = ["bench", "detector", *where, "-c", "2", "--duration", "0.5", "--warmup", "0"]
    result = CliRunner().invoke(app, [*run, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (step,) = report["steps"]
    assert step["failed"] == 0 and step["ok"] > 0, step
    assert report["failed"] is False


def test_the_boto3_call_deploy_up_prints_names_the_component(
    endpoint: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from deploy.cli.lifecycle import _boto3_snippet

    snippet = _boto3_snippet(endpoint.url, ENDPOINT, endpoint.copies.manifest.to_document())
    assert snippet is not None
    assert f"InferenceComponentName='{ENDPOINT}-detector'" in snippet
    assert "TargetModel" not in snippet
    exec(snippet, {})  # the printed snippet, run as a user would
    assert '"outputs"' in capsys.readouterr().out


def test_an_unknown_component_and_a_call_without_one_are_validation_errors(
    endpoint: Any,
) -> None:
    runtime = runtime_client(endpoint.url)
    with pytest.raises(runtime.exceptions.ValidationError, match="no inference component"):
        call(runtime, f"{ENDPOINT}-nosuch")
    body, content_type = encode({"INPUT0": A, "INPUT1": B})
    with pytest.raises(
        runtime.exceptions.ValidationError, match="Inference Component Name header is required"
    ):
        runtime.invoke_endpoint(EndpointName=ENDPOINT, Body=body, ContentType=content_type)
    with pytest.raises(runtime.exceptions.ValidationError, match="send no TargetModel"):
        call(runtime, f"{ENDPOINT}-scorer", TargetModel="scorer.tar.gz")


def get(port: int, path: str) -> tuple[int, bytes]:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def copies(port: int) -> dict[str, int]:
    """Each component's copies, as the endpoint's GET /models lists them."""
    listing = json.loads(get(port, "/models")[1])
    return {name: entry["copies"] for name, entry in listing["components"].items()}


def qa_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, list[str]]:
    """A project in `tmp_path` whose stage `qa` has `scorer` at min_copies 0, a free
    local port, and the `deploy up --local` arguments for it (components, JSON)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEPLOY_LOCAL_PORT", str(port))
    monkeypatch.delenv("DEPLOY_STAGE", raising=False)
    write_repository(tmp_path / "models")
    (tmp_path / "deploy.toml").write_text("[stages.qa.models.scorer]\nmin_copies = 0\n")
    monkeypatch.setenv("DEPLOY_CONFIG", str(tmp_path / "deploy.toml"))
    up = ["up", "--local", "--stage", "qa", "--hosting", "components", "--json"]
    up += ["--repository", "models", "--package-dir", "build", "--timeout", "180"]
    return port, up


def test_deploy_serve_scales_a_component_to_zero_and_back_on_a_call(
    repository: Path, tmp_path: Path
) -> None:
    """`deploy serve --hosting components --scale-to-zero-after 2` with `scorer` at
    min_copies 0 in deploy.toml: idle, it unloads; a call gets SageMaker's no-capacity
    error and starts a copy; calls succeed once it has loaded. `detector` (min 1) stays."""
    from deploy.client import Endpoint, EndpointError, RetryPolicy

    config = tmp_path / "deploy.toml"
    config.write_text("[stages.dev.models.scorer]\nmin_copies = 0\n")
    port_file = tmp_path / "state"
    environment = dict(os.environ, DEPLOY_CONFIG=str(config), PYTHONPATH=str(Path.cwd()))
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "deploy",
            "serve",
            str(repository),
            "--hosting",
            "components",
            "--endpoint-name",
            ENDPOINT,
            "--port",
            "0",
            "--scale-to-zero-after",
            "2",
            "--state-dir",
            str(port_file),
        ],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        state = port_file / f"{ENDPOINT}.json"

        def recorded() -> bool:
            if process.poll() is not None:
                raise AssertionError((tmp_path / "serve.log").read_text())
            return state.is_file() and "url" in json.loads(state.read_text() or "{}")

        wait_for(recorded, 180, "the endpoint to start")
        url = json.loads(state.read_text())["url"]
        port = int(url.rsplit(":", 1)[1])

        wait_for(lambda: copies(port)[f"{ENDPOINT}-scorer"] == 0, 60, "scorer to scale to zero")
        assert copies(port)[f"{ENDPOINT}-detector"] == 1  # min_copies 1: never scaled in

        runtime = runtime_client(url)
        with pytest.raises(runtime.exceptions.ValidationError, match=NO_CAPACITY) as raised:
            call(runtime, f"{ENDPOINT}-scorer")
        assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        # The SDK without retries raises it with the fix; its retries ride it out.
        with Endpoint(ENDPOINT, endpoint_url=url, region="us-east-1", retries=1) as once:
            try:
                once.infer("scorer", {"INPUT0": A, "INPUT1": B})
            except EndpointError as exc:  # the copy may be up already
                assert exc.code == "ValidationError" and NO_CAPACITY in exc.message
                assert "scaled to zero" in str(getattr(exc.__cause__, "fix", ""))
        patient = RetryPolicy(max_attempts=200, base_delay=0.2, max_delay=0.5)
        with Endpoint(ENDPOINT, endpoint_url=url, region="us-east-1", retries=patient) as sdk:
            result = sdk.infer("scorer", {"INPUT0": A, "INPUT1": B})
        np.testing.assert_array_equal(result["OUTPUT0"], A + B)
        assert copies(port)[f"{ENDPOINT}-scorer"] == 1
        np.testing.assert_array_equal(call(runtime, f"{ENDPOINT}-scorer")["OUTPUT1"], A - B)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def test_deploy_up_local_makes_smoke_tests_and_publishes_components(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`deploy up --local --hosting components` with `scorer` at min_copies 0 in the
    stage: the plan creates one component per model before the manifest is published,
    the smoke test calls each by its InferenceComponentName (the endpoint refuses a
    call without one), the published manifest names them with the component
    addressing, and the endpoint holds the stage's min_copies. A second run changes
    nothing; changing one model updates and smoke-tests only its component."""
    from typer.testing import CliRunner

    from deploy.cli import app
    from deploy.client.manifest import INFERENCE_COMPONENT_HEADER, Manifest

    port, up = qa_stage(tmp_path, monkeypatch)
    runner = CliRunner()
    components = {"detector": "local-detector", "scorer": "local-scorer"}

    def deploy_up() -> dict[str, Any]:
        outcome = runner.invoke(app, up)
        assert outcome.exit_code == 0, outcome.output
        document: dict[str, Any] = json.loads(outcome.stdout)
        return document

    def applied(result: dict[str, Any]) -> list[tuple[str, str]]:
        return [(a["action"], a.get("name") or a.get("key", "")) for a in result["applied"]]

    try:
        # WHEN deploy up --local runs on a new stage
        first = deploy_up()

        # THEN one component was created per model, both smoke-tested by component
        # name before the manifest was published
        kinds = [kind for kind, _ in applied(first)]
        assert ("CreateComponent", "local-detector") in applied(first)
        assert ("CreateComponent", "local-scorer") in applied(first)
        assert kinds.index("PublishManifest") > kinds.index("CreateComponent")
        smoked = {s["name"]: s for s in first["smoke"]}
        assert {n: s["inference_component"] for n, s in smoked.items()} == components
        assert all(s["ok"] and s["outputs"] == ["OUTPUT0", "OUTPUT1"] for s in smoked.values())
        assert first["manifest_published"] is True
        store = tmp_path / ".deploy" / "local" / "local" / "store"
        published = Manifest.parse(json.loads((store / "manifest.json").read_text()), "store")
        assert published.hosting == "components"
        assert published.addressing == INFERENCE_COMPONENT_HEADER
        assert published.invoke is not None
        named = {n: m.inference_component for n, m in published.models.items()}
        assert named == components
        # The endpoint runs the stage's min_copies.
        listing = json.loads(get(port, "/models")[1])["components"]
        assert {n: c["min_copies"] for n, c in listing.items()} == {
            "local-detector": 1,
            "local-scorer": 0,
        }
        # Calls through the published manifest reach each component.
        from deploy.client import Endpoint

        with Endpoint("local", endpoint_url=first["url"], region="us-east-1") as client:
            result = client.infer("scorer", {"INPUT0": A, "INPUT1": B})
        np.testing.assert_array_equal(result["OUTPUT1"], A - B)

        # WHEN it runs again with nothing changed: THEN nothing changes
        second = deploy_up()
        assert second["applied"] == [] and second["plan"]["actions"] == []
        assert second["smoke"] == [] and second["manifest_published"] is False

        # WHEN one model changes: THEN only its component is updated and smoke-tested
        model = tmp_path / "models" / "scorer" / "1" / "model.py"
        model.write_text(model.read_text() + "\n# v2\n")
        third = deploy_up()
        updated = [name for kind, name in applied(third) if "Component" in kind]
        assert updated == ["local-scorer"]
        assert ("UpdateComponent", "local-scorer") in applied(third)
        assert [s["inference_component"] for s in third["smoke"]] == ["local-scorer"]
        target = json.loads((store / "manifest.json").read_text())["models"]["scorer"]
        listing = json.loads(get(port, "/models")[1])["components"]
        assert listing["local-scorer"]["target_model"] == target["target_model"]
    finally:
        down = runner.invoke(app, ["down", "--local"])
    assert down.exit_code == 0, down.output


def test_deploy_up_local_starts_the_endpoint_with_scale_to_zero_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`deploy up --local --hosting components --scale-to-zero-after 2` starts an
    endpoint that unloads `scorer` (min_copies 0) once idle and keeps `detector`;
    a later run asking for another value is refused with the fix (the running
    endpoint keeps its setting), and one asking for the same value goes on."""
    from typer.testing import CliRunner

    from deploy.cli import app

    port, up = qa_stage(tmp_path, monkeypatch)
    runner = CliRunner()
    try:
        first = runner.invoke(app, [*up, "--scale-to-zero-after", "2"])
        assert first.exit_code == 0, first.output
        assert json.loads(get(port, "/models")[1])["scale_to_zero_after"] == 2
        wait_for(lambda: copies(port)["local-scorer"] == 0, 60, "scorer to scale to zero")
        assert copies(port)["local-detector"] == 1  # min_copies 1: never scaled in

        other = runner.invoke(app, [*up, "--scale-to-zero-after", "5"])
        assert other.exit_code == 1, other.output
        words = " ".join(other.output.split())
        assert "is running with --scale-to-zero-after 2, not 5" in words, words
        assert "deploy down --local" in words, words

        same = runner.invoke(app, [*up, "--scale-to-zero-after", "2"])
        assert same.exit_code == 0, same.output
    finally:
        down = runner.invoke(app, ["down", "--local"])
    assert down.exit_code == 0, down.output
