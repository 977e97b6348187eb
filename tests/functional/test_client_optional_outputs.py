"""Outputs a model may leave out: the tutorials' identity model, its optional input omitted.

Source of the model: tests/corpus/repos/tut_identity (triton-inference-server/tutorials,
Triton_Inference_Server_Python_API/identity-models, BSD-3-Clause). Called without
`string_input`, it answers only `fp16_output`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from deploy.client import Endpoint, ResponseFormatError
from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint
from deploy.packaging import package_repository

pytestmark = [pytest.mark.triton, pytest.mark.slow]

IDENTITY = Path(__file__).resolve().parents[1] / "corpus" / "repos" / "tut_identity"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("identity") / "store"
    package_repository(IDENTITY, out)
    return out


@pytest.fixture(scope="module")
def endpoint(store: Path) -> Iterator[LocalEndpoint]:
    root = store.parent
    served = LocalEndpoint(
        root / "store", work_dir=root / "work", options=EndpointOptions(endpoint_name="identity")
    ).start()
    try:
        yield served
    finally:
        served.stop()


def test_the_manifest_marks_outputs_of_a_model_with_optional_inputs_optional(
    store: Path,
) -> None:
    manifest = json.loads((store / "manifest.json").read_text())
    outputs = manifest["models"]["identity"]["outputs"]
    assert {"fp16_output", "string_output"} <= {o["name"] for o in outputs}
    assert all(o.get("optional") is True for o in outputs)
    assert all(i.get("optional") is True for i in manifest["models"]["identity"]["inputs"])


def test_the_sdk_accepts_an_answer_without_the_outputs_of_omitted_inputs(
    endpoint: LocalEndpoint,
) -> None:
    value = np.array([[1.5]], dtype=np.float16)
    with Endpoint(endpoint.endpoint_name, endpoint_url=endpoint.url) as client:
        result = client.infer("identity", {"fp16_input": value})
        assert set(result) == {"fp16_output"}
        np.testing.assert_array_equal(result["fp16_output"], value)
        # Asked for by name, a missing output is still an error.
        with pytest.raises(ResponseFormatError, match="string_output"):
            client.infer("identity", {"fp16_input": value}, outputs=["string_output"])
