"""Packaged archives load and answer on the real tritonserver in SageMaker MME mode.

Each archive is extracted the way SageMaker does (`<root>/<hash>/model`) and
loaded under its `target_model`; the BLS archive proves that its bundled
dependency is loaded and called under the name the BLS code uses.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deploy.packaging import package_repository
from tests.functional.repository_triton import (
    TritonProcess,
    mme_invoke,
    mme_load,
    shared_tritonserver,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "model_packages" / "examples"

pytestmark = [pytest.mark.triton, pytest.mark.slow]


@pytest.fixture(scope="session")
def mme_server(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> TritonProcess:
    return shared_tritonserver(pytestconfig, tmp_path_factory, "mme")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("store")
    package_repository(EXAMPLES, out)
    return out


def load_archive(server: TritonProcess, store: Path, name: str, root: Path) -> tuple[str, str]:
    from deploy.packaging import read_manifest

    entry = read_manifest(store).models[name]
    name_hash = f"pkg{entry.source_digest[:12]}"
    folder = root / name_hash / "model"
    folder.mkdir(parents=True)
    with tarfile.open(store / entry.target_model) as tar:
        tar.extractall(folder, filter="data")
    status, body = mme_load(server, folder, entry.target_model)
    assert status == 200, body
    return name_hash, entry.target_model


def fp32(name: str, array: np.ndarray) -> Any:
    import tritonclient.http as httpclient

    tensor = httpclient.InferInput(name, list(array.shape), "FP32")
    tensor.set_data_from_numpy(array)
    return tensor


def test_bls_archive_loads_and_calls_its_bundled_dependency(
    mme_server: TritonProcess, store: Path, tmp_path: Path
) -> None:
    name_hash, target = load_archive(mme_server, store, "bls_addsub", tmp_path)
    a = np.array([[1, 2, 3, 4]], dtype=np.float32)
    b = np.array([[0.5, 0.5, 0.5, 0.5]], dtype=np.float32)
    result: Any = mme_invoke(mme_server, name_hash, target, [fp32("A", a), fp32("B", b)])
    np.testing.assert_array_equal(result.as_numpy("SUM"), 2 * a + 2 * b)
    np.testing.assert_array_equal(result.as_numpy("DIFF"), 2 * a - 2 * b)


def test_model_archive_loads_under_its_target_model(
    mme_server: TritonProcess, store: Path, tmp_path: Path
) -> None:
    name_hash, target = load_archive(mme_server, store, "addsub", tmp_path)
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    result: Any = mme_invoke(mme_server, name_hash, target, [fp32("INPUT0", a), fp32("INPUT1", a)])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + a)
