"""Manifest parsing, logical-name routing and validation before sending."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deploy.client import (
    InvalidInputError,
    Manifest,
    ManifestError,
    ModelNotFoundError,
    PayloadTooLargeError,
)
from deploy.client._core import Prepared, prepare, route


def manifest_document(hosting: str = "multi-model") -> dict[str, Any]:
    return {
        "format": 1,
        "hosting": hosting,
        "models": {
            "addsub": {
                "name": "addsub",
                "target_model": "addsub-1f3c5a7e9b2d4c6a.tar.gz",
                "max_batch_size": 8,
                "inputs": [
                    {"name": "INPUT0", "datatype": "FP32", "shape": [4]},
                    {"name": "INPUT1", "datatype": "FP32", "shape": [4]},
                ],
                "outputs": [
                    {"name": "OUTPUT0", "datatype": "FP32", "shape": [4]},
                    {"name": "OUTPUT1", "datatype": "FP32", "shape": [4]},
                ],
            },
            "strings": {
                "name": "strings",
                "target_model": "strings-0000000000000000.tar.gz",
                "max_batch_size": 0,
                "inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [-1]}],
                "outputs": [{"name": "UPPER", "datatype": "BYTES", "shape": [-1]}],
            },
        },
    }


MANIFEST = Manifest.parse(manifest_document(), "store/manifest.json")
ROW = np.zeros((1, 4), np.float32)


def prepared(
    model: str, inputs: dict[str, Any], manifest: Manifest | None = MANIFEST, **kw: Any
) -> Prepared:
    chosen = route(model, kw.pop("target_model", None), manifest, None)
    return prepare(
        chosen,
        inputs,
        kw.pop("outputs", None),
        class_count=kw.pop("class_count", None),
        parameters=kw.pop("parameters", None),
        max_payload_bytes=kw.pop("limit", None),
        endpoint="ep",
        manifest=manifest,
    )


def header(request: Prepared) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(request.request.body[: request.request.header_size])
    return document


def test_read_from_directory_or_file(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps(manifest_document()))
    assert Manifest.from_path(tmp_path).models["addsub"].max_batch_size == 8
    assert Manifest.from_path(tmp_path / "manifest.json").find("strings-0000000000000000.tar.gz")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(format=2), "format 2"),
        (lambda d: d.update(hosting="multimodel"), "unknown hosting .multimodel."),
        (lambda d: d["models"]["addsub"].pop("target_model"), "models.addsub: has no target_model"),
        (
            lambda d: d["models"]["addsub"]["inputs"][0].update(datatype="FLOAT"),
            r"models.addsub.inputs\[0\]: has unknown datatype 'FLOAT'",
        ),
        (lambda d: d["models"]["strings"].update(max_batch_size=-1), "invalid max_batch_size"),
        (
            lambda d: d["models"]["addsub"]["inputs"][1].update(optional="yes"),
            r"models.addsub.inputs\[1\]: has invalid optional 'yes'",
        ),
    ],
)
def test_broken_manifest_names_the_field(mutate: Any, message: str) -> None:
    document = manifest_document()
    mutate(document)
    with pytest.raises(ManifestError, match=message):
        Manifest.parse(document, "m.json")


def test_unreadable_manifest_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="deploy package"):
        Manifest.from_path(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ManifestError, match="not valid JSON"):
        Manifest.from_path(tmp_path / "bad.json")


def test_logical_name_resolves_to_target_model() -> None:
    request = prepared("addsub", {"INPUT0": ROW, "INPUT1": ROW})
    assert request.route.target_model == "addsub-1f3c5a7e9b2d4c6a.tar.gz"
    assert request.route.from_manifest


def test_explicit_target_model_is_always_accepted() -> None:
    request = prepared("addsub", {"INPUT0": ROW, "INPUT1": ROW}, target_model="addsub-old.tar.gz")
    assert request.route.target_model == "addsub-old.tar.gz"
    assert prepared("x.tar.gz", {"A": ROW}, manifest=None).route.target_model == "x.tar.gz"


def test_unknown_logical_name_lists_known_models() -> None:
    with pytest.raises(ModelNotFoundError, match="known models: addsub, strings"):
        prepared("clasifier", {"A": ROW})


def test_without_manifest_a_logical_name_asks_for_manifest_or_target_model() -> None:
    with pytest.raises(ModelNotFoundError, match=r"pass manifest=.*or target_model="):
        route("classifier", None, None, "could not find the manifest of endpoint 'ep'")


def test_single_model_hosting_sends_target_model_parameter() -> None:
    single = Manifest.parse(manifest_document("single-model"), "m.json")
    request = prepared("addsub", {"INPUT0": ROW, "INPUT1": ROW}, manifest=single)
    assert request.route.target_model is None
    assert header(request)["parameters"]["target_model"] == "addsub"


def test_validation_names_the_tensor() -> None:
    with pytest.raises(InvalidInputError, match=r"no input 'INPUT2'.*INPUT0, INPUT1"):
        prepared("addsub", {"INPUT0": ROW, "INPUT2": ROW})
    with pytest.raises(InvalidInputError, match="needs input 'INPUT1'"):
        prepared("addsub", {"INPUT0": ROW})
    with pytest.raises(InvalidInputError, match=r"input 'INPUT1'.*float64.*FP32"):
        prepared("addsub", {"INPUT0": ROW, "INPUT1": ROW.astype(np.float64)})
    with pytest.raises(InvalidInputError, match=r"input 'INPUT0'.*\[4\].*\[batch, 4\]"):
        prepared("addsub", {"INPUT0": np.zeros(4, np.float32), "INPUT1": ROW})
    with pytest.raises(InvalidInputError, match=r"batch size 9.*1..8"):
        nine = np.zeros((9, 4), np.float32)
        prepared("addsub", {"INPUT0": nine, "INPUT1": nine})
    with pytest.raises(InvalidInputError, match=r"shape \[1, 5\].*declares \[4\]"):
        five = np.zeros((1, 5), np.float32)
        prepared("addsub", {"INPUT0": five, "INPUT1": five})
    with pytest.raises(InvalidInputError, match="no output 'OUTPUT9'"):
        prepared("addsub", {"INPUT0": ROW, "INPUT1": ROW}, outputs=["OUTPUT9"])


def test_inputs_marked_optional_may_be_omitted() -> None:
    document = manifest_document()
    document["models"]["addsub"]["inputs"][1]["optional"] = True
    manifest = Manifest.parse(document, "m.json")
    assert [spec.optional for spec in manifest.models["addsub"].inputs] == [False, True]

    request = prepared("addsub", {"INPUT0": ROW}, manifest=manifest)

    assert [i["name"] for i in header(request)["inputs"]] == ["INPUT0"]
    with pytest.raises(InvalidInputError, match=r"needs input 'INPUT0'.*required input: INPUT0\)"):
        prepared("addsub", {"INPUT1": ROW}, manifest=manifest)


def test_inputs_are_required_in_manifests_that_do_not_say() -> None:
    assert not any(spec.optional for spec in MANIFEST.models["addsub"].inputs)
    with pytest.raises(InvalidInputError, match="needs input 'INPUT1'"):
        prepared("addsub", {"INPUT0": ROW})


def test_minus_one_accepts_any_size() -> None:
    for length in (0, 1, 7):
        text = np.array([b"x"] * length, dtype=object)
        assert prepared("strings", {"TEXT": text}).request.body


def test_payload_limit_reports_both_sizes() -> None:
    with pytest.raises(
        PayloadTooLargeError, match=r"\d+ bytes, over the multi-model endpoint's limit of 100"
    ):
        prepared("addsub", {"INPUT0": ROW, "INPUT1": ROW}, limit=100)


def test_class_count_defaults_to_every_declared_output() -> None:
    request = prepared("addsub", {"INPUT0": ROW, "INPUT1": ROW}, class_count=2)
    names = [entry["name"] for entry in header(request)["outputs"]]
    assert names == ["OUTPUT0", "OUTPUT1"]


def test_no_control_plane_discovery_against_a_bare_runtime_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deploy.client import Endpoint

    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER"):
        monkeypatch.delenv(name, raising=False)
    endpoint = Endpoint("local", endpoint_url="http://127.0.0.1:9")
    # Only the URL itself is asked (the local endpoint's manifest route); nothing answers.
    match = r"http://127.0.0.1:9/deploy/manifest.json gave no manifest"
    with pytest.raises(ModelNotFoundError, match=match) as caught:
        endpoint.infer("addsub", {"INPUT0": ROW})
    assert "pass manifest=" in str(caught.value)
    assert endpoint.model_info("addsub") is None
