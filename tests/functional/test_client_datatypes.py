"""Every datatype the python backend carries, through the SDK and the real Triton server.

An identity model (one output per input, one input per datatype) is packaged
with `deploy.packaging` and dropped into a sub-folder of the shared endpoint's
model store; the endpoint loads it lazily on the first call, like SageMaker.
BF16 is left out: the python backend cannot hand BF16 to numpy (the codec's
BF16 handling is covered against tritonclient in the unit tests).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deploy.client import Endpoint

pytestmark = [pytest.mark.triton, pytest.mark.slow]

DATATYPES = {
    "BOOL": np.bool_,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BYTES": np.object_,
}
TRITON_TYPE = {name: f"TYPE_{'STRING' if name == 'BYTES' else name}" for name in DATATYPES}

MODEL_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = []
            for name in NAMES:
                data = pb_utils.get_input_tensor_by_name(request, "IN_" + name).as_numpy()
                outputs.append(pb_utils.Tensor("OUT_" + name, data))
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
"""


def write_identity_model(repo: Path) -> None:
    folder = repo / "sdk_identity"
    (folder / "1").mkdir(parents=True)
    inputs = ",\n".join(
        f'  {{ name: "IN_{n}", data_type: {TRITON_TYPE[n]}, dims: [ -1 ] }}' for n in DATATYPES
    )
    outputs = ",\n".join(
        f'  {{ name: "OUT_{n}", data_type: {TRITON_TYPE[n]}, dims: [ -1 ] }}' for n in DATATYPES
    )
    (folder / "config.pbtxt").write_text(
        'name: "sdk_identity"\nbackend: "python"\nmax_batch_size: 0\n'
        f"input [\n{inputs}\n]\noutput [\n{outputs}\n]\n"
        "instance_group [ { kind: KIND_CPU, count: 1 } ]\n"
    )
    names = json.dumps(list(DATATYPES))
    (folder / "1" / "model.py").write_text(f"NAMES = {names}\n{MODEL_PY}")


@pytest.fixture(scope="module")
def identity(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    try:
        handle = request.getfixturevalue("local_endpoint")
    except pytest.FixtureLookupError:
        pytest.skip("the shared local_endpoint fixture is not defined in tests/conftest.py")
    from deploy.packaging import package_repository

    root = tmp_path_factory.mktemp("sdk-identity")
    write_identity_model(root / "repo")
    package_repository(root / "repo", root / "store")
    manifest = root / "store" / "manifest.json"
    target = json.loads(manifest.read_text())["models"]["sdk_identity"]["target_model"]
    # A sub-folder keeps the shared store's top level as the other tests expect it.
    placed = Path(handle.store_dir) / "sdk-tests" / target
    placed.parent.mkdir(exist_ok=True)
    shutil.copyfile(root / "store" / target, placed)
    with Endpoint(handle.endpoint_name, endpoint_url=handle.url, manifest=manifest) as client:
        yield client, f"sdk-tests/{target}"


def sample(name: str, length: int) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(11)
    if name == "BOOL":
        return rng.integers(0, 2, length).astype(np.bool_)
    if name == "BYTES":
        return np.array([b"a\x00b", b"", "\u00e9".encode(), b"\xff\x00"][:length], dtype=object)
    dtype = np.dtype(DATATYPES[name])
    if dtype.kind == "f":
        return rng.standard_normal(length).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, length, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("length", [4, 0])
def test_every_datatype_round_trips(identity: tuple[Endpoint, str], length: int) -> None:
    client, target = identity
    inputs = {f"IN_{name}": sample(name, length) for name in DATATYPES}
    result = client.infer("sdk_identity", inputs, target_model=target)
    for name in DATATYPES:
        got = result[f"OUT_{name}"]
        assert result.datatypes[f"OUT_{name}"] == name
        assert got.shape == (length,)
        if name == "BYTES":
            assert got.tolist() == inputs[f"IN_{name}"].tolist()
        else:
            assert got.dtype == np.dtype(DATATYPES[name])
            np.testing.assert_array_equal(got, inputs[f"IN_{name}"])
