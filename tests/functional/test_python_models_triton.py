"""Python models on the real tritonserver: the completed config and the packaged archive.

The config `deploy.repository` completes with a python model's
`auto_complete_config` must be the one Triton completes; the archive
`deploy package` writes for such a model must load and answer with Triton's
auto-completion off, because it carries that config.
"""

from __future__ import annotations

import json
import shutil
import tarfile
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from deploy.packaging import package_repository
from deploy.repository import LoadProblem, config_json, load_model
from tests.functional.repository_triton import (
    TritonProcess,
    mme_invoke,
    mme_load,
    run_tritonserver,
    shared_tritonserver,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "repos" / "python_backend_examples"

PARTIAL_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.add_input({"name": "A", "data_type": "TYPE_INT32", "dims": [-1]})
        config.add_input({"name": "B", "data_type": "TYPE_FP32", "dims": [2], "optional": True})
        config.add_output({"name": "C", "data_type": "TYPE_INT32", "dims": [-1]})
        config.set_max_batch_size(8)
        config.set_model_transaction_policy({"decoupled": True})
        return config

    def execute(self, requests):
        return None
"""

pytestmark = [pytest.mark.triton, pytest.mark.slow]


def _essentials(document: dict[str, object]) -> dict[str, object]:
    def tensors(entries: object) -> list[tuple[object, ...]]:
        assert isinstance(entries, list)
        return [
            (t["name"], t["data_type"], [int(d) for d in t["dims"]], t.get("optional", False))
            for t in entries
        ]

    policy = document.get("model_transaction_policy") or {}
    assert isinstance(policy, dict)
    return {
        "max_batch_size": document["max_batch_size"],
        "input": tensors(document["input"]),
        "output": tensors(document["output"]),
        "dynamic_batching": "dynamic_batching" in document,
        "sequence_batching": "sequence_batching" in document,
        "decoupled": bool(policy.get("decoupled", False)),
    }


def test_completed_configs_match_tritons(tmp_path: Path) -> None:
    repository = tmp_path / "repository"
    for name in ("batch_auto_complete", "nobatch_auto_complete"):
        shutil.copytree(EXAMPLES / name, repository / name)
    partial = repository / "partial"
    (partial / "1").mkdir(parents=True)
    (partial / "1" / "model.py").write_text(PARTIAL_MODEL)
    (partial / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 4\n'
        'input [ { name: "A", data_type: TYPE_INT32, dims: [ -1 ] } ]\n'
        "sequence_batching { }\n"
    )
    ours = {}
    for folder in sorted(repository.iterdir()):
        model = load_model(folder)
        assert not isinstance(model, LoadProblem), model
        ours[folder.name] = _essentials(config_json(model.config))
    with run_tritonserver(tmp_path / "server", repository=repository) as server:
        theirs = {}
        for name in ours:
            with urllib.request.urlopen(f"{server.url}/v2/models/{name}/config") as response:
                theirs[name] = _essentials(json.loads(response.read()))
    assert ours == theirs
    assert ours["partial"]["decoupled"] is True and ours["partial"]["max_batch_size"] == 8


@pytest.fixture(scope="module")
def strict_mme_server(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> TritonProcess:
    # As the local endpoint runs it: no config auto-completion.
    return shared_tritonserver(
        pytestconfig,
        tmp_path_factory,
        "mme-no-autocomplete",
        extra_args=("--disable-auto-complete-config",),
    )


def test_packaged_auto_complete_model_answers_without_auto_completion(
    strict_mme_server: TritonProcess, tmp_path: Path
) -> None:
    result = package_repository(EXAMPLES, tmp_path / "store")
    entry = result.manifest.models["batch_auto_complete"]
    assert [t.name for t in entry.inputs] == ["INPUT0", "INPUT1"]
    assert entry.max_batch_size == 4
    target = tmp_path / "extracted" / "model"
    with tarfile.open(tmp_path / "store" / entry.target_model) as archive:
        archive.extractall(target, filter="data")
    assert (target / "batch_auto_complete" / "config.pbtxt").is_file()
    status, body = mme_load(strict_mme_server, target, entry.target_model)
    assert status == 200, body

    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.ones((2, 4), dtype=np.float32)
    inputs = []
    for name, value in (("INPUT0", a), ("INPUT1", b)):
        tensor = httpclient.InferInput(name, list(value.shape), "FP32")
        tensor.set_data_from_numpy(value, binary_data=True)
        inputs.append(tensor)
    answer = mme_invoke(strict_mme_server, "extracted", entry.target_model, inputs)
    assert np.array_equal(answer.as_numpy("OUTPUT0"), a + b)  # type: ignore[attr-defined]
    assert np.array_equal(answer.as_numpy("OUTPUT1"), a - b)  # type: ignore[attr-defined]

    # The same folder without the written config does not load there.
    bare = tmp_path / "bare" / "model"
    shutil.copytree(EXAMPLES / "batch_auto_complete", bare / "batch_auto_complete")
    status, body = mme_load(strict_mme_server, bare, "bare.tar.gz")
    assert status == 400, body
