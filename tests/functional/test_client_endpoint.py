"""The SDK against the local endpoint on the real Triton server, every example model.

Uses the session's shared `local_endpoint` fixture (url, endpoint_name,
store_dir) so the whole run starts one tritonserver.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from deploy.client import (
    AsyncEndpoint,
    Endpoint,
    EndpointError,
    InvalidInputError,
    Manifest,
    ModelError,
    ModelNotFoundError,
    RetryPolicy,
)

pytestmark = [pytest.mark.triton, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
LABELS = (ROOT / "model_packages/examples/classifier/labels.txt").read_text().split()


@pytest.fixture(scope="module")
def local(request: pytest.FixtureRequest) -> Any:
    try:
        handle = request.getfixturevalue("local_endpoint")
    except pytest.FixtureLookupError:
        pytest.skip("the shared local_endpoint fixture is not defined in tests/conftest.py")
    if not (Path(handle.store_dir) / "manifest.json").is_file():
        pytest.skip("the examples are not packaged (deploy.packaging is not available)")
    return handle


@pytest.fixture(scope="module")
def manifest_path(local: Any) -> Path:
    return Path(local.store_dir) / "manifest.json"


@pytest.fixture(scope="module")
def endpoint(local: Any, manifest_path: Path) -> Any:
    with Endpoint(local.endpoint_name, endpoint_url=local.url, manifest=manifest_path) as client:
        yield client


def images(count: int) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(3)
    return rng.integers(0, 256, size=(count, 32, 32, 3), dtype=np.uint8)


def test_addsub_batch_and_output_selection(endpoint: Endpoint) -> None:
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.ones((2, 4), np.float32)
    result = endpoint.infer("addsub", {"INPUT0": a, "INPUT1": b})
    np.testing.assert_array_equal(result["OUTPUT0"], a + b)
    np.testing.assert_array_equal(result["OUTPUT1"], a - b)
    assert result.target_model is not None and result.target_model.endswith(".tar.gz")
    only = endpoint.infer("addsub", {"INPUT0": a, "INPUT1": b}, ["OUTPUT1"])
    assert list(only) == ["OUTPUT1"]


def test_bls_addsub(endpoint: Endpoint) -> None:
    a = np.full((1, 4), 3, np.float32)
    b = np.arange(4, dtype=np.float32)[None, :]
    result = endpoint.infer("bls_addsub", {"A": a, "B": b})
    # The BLS model calls addsub on (2A, 2B).
    np.testing.assert_array_equal(result["SUM"], 2 * a + 2 * b)
    np.testing.assert_array_equal(result["DIFF"], 2 * a - 2 * b)


def test_strings_bytes_with_nuls_and_int32(endpoint: Endpoint) -> None:
    text = np.array([b"hello", "gr\u00fc\u00dfe", b"a\x00b", b""], dtype=object)
    result = endpoint.infer("strings", {"TEXT": text})
    assert result["UPPER"].tolist() == [b"HELLO", "GR\u00dcSSE".encode(), b"A\x00B", b""]
    assert result["LENGTHS"].dtype == np.int32
    assert result["LENGTHS"].tolist() == [5, 5, 3, 0]


def test_classifier_scores_and_classes(endpoint: Endpoint) -> None:
    pixels = np.random.default_rng(5).standard_normal((2, 3, 32, 32)).astype(np.float32)
    scores = endpoint.infer("classifier", {"INPUT__0": pixels})["OUTPUT__0"]
    assert scores.shape == (2, 10) and scores.dtype == np.float32
    top = endpoint.infer("classifier", {"INPUT__0": pixels}, class_count=3)
    rows = top.classes("OUTPUT__0")
    assert len(rows) == 2
    for row, raw in zip(rows, scores, strict=True):
        assert [entry.index for entry in row] == list(np.argsort(-raw)[:3])
        assert [entry.label for entry in row] == [LABELS[entry.index] for entry in row]
        np.testing.assert_allclose([entry.score for entry in row], np.sort(raw)[::-1][:3], 1e-5)


def test_preprocess_and_image_pipeline_agree_with_classifier(endpoint: Endpoint) -> None:
    image = images(2)
    pixels = endpoint.infer("preprocess", {"IMAGE": image})["PIXELS"]
    assert pixels.shape == (2, 3, 32, 32) and pixels.dtype == np.float32
    direct = endpoint.infer("classifier", {"INPUT__0": np.array(pixels)})["OUTPUT__0"]
    pipeline = endpoint.infer("image_pipeline", {"IMAGE": image}, class_count=1)
    labels = [row[0].label for row in pipeline.classes("SCORES")]
    assert labels == [LABELS[int(i)] for i in np.argmax(direct, axis=1)]


def test_wrong_input_is_refused_before_sending(endpoint: Endpoint) -> None:
    with pytest.raises(InvalidInputError, match=r"input 'INPUT0'.*float64"):
        endpoint.infer("addsub", {"INPUT0": np.zeros((1, 4)), "INPUT1": np.zeros((1, 4))})


def test_triton_rejection_is_a_model_error(local: Any, manifest_path: Path) -> None:
    target = json.loads(manifest_path.read_text())["models"]["addsub"]["target_model"]
    bad = np.zeros((1, 5), np.float32)
    # A manifest that declares nothing: the SDK checks no shapes, Triton does.
    nothing = Manifest("multi-model", {}, "nothing")
    with Endpoint(local.endpoint_name, endpoint_url=local.url, manifest=nothing) as bare:
        with pytest.raises(ModelError) as caught:
            bare.infer(target, {"INPUT0": bad, "INPUT1": bad})
        assert caught.value.status == 400
        with pytest.raises(ModelNotFoundError, match="nothing-here"):
            bare.infer("nothing-here.tar.gz", {"INPUT0": bad})


def test_oversized_request_answered_by_the_endpoint(local: Any) -> None:
    big = np.array([b"x" * (7 * 1024 * 1024)], dtype=object)
    with (
        Endpoint(
            local.endpoint_name, endpoint_url=local.url, max_payload_bytes=64 * 1024 * 1024
        ) as loose,
        pytest.raises(EndpointError) as caught,
    ):
        loose.infer("strings-any.tar.gz", {"TEXT": big})
    assert caught.value.status == 413
    assert "smaller batches" in str(caught.value)


def test_stale_manifest_is_refreshed_once(local: Any, manifest_path: Path, tmp_path: Path) -> None:
    current = json.loads(manifest_path.read_text())
    stale = json.loads(json.dumps(current))
    stale["models"]["addsub"]["target_model"] = "addsub-0000000000000000.tar.gz"
    copy = tmp_path / "manifest.json"
    copy.write_text(json.dumps(stale))
    a = np.ones((1, 4), np.float32)
    with Endpoint(local.endpoint_name, endpoint_url=local.url, manifest=copy) as client:
        assert client.model_info("addsub") is not None  # cached: the stale name
        copy.write_text(json.dumps(current))
        result = client.infer("addsub", {"INPUT0": a, "INPUT1": a})
    assert result.target_model == current["models"]["addsub"]["target_model"]


def test_async_endpoint_concurrent_calls(local: Any, manifest_path: Path) -> None:
    async def run() -> list[Any]:
        async with AsyncEndpoint(
            local.endpoint_name,
            endpoint_url=local.url,
            manifest=manifest_path,
            retries=RetryPolicy(),
        ) as client:
            calls = [
                client.infer(
                    "addsub",
                    {
                        "INPUT0": np.full((1, 4), i, np.float32),
                        "INPUT1": np.ones((1, 4), np.float32),
                    },
                )
                for i in range(8)
            ]
            calls.append(client.infer("strings", {"TEXT": np.array([b"async"], dtype=object)}))
            return await asyncio.gather(*calls)

    results = asyncio.run(run())
    for i, result in enumerate(results[:8]):
        np.testing.assert_array_equal(result["OUTPUT0"], np.full((1, 4), i + 1, np.float32))
    assert results[8]["UPPER"].tolist() == [b"ASYNC"]


def test_deploy_invoke_file_to_file(local: Any, manifest_path: Path, tmp_path: Path) -> None:
    from deploy.cli import app

    inputs = tmp_path / "in.npz"
    np.savez(inputs, TEXT=np.array(["abc", "xy"]))
    out = tmp_path / "out.json"
    args = ["invoke", "strings", "--input", str(inputs), "--output", str(out)]
    args += ["--endpoint", local.endpoint_name, "--endpoint-url", local.url]
    args += ["--manifest", str(manifest_path), "--json"]
    outcome = CliRunner().invoke(app, args)
    assert outcome.exit_code == 0, outcome.output
    document = json.loads(out.read_text())
    by_name = {entry["name"]: entry for entry in document["outputs"]}
    assert by_name["UPPER"]["data"] == ["ABC", "XY"]
    assert by_name["LENGTHS"] == {
        "name": "LENGTHS",
        "datatype": "INT32",
        "shape": [2],
        "data": [3, 2],
    }


def test_readme_example_runs(local: Any, manifest_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- readme-example: client -->\n```python\n(.*?)```", readme, re.S)
    assert match, "README lost its client example"
    env = {**os.environ, "DEPLOY_ENDPOINT_URL": local.url, "DEPLOY_MANIFEST": str(manifest_path)}
    code = match.group(1)
    if local.endpoint_name != "local":
        code = code.replace('"local",', f"{local.endpoint_name!r},", 1)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "[[0. 2. 4. 6.]] [[0. 0. 0. 0.]]" in done.stdout


def test_deploy_invoke_prints_classes(local: Any, manifest_path: Path, tmp_path: Path) -> None:
    from deploy.cli import app

    pixels = np.zeros((1, 3, 32, 32), np.float32)
    entry = {"name": "INPUT__0", "datatype": "FP32", "shape": [1, 3, 32, 32]}
    entry["data"] = pixels.reshape(-1).tolist()
    inputs = tmp_path / "in.json"
    inputs.write_text(json.dumps({"inputs": [entry]}))
    args = ["invoke", "classifier", "--input", str(inputs), "--class-count", "2"]
    args += ["--endpoint", local.endpoint_name, "--endpoint-url", local.url]
    args += ["--manifest", str(manifest_path)]
    outcome = CliRunner().invoke(app, args)
    assert outcome.exit_code == 0, outcome.output
    assert "OUTPUT__0" in outcome.output
    assert any(label in outcome.output for label in LABELS)
