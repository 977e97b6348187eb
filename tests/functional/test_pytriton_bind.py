"""PyTriton documentation examples, bound, packaged and served on the local endpoint.

GIVEN the scripts in model_packages/pytriton (unchanged PyTriton apps)
WHEN `deploy bind` writes their models, `deploy package` archives them and
     the local SageMaker endpoint (real tritonserver) serves the store
THEN boto3's InvokeEndpoint and the SDK get what calling the bound callable
     directly gives (under the same stand-in, as PyTriton calls it), and a
     callable's exception reaches the caller as a ModelError with its message.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.client import Endpoint, ModelError
from deploy.pytriton import bind_script
from deploy.pytriton.record import STANDIN_ROOT
from tests.functional.local_models import invoke, runtime_client

pytestmark = [pytest.mark.triton, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "model_packages" / "pytriton"
ERRORS_SCRIPT = ROOT / "tests" / "fixtures" / "pytriton" / "errors" / "server.py"
DIRECT = Path(__file__).resolve().parent / "pytriton_direct.py"
RNG = np.random.default_rng(3)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any]]]:
    from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint
    from deploy.packaging import package_repository

    root = tmp_path_factory.mktemp("pytriton")
    repo = root / "repo"
    # One example through the command line, the others through the API.
    result = CliRunner().invoke(
        app, ["bind", str(EXAMPLES / "add_sub" / "server.py"), "--out", str(repo)]
    )
    assert result.exit_code == 0, result.output
    for name in ("identity", "multi_instance", "bytes_inputs", "decorators"):
        bind_script(EXAMPLES / name / "server.py", repo)
    bind_script(ERRORS_SCRIPT, repo)
    store = root / "store"
    package_repository(repo, store)
    manifest = json.loads((store / "manifest.json").read_text())
    endpoint = LocalEndpoint(
        store, work_dir=root / "work", options=EndpointOptions(endpoint_name="local")
    ).start()
    try:
        yield endpoint.url, manifest
    finally:
        endpoint.stop()


def direct(script: Path, model: str, inputs: dict[str, np.ndarray], tmp: Path) -> dict[str, Any]:
    """The bound callable called in its own process, as PyTriton calls it."""
    request, response = tmp / f"{model}-in.npz", tmp / f"{model}-out.npz"
    np.savez(request, **inputs)
    subprocess.run(
        [
            sys.executable,
            str(DIRECT),
            str(STANDIN_ROOT),
            str(script),
            model,
            str(request),
            str(response),
        ],
        check=True,
        timeout=120,
    )
    with np.load(response, allow_pickle=True) as loaded:
        return {name: loaded[name] for name in loaded.files}


def through_endpoint(
    served: tuple[str, dict[str, Any]], model: str, inputs: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The model's answer through boto3 and through the SDK."""
    url, manifest = served
    _, by_boto3 = invoke(
        runtime_client(url), "local", manifest["models"][model]["target_model"], inputs
    )
    with Endpoint("local", endpoint_url=url, retries=1) as endpoint:
        result = endpoint.infer(model, inputs)
        by_sdk = {name: result[name] for name in by_boto3}
    return by_boto3, by_sdk


def assert_same(expected: dict[str, Any], *answers: dict[str, np.ndarray]) -> None:
    for answer in answers:
        assert sorted(answer) == sorted(expected)
        for name, value in expected.items():
            if value.dtype.kind in "SO":
                assert answer[name].tolist() == value.astype(object).tolist(), name
            else:
                assert answer[name].dtype == value.dtype, name
                # float32: a batched run sums in another order than the direct call
                np.testing.assert_allclose(answer[name], value, rtol=1e-5, err_msg=name)


