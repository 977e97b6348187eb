"""Two BLS archives that bundle different models called `preprocess` on one endpoint.

GIVEN two repositories, each with a BLS caller that bundles its own `preprocess`
(one answers 1, the other 2), packaged with `deploy package` into one store,
served by the local endpoint (the real tritonserver in SageMaker MME mode)
WHEN both callers are invoked, also after the first one is unloaded
THEN each caller gets its own `preprocess`'s answer or a ModelError naming
both archives, never the other's answer; a third caller bundling a copy
identical to the first's loads and answers beside it.

On the old code the second caller answered 1: tritonserver kept the first
archive's `preprocess`, loaded under its plain name.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from botocore.exceptions import ClientError

from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint
from deploy.packaging import package_repository
from tests.conftest import EXAMPLES
from tests.functional.local_models import invoke, runtime_client

pytestmark = [pytest.mark.triton, pytest.mark.slow]

# The bundled-dependency loader of the BLS example (everything above its class).
LOADER = (
    (EXAMPLES / "bls_addsub" / "1" / "model.py").read_text().split("class TritonPythonModel")[0]
)
TENSORS = (
    'input [{ name: "X", data_type: TYPE_FP32, dims: [1] }]\n'
    'output [{ name: "Y", data_type: TYPE_FP32, dims: [1] }]\n'
)
CALLER = textwrap.dedent(
    """
    class TritonPythonModel:
        def initialize(self, args):
            load_bundled_dependencies(args)

        def execute(self, requests):
            responses = []
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "X")
                call = pb_utils.InferenceRequest(
                    model_name="preprocess", requested_output_names=["Y"], inputs=[x]
                )
                result = call.exec()
                if result.has_error():
                    raise pb_utils.TritonModelException(result.error().message())
                y = pb_utils.get_output_tensor_by_name(result, "Y")
                responses.append(pb_utils.InferenceResponse([y]))
            return responses
    """
)


def preprocess(repository: Path, answer: float) -> None:
    folder = repository / "preprocess"
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(
        'name: "preprocess"\nbackend: "python"\nmax_batch_size: 0\n' + TENSORS
    )
    (folder / "1" / "model.py").write_text(
        textwrap.dedent(
            f"""
            import numpy as np
            import triton_python_backend_utils as pb_utils

            class TritonPythonModel:
                def execute(self, requests):
                    y = np.array([{answer}], dtype=np.float32)
                    return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", y)]) for _ in requests]
            """
        )
    )


def caller(repository: Path, name: str) -> None:
    folder = repository / name
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 0\n'
        + TENSORS
        + 'parameters { key: "deploy.dependencies" value { string_value: "preprocess" } }\n'
    )
    (folder / "1" / "model.py").write_text(LOADER + CALLER)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One store with caller_a and caller_c (bundling preprocess -> 1) from one
    repository and caller_b (bundling preprocess -> 2) from another."""
    root = tmp_path_factory.mktemp("bundles")
    first, second = root / "first", root / "second"
    preprocess(first, 1.0)
    caller(first, "caller_a")
    caller(first, "caller_c")
    preprocess(second, 2.0)
    caller(second, "caller_b")
    store = root / "store"
    store.mkdir()
    models: dict[str, Any] = {}
    for repository, wanted in ((first, ("caller_a", "caller_c")), (second, ("caller_b",))):
        out = root / f"{repository.name}-package"
        manifest = package_repository(repository, out).manifest
        for name in wanted:
            entry = manifest.models[name]
            shutil.copy(out / entry.target_model, store / entry.target_model)
            models[name] = entry.to_document()
    document = {"format": 1, "hosting": "multi-model", "models": models}
    (store / "manifest.json").write_text(json.dumps(document))
    return store, {name: entry["target_model"] for name, entry in models.items()}


def test_callers_bundling_different_preprocess_never_get_each_others_answer(
    store: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    folder, targets = store
    x = {"X": np.array([0.0], dtype=np.float32)}
    with LocalEndpoint(folder, work_dir=tmp_path / "work", options=EndpointOptions()) as endpoint:
        runtime = runtime_client(endpoint.url)

        def answer(name: str) -> float:
            _, outputs = invoke(runtime, "local", targets[name], x)
            return float(outputs["Y"][0])

        def refusal(name: str) -> str:
            with pytest.raises(ClientError) as caught:
                invoke(runtime, "local", targets[name], x)
            error = caught.value.response["Error"]
            assert error["Code"] == "ModelError"
            return str(error["Message"])

        assert answer("caller_a") == 1.0
        assert endpoint.listing()["bundled"] == {"preprocess": targets["caller_a"]}
        message = refusal("caller_b")
        assert targets["caller_a"] in message and targets["caller_b"] in message
        assert "'preprocess'" in message and "another name" in message
        # An identical bundle loads beside the first, and both still answer.
        assert answer("caller_c") == 1.0
        assert answer("caller_a") == 1.0
        # tritonserver keeps the bundled preprocess after its callers unload: still refused.
        assert endpoint.platform.unload(targets["caller_a"])
        assert endpoint.platform.unload(targets["caller_c"])
        assert "'preprocess'" in refusal("caller_b")
        assert answer("caller_a") == 1.0


def test_a_bundle_named_like_an_ensemble_step_fails_the_bls_calls_as_validate_warns(
    tmp_path: Path,
) -> None:
    """What `deploy validate` warns about (rules/bundles.py), on the real server: an
    ensemble whose step is `preprocess` and a BLS archive bundling `preprocess`."""
    from deploy.validation import validate_repository

    repo = tmp_path / "repo"
    preprocess(repo, 1.0)
    caller(repo, "caller_a")
    (repo / "pipe" / "1").mkdir(parents=True)
    (repo / "pipe" / "config.pbtxt").write_text(
        'name: "pipe"\nplatform: "ensemble"\nmax_batch_size: 0\n'
        + TENSORS
        + 'ensemble_scheduling { step [ { model_name: "preprocess" model_version: -1 '
        'input_map { key: "X" value: "X" } output_map { key: "Y" value: "Y" } } ] }\n'
    )
    (warned,) = [
        d
        for d in validate_repository(repo).warnings
        if d.model == "caller_a" and "ensemble" in d.message
    ]
    assert '"preprocess"' in warned.message and '"pipe"' in warned.message
    manifest = package_repository(repo, tmp_path / "store").manifest
    x = {"X": np.array([0.0], dtype=np.float32)}
    options = EndpointOptions()
    with LocalEndpoint(tmp_path / "store", work_dir=tmp_path / "work", options=options) as endpoint:
        runtime = runtime_client(endpoint.url)
        _, outputs = invoke(runtime, "local", manifest.models["caller_a"].target_model, x)
        assert float(outputs["Y"][0]) == 1.0  # alone, the bundle answers
        _, outputs = invoke(runtime, "local", manifest.models["pipe"].target_model, x)
        assert float(outputs["Y"][0]) == 1.0
        with pytest.raises(ClientError) as caught:  # beside the ensemble, it fails
            invoke(runtime, "local", manifest.models["caller_a"].target_model, x)
        assert "Model 'preprocess' is not ready" in caught.value.response["Error"]["Message"]
