"""`deploy init-config`: configs from ONNX graphs, TorchScript samples and auto_complete_config.

GIVEN model folders without config.pbtxt
WHEN `deploy init-config` writes one
THEN it validates, and the ONNX and TorchScript models it describes serve on
     the local endpoint with the same answers as onnxruntime / torch directly.
"""

from __future__ import annotations

import json
import shutil
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.errors import RepositoryError
from deploy.repository import parse_config
from deploy.repository.init_config import infer_config, write_config
from deploy.repository.schema import model_config_pb2 as pb
from tests.functional.local_models import invoke, runtime_client

ROOT = Path(__file__).resolve().parents[2]
CLASSIFIER = ROOT / "model_packages" / "examples" / "classifier" / "1" / "model.pt"
RNG = np.random.default_rng(11)


def onnx_model(folder: Path, first_dim: str | int) -> Path:
    """Y = X @ W + 1 and N = -X (INT64 casts), first dimension `first_dim`."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = RNG.normal(size=(4, 3)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["X", "W"], ["m"]),
            helper.make_node("Add", ["m", "one"], ["Y"]),
            helper.make_node("Neg", ["X"], ["neg"]),
            helper.make_node("Cast", ["neg"], ["N"], to=TensorProto.INT64),
        ],
        "linear",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [first_dim, 4])],
        [
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, [first_dim, 3]),
            helper.make_tensor_value_info("N", TensorProto.INT64, [first_dim, 4]),
        ],
        [
            numpy_helper.from_array(weight, "W"),
            helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    (folder / "1").mkdir(parents=True)
    onnx.save(model, str(folder / "1" / "model.onnx"))
    return folder


def scripted_model(folder: Path) -> Path:
    """forward(image, scale) -> (image.mean over pixels * scale, image.amax(...) > 0)."""
    import torch

    class Net(torch.nn.Module):
        def forward(
            self, image: torch.Tensor, scale: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor]:
            mean = image.mean(dim=(2, 3)) * scale
            return mean, image.amax(dim=(2, 3)) > 0

    (folder / "1").mkdir(parents=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TorchScript is deprecated upstream
        torch.jit.save(torch.jit.script(Net()), str(folder / "1" / "model.pt"))
    return folder


def sample(path: Path, **arrays: np.ndarray) -> Path:
    np.savez(path, **arrays)
    return path


def config_of(folder: Path) -> Any:
    return parse_config((folder / "config.pbtxt").read_text())


def summary(config: Any) -> list[tuple[str, str, list[int]]]:
    return [
        (t.name, pb.DataType.Name(t.data_type), list(t.dims))
        for t in list(config.input) + list(config.output)
    ]


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["init-config", *args])


def test_onnx_symbolic_first_dimension_is_the_batch(tmp_path: Path) -> None:
    folder = onnx_model(tmp_path / "linear", "batch")
    result = run(str(folder))
    assert result.exit_code == 0, result.output
    config = config_of(folder)
    assert (config.platform, config.max_batch_size) == ("onnxruntime_onnx", 4)
    assert config.HasField("dynamic_batching")
    assert summary(config) == [
        ("X", "TYPE_FP32", [4]),
        ("Y", "TYPE_FP32", [3]),
        ("N", "TYPE_INT64", [4]),
    ]
    # An existing config stays unless forced.
    before = (folder / "config.pbtxt").read_text()
    refused = run(str(folder), "--max-batch-size", "16")
    assert refused.exit_code == 1 and "config.pbtxt exists" in refused.output
    assert (folder / "config.pbtxt").read_text() == before
    assert run(str(folder), "--max-batch-size", "16", "--force").exit_code == 0
    assert config_of(folder).max_batch_size == 16


def test_onnx_fixed_first_dimension_keeps_full_shapes(tmp_path: Path) -> None:
    folder = onnx_model(tmp_path / "fixed", 2)
    config = infer_config(folder).config
    assert config.max_batch_size == 0 and not config.HasField("dynamic_batching")
    assert summary(config)[0] == ("X", "TYPE_FP32", [2, 4])
    with pytest.raises(RepositoryError, match="first dimension of X, Y, N is fixed"):
        infer_config(folder, max_batch_size=8)


def test_torchscript_names_follow_forward_or_the_index_convention(tmp_path: Path) -> None:
    named = scripted_model(tmp_path / "named")
    images = RNG.normal(size=(2, 3, 4, 4)).astype(np.float32)
    scale = np.ones((2, 1), np.float32)
    # Saved in another order than forward(): names decide.
    config = infer_config(
        named, sample_input=sample(tmp_path / "named.npz", scale=scale, image=images)
    ).config
    assert config.platform == "pytorch_libtorch" and config.max_batch_size == 4
    assert summary(config) == [
        ("image", "TYPE_FP32", [3, 4, 4]),
        ("scale", "TYPE_FP32", [1]),
        ("OUTPUT__0", "TYPE_FP32", [3]),
        ("OUTPUT__1", "TYPE_BOOL", [3]),
    ]
    indexed = infer_config(
        named, sample_input=sample(tmp_path / "indexed.npz", a=images, b=scale), max_batch_size=0
    ).config
    assert [t.name for t in indexed.input] == ["INPUT__0", "INPUT__1"]
    assert list(indexed.input[0].dims) == [2, 3, 4, 4]


def test_torchscript_needs_a_sample_that_runs(tmp_path: Path) -> None:
    folder = tmp_path / "classifier"
    (folder / "1").mkdir(parents=True)
    shutil.copy(CLASSIFIER, folder / "1" / "model.pt")
    with pytest.raises(RepositoryError, match="--sample-input"):
        infer_config(folder)
    wrong = sample(tmp_path / "wrong.npz", x=np.zeros((2, 5), np.float32))
    with pytest.raises(RepositoryError, match="the model failed on the sample input"):
        infer_config(folder, sample_input=wrong)


def test_python_model_config_comes_from_auto_complete_config(tmp_path: Path) -> None:
    folder = tmp_path / "doubler"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text(
        textwrap.dedent(
            """
            import numpy as np

            class TritonPythonModel:
                @staticmethod
                def auto_complete_config(config):
                    config.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [2]})
                    config.add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [2]})
                    config.set_max_batch_size(8)
                    return config
            """
        )
    )
    result = run(str(folder), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["kind"] == "python"
    config = config_of(folder)
    assert config.backend == "python" and config.max_batch_size == 8
    assert summary(config) == [("IN", "TYPE_FP32", [2]), ("OUT", "TYPE_FP32", [2])]
    (folder / "config.pbtxt").unlink()
    (folder / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    result = run(str(folder))
    assert result.exit_code == 1 and "defines no auto_complete_config" in result.output
    assert "Traceback" not in result.output
    assert not (folder / "config.pbtxt").exists()


def test_a_config_that_fails_the_check_is_not_kept(tmp_path: Path) -> None:
    folder = onnx_model(tmp_path / "linear", "batch")
    (folder / "config.pbtxt").write_text("# mine\n")
    inferred = infer_config(folder)
    with pytest.raises(RepositoryError, match="it was not kept:\n  max_batch_size: too big"):
        write_config(inferred, force=True, check=lambda _: ["max_batch_size: too big"])
    assert (folder / "config.pbtxt").read_text() == "# mine\n"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any], Path]]:
    from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint
    from deploy.packaging import package_repository

    root = tmp_path_factory.mktemp("init-config")
    repo = root / "repo"
    onnx_model(repo / "linear", "batch")
    scripted_model(repo / "pooled")
    classifier = repo / "classifier"
    (classifier / "1").mkdir(parents=True)
    shutil.copy(CLASSIFIER, classifier / "1" / "model.pt")
    assert run(str(repo / "linear")).exit_code == 0
    pooled = sample(
        root / "pooled.npz",
        image=np.zeros((1, 3, 4, 4), np.float32),
        scale=np.ones((1, 1), np.float32),
    )
    assert run(str(repo / "pooled"), "--sample-input", str(pooled)).exit_code == 0
    pixels = sample(root / "pixels.npz", x=np.zeros((2, 3, 32, 32), np.float32))
    assert (
        run(str(classifier), "--sample-input", str(pixels), "--max-batch-size", "8").exit_code == 0
    )
    store = root / "store"
    package_repository(repo, store)
    manifest = json.loads((store / "manifest.json").read_text())
    endpoint = LocalEndpoint(
        store, work_dir=root / "work", options=EndpointOptions(endpoint_name="local")
    ).start()
    try:
        yield endpoint.url, manifest, repo
    finally:
        endpoint.stop()


@pytest.mark.triton
@pytest.mark.slow
def test_generated_configs_serve_like_the_model_files(
    served: tuple[str, dict[str, Any], Path],
) -> None:
    import onnxruntime
    import torch

    url, manifest, repo = served
    runtime = runtime_client(url)

    def call(model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return invoke(runtime, "local", manifest["models"][model]["target_model"], inputs)[1]

    x = RNG.normal(size=(3, 4)).astype(np.float32)
    session = onnxruntime.InferenceSession(str(repo / "linear" / "1" / "model.onnx"))
    y, n = session.run(["Y", "N"], {"X": x})
    answer = call("linear", {"X": x})
    np.testing.assert_allclose(answer["Y"], y, rtol=1e-6)
    assert answer["N"].tolist() == n.tolist()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pooled = torch.jit.load(str(repo / "pooled" / "1" / "model.pt"))
        classifier = torch.jit.load(str(repo / "classifier" / "1" / "model.pt"))
    image = RNG.normal(size=(2, 3, 4, 4)).astype(np.float32)
    scale = np.full((2, 1), 3.0, np.float32)
    mean, positive = pooled(torch.from_numpy(image), torch.from_numpy(scale))
    answer = call("pooled", {"image": image, "scale": scale})
    np.testing.assert_allclose(answer["OUTPUT__0"], mean.numpy(), rtol=1e-5)
    assert answer["OUTPUT__1"].tolist() == positive.numpy().tolist()

    pixels = RNG.normal(size=(5, 3, 32, 32)).astype(np.float32)
    expected = classifier(torch.from_numpy(pixels)).detach().numpy()
    np.testing.assert_allclose(
        call("classifier", {"INPUT__0": pixels})["OUTPUT__0"], expected, rtol=1e-5, atol=1e-6
    )
