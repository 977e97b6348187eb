"""The bundled examples load and infer on the real tritonserver.

The python-backend models are served from the examples folder itself (plain
`--model-repository` mode). This Triton build has no PyTorch backend, so the
TorchScript classifier (and the ensemble around it) is checked offline: the
traced file loads in torch and computes the same scores as the module it was
traced from, and the ensemble's wiring matches the composing models.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from tests.functional.repository_triton import TritonProcess, shared_tritonserver

EXAMPLES = Path(__file__).resolve().parents[2] / "model_packages" / "examples"

pytestmark = [pytest.mark.triton, pytest.mark.slow]


@pytest.fixture(scope="session")
def examples_server(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> TritonProcess:
    return shared_tritonserver(pytestconfig, tmp_path_factory, "examples", repository=EXAMPLES)


def _client(server: TritonProcess):  # type: ignore[no-untyped-def]
    import tritonclient.http as httpclient

    return httpclient.InferenceServerClient(f"127.0.0.1:{server.port}")


def _input(name: str, array: np.ndarray, datatype: str):  # type: ignore[no-untyped-def]
    import tritonclient.http as httpclient

    tensor = httpclient.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def test_python_models_are_ready(examples_server: TritonProcess) -> None:
    states = {
        m["name"]: m.get("state") for m in _client(examples_server).get_model_repository_index()
    }
    for name in ("addsub", "preprocess", "bls_addsub", "strings"):
        assert states[name] == "READY", examples_server.log_text()[-4000:]


def test_addsub_adds_and_subtracts(examples_server: TritonProcess) -> None:
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.full((2, 4), 0.5, dtype=np.float32)
    result = _client(examples_server).infer(
        "addsub", [_input("INPUT0", a, "FP32"), _input("INPUT1", b, "FP32")]
    )
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


def test_bls_calls_addsub_on_doubled_inputs(examples_server: TritonProcess) -> None:
    a = np.array([[1, 2, 3, 4]], dtype=np.float32)
    b = np.array([[4, 3, 2, 1]], dtype=np.float32)
    result = _client(examples_server).infer(
        "bls_addsub", [_input("A", a, "FP32"), _input("B", b, "FP32")]
    )
    np.testing.assert_array_equal(result.as_numpy("SUM"), 2 * a + 2 * b)
    np.testing.assert_array_equal(result.as_numpy("DIFF"), 2 * a - 2 * b)


def _expected_pixels(image: np.ndarray) -> np.ndarray:
    mean = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32).reshape(1, 3, 1, 1)
    std = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32).reshape(1, 3, 1, 1)
    return ((image.astype(np.float32).transpose(0, 3, 1, 2) / 255.0 - mean) / std).astype(
        np.float32
    )


def test_preprocess_converts_hwc_uint8_to_normalised_chw(examples_server: TritonProcess) -> None:
    image = np.random.default_rng(7).integers(0, 256, size=(2, 32, 32, 3), dtype=np.uint8)
    result = _client(examples_server).infer("preprocess", [_input("IMAGE", image, "UINT8")])
    pixels = result.as_numpy("PIXELS")
    assert pixels.shape == (2, 3, 32, 32)
    np.testing.assert_allclose(pixels, _expected_pixels(image), rtol=1e-6, atol=1e-6)


def test_strings_upper_cases_and_counts(examples_server: TritonProcess) -> None:
    text = np.array([b"hello", b"World", "ünï".encode()], dtype=np.object_)
    result = _client(examples_server).infer("strings", [_input("TEXT", text, "BYTES")])
    assert result.as_numpy("UPPER").tolist() == [b"HELLO", b"WORLD", "ÜNÏ".encode()]
    assert result.as_numpy("LENGTHS").tolist() == [5, 5, 3]


def test_classifier_torchscript_matches_its_source_module() -> None:
    torch = pytest.importorskip("torch")
    from model_packages.generate import build_classifier

    path = EXAMPLES / "classifier" / "1" / "model.pt"
    if not path.is_file():
        pytest.skip("run `make models` first")
    with warnings.catch_warnings():
        # TorchScript is what Triton's PyTorch backend loads; torch deprecates it.
        warnings.simplefilter("ignore", DeprecationWarning)
        traced = torch.jit.load(str(path))
    batch = torch.from_numpy(
        _expected_pixels(np.random.default_rng(3).integers(0, 256, (4, 32, 32, 3), dtype=np.uint8))
    )
    with torch.no_grad():
        scores = traced(batch)
        reference = build_classifier()(batch)  # type: ignore[operator]
    assert tuple(scores.shape) == (4, 10)
    torch.testing.assert_close(scores, reference)
    labels = (EXAMPLES / "classifier" / "labels.txt").read_text().split()
    assert len(labels) == 10
    assert (EXAMPLES / "image_pipeline" / "labels.txt").read_text().split() == labels
