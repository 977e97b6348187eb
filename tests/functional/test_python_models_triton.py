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
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from deploy.packaging import package_repository
from deploy.repository import (
    COMPLETED_CONFIG_HEADER,
    LoadProblem,
    config_json,
    load_model,
    parse_config,
)
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

# A hook that builds its config from the module's tables and helpers; its tensor names,
# dims and max_batch_size encode what each returned, so comparing the configs compares them.
UTILS_MODEL = """
import os

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        for type_name, numpy_type in pb_utils.TRITON_STRING_TO_NUMPY.items():
            number = pb_utils.numpy_to_triton_type(np.dtype(numpy_type))
            size = np.dtype(pb_utils.triton_to_numpy_type(number)).itemsize
            assert pb_utils.triton_string_to_numpy(type_name) is numpy_type
            config.add_input(
                {"name": f"{type_name.lower()}_{number}", "data_type": type_name, "dims": [size]}
            )
        encoded = pb_utils.serialize_byte_tensor(np.array([b"ab", "c"], dtype=np.object_))
        decoded = pb_utils.deserialize_bytes_tensor(encoded)
        error = pb_utils.TritonError("bad", pb_utils.TritonError.INVALID_ARG)
        try:
            raise pb_utils.TritonModelException("boom")
        except pb_utils.TritonModelException as exc:
            caught = str(exc)
        pb_utils.Logger.log_info("completing")
        words = [os.path.basename(pb_utils.get_model_dir()), caught]
        words += [item.decode() for item in decoded]
        dims = [len(encoded), int(error.code()), int(pb_utils.TRITONSERVER_MEMORY_CPU) + 1]
        config.add_output({"name": "_".join(words), "data_type": "TYPE_STRING", "dims": dims})
        first = pb_utils.get_input_config_by_name(config.as_dict(), "type_bool_1")
        decoupled = pb_utils.using_decoupled_model_transaction_policy(config.as_dict())
        config.set_max_batch_size(
            len(first["dims"]) + 2 * int(decoupled) + 4 * int(hasattr(pb_utils, "RawData"))
        )
        return config

    def execute(self, requests):
        return None
"""

# Doubles X; its config.pbtxt names only the backend and the instances.
DOUBLER_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.add_input({"name": "X", "data_type": "TYPE_FP32", "dims": [-1]})
        config.add_output({"name": "Y", "data_type": "TYPE_FP32", "dims": [-1]})
        return config

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * 2)]))
        return responses
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
    (repository / "utils" / "1").mkdir(parents=True)
    (repository / "utils" / "1" / "model.py").write_text(UTILS_MODEL)
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
    assert len(ours["utils"]["input"]) == 13 and ours["utils"]["max_batch_size"] == 1


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


def test_packaged_partial_config_is_the_completed_one(
    strict_mme_server: TritonProcess, tmp_path: Path
) -> None:
    # GIVEN a python model whose config.pbtxt has no tensors; auto_complete_config adds them
    repository = tmp_path / "repository"
    (repository / "doubler" / "1").mkdir(parents=True)
    (repository / "doubler" / "1" / "model.py").write_text(DOUBLER_MODEL)
    (repository / "doubler" / "config.pbtxt").write_text(
        'backend: "python"\ninstance_group [ { count: 2, kind: KIND_CPU } ]\n'
    )
    # WHEN it is packaged
    result = package_repository(repository, tmp_path / "store")
    entry = result.manifest.models["doubler"]
    target = tmp_path / "completed" / "model"
    with tarfile.open(tmp_path / "store" / entry.target_model) as archive:
        archive.extractall(target, filter="data")
    # THEN the archive's config.pbtxt is the completed one (and keeps what config.pbtxt set)
    text = (target / "doubler" / "config.pbtxt").read_text()
    assert text.startswith(COMPLETED_CONFIG_HEADER + "\n")
    config = parse_config(text)
    assert [(t.name, list(t.dims)) for t in config.input] == [("X", [-1])]
    assert [t.name for t in config.output] == ["Y"]
    assert config.instance_group[0].count == 2
    # AND it loads and answers on Triton without auto-completion, as the local endpoint runs it
    status, body = mme_load(strict_mme_server, target, entry.target_model)
    assert status == 200, body
    x = np.array([1.5, -2.0, 3.0], dtype=np.float32)
    tensor = httpclient.InferInput("X", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x, binary_data=True)
    answer = mme_invoke(strict_mme_server, "completed", entry.target_model, [tensor])
    assert np.array_equal(answer.as_numpy("Y"), x * 2)  # type: ignore[attr-defined]
    # AND the folder as written loads there with no inputs, so the same request is refused
    written = tmp_path / "written" / "model"
    shutil.copytree(repository, written)
    status, body = mme_load(strict_mme_server, written, "written.tar.gz")
    assert status == 200, body
    with pytest.raises(urllib.error.HTTPError) as refused:
        mme_invoke(strict_mme_server, "written", "written.tar.gz", [tensor])
    assert "expected 0 inputs" in refused.value.read().decode()
