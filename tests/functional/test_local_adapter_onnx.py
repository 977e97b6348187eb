"""ONNX models through the python-backend adapter, as the onnxruntime backend serves them.

String tensors, the sequence batcher's control inputs with implicit state,
and optional inputs, on the real tritonserver behind the local endpoint and
called with boto3. Every answer is compared with running the same model file
directly with onnxruntime.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deploy.client import Endpoint, InvalidInputError
from deploy.packaging import package_repository
from tests.functional.local_models import (
    decode,
    folder_files,
    invoke,
    runtime_client,
    write_archive,
)
from tests.functional.onnx_models import optional_model, sequence_model, string_model

pytestmark = [pytest.mark.triton, pytest.mark.slow]


def session(folder: Path) -> Any:
    import onnxruntime

    return onnxruntime.InferenceSession(
        str(folder / "1" / "model.onnx"), providers=["CPUExecutionProvider"]
    )


def publish(endpoint: Any, folder: Path, name: str) -> str:
    target = f"onnx-adapter/{name}.tar.gz"
    write_archive(endpoint.store_dir / target, folder_files(folder, name))
    return target


def test_string_tensors_go_in_as_text_and_come_back_as_bytes(
    local_endpoint: Any, tmp_path: Path
) -> None:
    folder = string_model(tmp_path / "strings")
    target = publish(local_endpoint, folder, "strings")
    runtime = runtime_client(local_endpoint.url)
    text = np.array([["yes", "no", "né"], ["", "yes", "ünï"]], dtype=object)
    as_bytes = np.vectorize(lambda s: s.encode("utf-8"), otypes=[object])(text)

    _, outputs = invoke(runtime, "local", target, {"TEXT": as_bytes})

    shouted, is_yes = session(folder).run(["SHOUTED", "IS_YES"], {"TEXT": text})
    expected = np.vectorize(lambda s: s.encode("utf-8"), otypes=[object])(shouted)
    assert outputs["SHOUTED"].tolist() == expected.tolist()
    assert outputs["SHOUTED"][0, 2] == "né!".encode()
    np.testing.assert_array_equal(outputs["IS_YES"], is_yes)


def sequence_call(
    runtime: Any, target: str, value: float, sequence: int, *, start: bool, end: bool
) -> dict[str, np.ndarray]:
    import tritonclient.http as th

    tensor = th.InferInput("X", [1, 1], "FP32")
    tensor.set_data_from_numpy(np.array([[value]], dtype=np.float32))
    body, header = th.InferenceServerClient.generate_request_body(
        [tensor], sequence_id=sequence, sequence_start=start, sequence_end=end
    )
    content_type = f"application/vnd.sagemaker-triton.binary+json;json-header-size={header}"
    response = runtime.invoke_endpoint(
        EndpointName="local", TargetModel=target, Body=body, ContentType=content_type
    )
    return decode(response["Body"].read(), response["ContentType"])


def test_sequences_get_control_inputs_and_keep_implicit_state(
    local_endpoint: Any, tmp_path: Path
) -> None:
    folder = sequence_model(tmp_path / "accumulate")
    target = publish(local_endpoint, folder, "accumulate")
    runtime = runtime_client(local_endpoint.url)
    model = session(folder)
    # GIVEN two interleaved sequences, then sequence 7 again after its end
    steps = [
        (7, 1.0, True, False),
        (9, 10.0, True, False),
        (7, 2.0, False, False),
        (9, 20.0, False, False),
        (7, 4.0, False, True),
        (9, 40.0, False, True),
        (7, 100.0, True, False),
        (7, 5.0, False, True),
    ]
    state: dict[int, np.ndarray] = {}
    for sequence, value, start, end in steps:
        # WHEN each step is sent with its sequence id and flags
        outputs = sequence_call(runtime, target, value, sequence, start=start, end=end)
        # THEN the model sees what onnxruntime would be fed by Triton's backend
        feed = {
            "X": np.array([[value]], dtype=np.float32),
            "START": np.array([[int(start)]], dtype=np.int32),
            "END": np.array([[int(end)]], dtype=np.int32),
            "READY": np.array([[1]], dtype=np.int32),
            "CORRID": np.array([[sequence]], dtype=np.uint64),
            "SUM_IN": state.get(sequence, np.zeros((1, 1), np.float32)),
        }
        total, new_state, seen, flags = model.run(["SUM", "SUM_OUT", "SEEN", "FLAGS"], feed)
        state[sequence] = new_state
        np.testing.assert_array_equal(outputs["SUM"], total)
        np.testing.assert_array_equal(outputs["SEEN"], seen)
        np.testing.assert_array_equal(outputs["FLAGS"], flags)
        assert "SUM_OUT" not in outputs  # state stays inside the endpoint
    assert [float(state[7][0, 0]), float(state[9][0, 0])] == [105.0, 70.0]


def test_optional_inputs_may_be_left_out(local_endpoint: Any, tmp_path: Path) -> None:
    folder = optional_model(tmp_path / "scaled")
    target = publish(local_endpoint, folder, "scaled")
    runtime = runtime_client(local_endpoint.url)
    model = session(folder)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    scale = np.full((3, 2), 0.5, dtype=np.float32)

    _, without = invoke(runtime, "local", target, {"X": x})
    _, given = invoke(runtime, "local", target, {"X": x, "SCALE": scale})

    np.testing.assert_array_equal(without["Y"], model.run(["Y"], {"X": x})[0])
    np.testing.assert_array_equal(given["Y"], model.run(["Y"], {"X": x, "SCALE": scale})[0])
    assert not np.array_equal(without["Y"], given["Y"])


def test_sdk_omits_inputs_the_manifest_marks_optional(local_endpoint: Any, tmp_path: Path) -> None:
    folder = optional_model(tmp_path / "repo" / "scaled")
    # GIVEN the repository packaged into a folder of the endpoint's store
    out = local_endpoint.store_dir / "optional-sdk"
    package_repository(folder.parent, out)
    document = json.loads((out / "manifest.json").read_text())
    entry = document["models"]["scaled"]
    assert entry["inputs"][1] == {
        "name": "SCALE",
        "datatype": "FP32",
        "shape": [2],
        "optional": True,
    }
    entry["target_model"] = f"optional-sdk/{entry['target_model']}"  # relative to the store
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(document))
    x = np.ones((2, 2), dtype=np.float32)

    with Endpoint("local", endpoint_url=local_endpoint.url, manifest=manifest) as endpoint:
        # WHEN the optional input is left out THEN the model's default is used
        result = endpoint.infer("scaled", {"X": x})
        np.testing.assert_array_equal(result["Y"], session(folder).run(["Y"], {"X": x})[0])
        # and the required one still is required
        with pytest.raises(InvalidInputError, match="needs input 'X'"):
            endpoint.infer("scaled", {"SCALE": x})
