"""Every packaged example model through boto3 and the local endpoint.

GIVEN `deploy package model_packages/examples` served by the session's endpoint
WHEN each model is invoked with InvokeEndpoint(TargetModel=<manifest target>)
THEN the answers are right: python models, BLS, the TorchScript classifier
(through its adapter, equal to the model file), the ensemble (equal to its
steps called one by one) and strings.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from tests.conftest import EXAMPLES
from tests.functional.local_models import invoke, runtime_client

pytestmark = [pytest.mark.triton, pytest.mark.slow]

RNG = np.random.default_rng(7)
A = RNG.normal(size=(2, 4)).astype(np.float32)
B = RNG.normal(size=(2, 4)).astype(np.float32)
IMAGE = RNG.integers(0, 256, size=(2, 32, 32, 3)).astype(np.uint8)


@pytest.fixture(scope="module")
def call(local_endpoint: Any) -> Any:
    if not local_endpoint.manifest:
        pytest.skip("deploy.packaging is not available: no packaged examples")
    runtime = runtime_client(local_endpoint.url)

    def run(model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        _, outputs = invoke(runtime, "local", local_endpoint.target_model(model), inputs)
        return outputs

    return run


def test_addsub(call: Any) -> None:
    outputs = call("addsub", {"INPUT0": A, "INPUT1": B})
    np.testing.assert_allclose(outputs["OUTPUT0"], A + B)
    np.testing.assert_allclose(outputs["OUTPUT1"], A - B)


def test_bls_calls_addsub_inside_its_archive(call: Any) -> None:
    outputs = call("bls_addsub", {"A": A, "B": B})
    np.testing.assert_allclose(outputs["SUM"], 2 * A + 2 * B, rtol=1e-6)
    np.testing.assert_allclose(outputs["DIFF"], 2 * A - 2 * B, rtol=1e-6)


def test_classifier_through_the_adapter_equals_the_model_file(call: Any) -> None:
    import torch

    pixels = RNG.normal(size=(2, 3, 32, 32)).astype(np.float32)
    outputs = call("classifier", {"INPUT__0": pixels})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = torch.jit.load(str(EXAMPLES / "classifier" / "1" / "model.pt"))
    expected = module(torch.from_numpy(pixels)).detach().numpy()
    np.testing.assert_allclose(outputs["OUTPUT__0"], expected, rtol=1e-5, atol=1e-6)


def test_ensemble_equals_its_steps(call: Any) -> None:
    scores = call("image_pipeline", {"IMAGE": IMAGE})["SCORES"]
    pixels = call("preprocess", {"IMAGE": IMAGE})["PIXELS"]
    direct = call("classifier", {"INPUT__0": pixels})["OUTPUT__0"]
    assert scores.shape == (2, 10)
    np.testing.assert_allclose(scores, direct, rtol=1e-5, atol=1e-6)


def test_strings(call: Any) -> None:
    text = np.array([b"hello", b"World!", "żółw".encode()], dtype=object)
    outputs = call("strings", {"TEXT": text})
    assert list(outputs["UPPER"]) == [b"HELLO", b"WORLD!", "ŻÓŁW".encode()]
    assert list(outputs["LENGTHS"]) == [5, 6, 4]  # characters, not bytes


def test_every_manifest_model_is_served(local_endpoint: Any, call: Any) -> None:
    loaded = {m["target_model"] for m in local_endpoint.endpoint.platform.listing()["loaded"]}
    for name in local_endpoint.manifest["models"]:
        assert local_endpoint.target_model(name) in loaded, name