@pytest.mark.parametrize(
    ("example", "model", "inputs"),
    [
        ("identity", "Identity", {"INPUT_1": RNG.normal(size=(3, 1)).astype(np.float32)}),
        (
            "add_sub",
            "AddSub",
            {
                "INPUT_1": RNG.normal(size=(2, 1)).astype(np.float32),
                "INPUT_2": RNG.normal(size=(2, 1)).astype(np.float32),
            },
        ),
        ("multi_instance", "Linear", {"INPUT_1": RNG.normal(size=(4, 20)).astype(np.float32)}),
        (
            "bytes_inputs",
            "ModelName",
            {
                "INPUT_1": np.array([[b"a"], ["ż".encode()]], dtype=object),
                "INPUT_2": np.array([[b"a", b"b", b"a"], ["ż".encode(), b"x", b"y"]], dtype=object),
            },
        ),
        (
            "decorators",
            "Temperature",
            {  # rows of two temperatures: @group_by_values splits them, @first_value takes each
                "mandatory_input": RNG.normal(size=(3, 2)).astype(np.float32),
                "temperature": np.array([[0.5], [2.0], [0.5]], dtype=np.float32),
            },
        ),
        (  # no temperature: @fill_optionals supplies 0.7
            "decorators",
            "Temperature",
            {"mandatory_input": RNG.normal(size=(2, 2)).astype(np.float32)},
        ),
        ("decorators", "Doubler", {"sequence": np.arange(5, dtype=np.int64)}),
    ],
)
def test_examples_answer_as_the_callable_does(
    served: tuple[str, dict[str, Any]],
    tmp_path: Path,
    example: str,
    model: str,
    inputs: dict[str, np.ndarray],
) -> None:
    expected = direct(EXAMPLES / example / "server.py", model, inputs, tmp_path)
    by_boto3, by_sdk = through_endpoint(served, model, inputs)
    assert_same(expected, by_boto3, by_sdk)


def test_decorators_see_the_config_and_the_defaults(served: tuple[str, dict[str, Any]]) -> None:
    values = np.ones((2, 2), dtype=np.float32)
    by_boto3, _ = through_endpoint(served, "Temperature", {"mandatory_input": values})
    np.testing.assert_allclose(by_boto3["scaled"], values * np.float32(0.7))
    assert by_boto3["max_batch_size"].tolist() == [[16], [16]]  # from the Triton context
    # Rows of different temperatures are scaled each by its own (group_by_values + first_value).
    temperature = np.array([[0.5], [2.0], [0.5]], dtype=np.float32)
    values = np.ones((3, 2), dtype=np.float32)
    by_boto3, _ = through_endpoint(
        served, "Temperature", {"mandatory_input": values, "temperature": temperature}
    )
    np.testing.assert_allclose(by_boto3["scaled"], values * temperature)


def test_multi_instance_has_one_instance_per_callable(served: tuple[str, dict[str, Any]]) -> None:
    _, manifest = served
    assert manifest["models"]["Linear"]["max_batch_size"] == 16


def test_async_callable(served: tuple[str, dict[str, Any]]) -> None:
    values = np.array([[2.0, 4.0]], dtype=np.float32)
    by_boto3, by_sdk = through_endpoint(served, "Halved", {"values": values})
    np.testing.assert_allclose(by_boto3["half"], values / 2)
    np.testing.assert_allclose(by_sdk["half"], values / 2)


@pytest.mark.parametrize(
    ("model", "values", "message"),
    [
        ("Checked", [[-1.0, 4.0]], "ValueError: negative values are not accepted"),
        ("Broken", [[1.0]], "PyTritonUnrecoverableError: the accelerator is gone"),
    ],
)
def test_exceptions_reach_the_caller_with_their_message(
    served: tuple[str, dict[str, Any]], model: str, values: list[list[float]], message: str
) -> None:
    url, manifest = served
    inputs = {"values": np.array(values, dtype=np.float32)}
    runtime = runtime_client(url)
    with pytest.raises(runtime.exceptions.ModelError) as caught:
        invoke(runtime, "local", manifest["models"][model]["target_model"], inputs)
    assert message in caught.value.response["OriginalMessage"]
    with (
        Endpoint("local", endpoint_url=url, retries=1) as endpoint,
        pytest.raises(ModelError) as sdk,
    ):
        endpoint.infer(model, inputs)
    assert message in str(sdk.value)
    # The model keeps serving after a failed call.
    good = {"values": np.array([[4.0]], dtype=np.float32)}
    if model == "Checked":
        _, outputs = invoke(runtime, "local", manifest["models"][model]["target_model"], good)
        np.testing.assert_allclose(outputs["root"], [[2.0]])
