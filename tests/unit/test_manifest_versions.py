"""The manifest's version rule (deploy/client/manifest.py, "Versions"), tested
on documents that release 040d6bc wrote (tests/fixtures/manifests/040d6bc) and
on newer ones this version has not seen.

An SDK of that release reading what this version writes is
tests/functional/test_manifest_compatibility.py.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deploy.client import Manifest, ManifestError, PayloadTooLargeError
from deploy.client import manifest as contract
from deploy.client._core import prepare, route

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "manifests" / "040d6bc"
FILES = sorted(path.name for path in GOLDEN.glob("*.json"))
MIB = 1024 * 1024


def golden(name: str) -> bytes:
    return (GOLDEN / name).read_bytes()


def encoded(document: dict[str, Any]) -> bytes:
    return (json.dumps(document, indent=2) + "\n").encode()


def newer_minor() -> dict[str, Any]:
    """A multi-model manifest of a later 1.x: new keys at each level, another limit."""
    document: dict[str, Any] = json.loads(golden("multi-model.json"))
    document["models"]["bytestats"]["placement"] = {"copies": 2}
    document["format_minor"] = 7
    document["invoke"] = {
        "addressing": contract.TARGET_MODEL_HEADER,
        "max_request_bytes": 1 * MIB,
        "compression": ["gzip"],
    }
    document["release"] = {"canary": 10}
    return document


def request_of(manifest: Manifest, model: str, nbytes: int, limit: int | None = None) -> Any:
    chosen = route(model, None, manifest, None)
    data = np.zeros(nbytes, np.uint8)
    return prepare(
        chosen,
        {"DATA": data},
        None,
        class_count=None,
        parameters=None,
        max_payload_bytes=limit,
        endpoint="ep",
        manifest=manifest,
    )


@pytest.mark.parametrize("name", FILES)
def test_a_manifest_the_previous_release_wrote_is_written_back_byte_for_byte(name: str) -> None:
    raw = golden(name)
    manifest = contract.loads(raw, name)
    assert manifest.version == "1.0" and manifest.invoke is None
    assert contract.dump(manifest) == raw
    # What the SDK reads is what the contract reads.
    assert Manifest.from_bytes(raw, name).to_document() == json.loads(raw)


@pytest.mark.parametrize(
    ("name", "addressing", "limit"),
    [
        ("multi-model.json", contract.TARGET_MODEL_HEADER, 6 * MIB),
        ("async-package.json", contract.ROUTER, 1024 * MIB),
        ("async-published.json", contract.ROUTER, 1024 * MIB),
        ("laned-published.json", contract.TARGET_MODEL_HEADER, 6 * MIB),
    ],
)
def test_a_1_0_manifest_gets_todays_addressing_and_limits(
    name: str, addressing: str, limit: int
) -> None:
    manifest = Manifest.from_bytes(golden(name), name)
    assert (manifest.addressing, manifest.max_request_bytes) == (addressing, limit)
    if manifest.async_lane is not None:
        assert manifest.async_lane.request_limit == 1024 * MIB
        assert manifest.async_lane.extra == {"archive": "async/model-0123456789abcdef.tar.gz"}


@pytest.mark.parametrize("name", FILES)
def test_this_version_writes_its_minor_the_old_bytes_followed_by_the_new_keys(name: str) -> None:
    old = contract.loads(golden(name), name)
    raw = contract.dump(contract.written(old))
    document = json.loads(raw)
    assert list(document)[-2:] == ["format_minor", "invoke"]
    assert document["format_minor"] == contract.MANIFEST_MINOR == 2
    assert document["invoke"] == {
        "addressing": old.addressing,
        "max_request_bytes": old.max_request_bytes,
    }
    again = contract.loads(raw, name)
    assert again.version == "1.2" and contract.dump(again) == raw
    # Without the 1.1 keys (1.2 adds none to a model without a canary or component)
    # it is the previous release's document, byte for byte.
    assert contract.dump(dataclasses.replace(again, format_minor=0, invoke=None)) == golden(name)


def test_a_newer_minor_is_read_its_unknown_keys_kept_in_place_and_its_limit_obeyed() -> None:
    document = newer_minor()
    raw = encoded(document)
    manifest = Manifest.from_bytes(raw, "s3://store/manifest.json")
    assert manifest.version == "1.7"
    assert manifest.extra == {"release": {"canary": 10}}
    assert manifest.models["bytestats"].extra == {"placement": {"copies": 2}}
    assert contract.dump(manifest) == raw

    # The limit is the one the manifest publishes, not the SDK's 6 MB.
    request_of(manifest, "bytestats", MIB - 4096)
    with pytest.raises(PayloadTooLargeError) as raised:
        request_of(manifest, "bytestats", 2 * MIB)
    assert raised.value.limit == 1 * MIB

    document["invoke"]["max_request_bytes"] = 8 * MIB
    roomy = Manifest.parse(document, "s3://store/manifest.json")
    target = document["models"]["bytestats"]["target_model"]
    assert request_of(roomy, "bytestats", 7 * MIB).route.target_model == target


def test_a_hosting_this_version_does_not_know_is_read_when_its_addressing_is_known() -> None:
    document: dict[str, Any] = json.loads(golden("async-package.json"))
    document |= {
        "hosting": "batch-window",
        "format_minor": 3,
        "invoke": {"addressing": contract.ROUTER, "max_request_bytes": 2 * MIB},
    }
    manifest = Manifest.parse(document, "manifest.json")
    chosen = route("bytestats", None, manifest, None)
    assert chosen.target_model is None
    assert chosen.parameters == {contract.ROUTER_PARAMETER: "bytestats"}

    del document["invoke"]
    with pytest.raises(ManifestError, match="unknown hosting 'batch-window'") as raised:
        Manifest.parse(document, "manifest.json")
    assert "upgrade deploy" in str(raised.value.fix)


def test_an_addressing_this_version_cannot_send_is_refused_naming_it() -> None:
    document = newer_minor()
    document["invoke"]["addressing"] = "session-affinity-header"  # a future addressing
    with pytest.raises(ManifestError) as raised:
        Manifest.parse(document, "s3://store/manifest.json")
    assert "session-affinity-header" in raised.value.message
    assert raised.value.where == "s3://store/manifest.json: invoke"
    assert "pip install -U triton-sagemaker-deploy" in str(raised.value.fix)


@pytest.mark.parametrize(
    ("major", "minor", "fix"),
    [(2, 0, "a newer deploy wrote it"), (2, 4, "a newer deploy wrote it"), (0, 0, "older")],
)
def test_another_major_is_refused_naming_both_versions_and_the_fix(
    major: int, minor: int, fix: str
) -> None:
    document: dict[str, Any] = json.loads(golden("multi-model.json"))
    document["format"], document["format_minor"] = major, minor
    with pytest.raises(ManifestError) as raised:
        Manifest.from_bytes(encoded(document), "s3://store/manifest.json")
    error = raised.value
    assert error.where == "s3://store/manifest.json"
    assert f"has format {major}.{minor}" in error.message
    assert "this version reads format 1.x (written 1.2)" in error.message
    assert fix in str(error.fix)


def test_changes_return_a_new_manifest_and_leave_the_old_one_as_it_was() -> None:
    package = contract.loads(golden("async-package.json"), "package")
    before = contract.dump(package)
    locations = contract.AsyncLocations("s3://b/in/", "s3://b/out/", "s3://b/failure/")
    for changed in (
        contract.with_archive_key(package, "model-feedfacefeedface.tar.gz"),
        contract.with_async_inference(contract.written(package), locations),
    ):
        assert changed is not package
    assert contract.dump(package) == before
    bound = contract.with_async_inference(contract.written(package), locations)
    assert bound.hosting == contract.ASYNC and bound.async_inference == locations
    assert bound.max_request_bytes == 1024 * MIB

    laned = contract.loads(golden("laned-published.json"), "laned")
    relaned = contract.with_lane_archive(contract.written(laned), "async/model-1.tar.gz")
    assert relaned.async_lane is not None and laned.async_lane is not None
    assert relaned.async_lane.extra == {"archive": "async/model-1.tar.gz"}
    assert laned.async_lane.extra == {"archive": "async/model-0123456789abcdef.tar.gz"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(laned, "hosting", "async")  # noqa: B010 (the frozen dataclass refuses it)


def with_canary(percent: object = 10) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(golden("multi-model.json"))
    entry = document["models"]["bytestats"]
    entry["inference_component"] = "ep-bytestats"
    entry["canary"] = {
        "target_model": "bytestats-canary.tar.gz",
        "percent": percent,
        "sha256": "ab" * 32,
        "bytes": 10,
        "source_digest": "cd" * 32,
        "shadow": False,
    }
    document["format_minor"] = 2
    return document


def test_the_1_2_model_keys_are_read_and_written_back_in_place() -> None:
    raw = encoded(with_canary())
    manifest = Manifest.from_bytes(raw, "s3://store/manifest.json")
    info = manifest.models["bytestats"]
    assert info.canary is not None and info.canary.percent == 10
    assert info.canary.target_model == "bytestats-canary.tar.gz"
    assert info.canary.extra == {"shadow": False}
    assert info.inference_component == "ep-bytestats"
    assert info.extra == {}
    assert contract.dump(manifest) == raw


@pytest.mark.parametrize("percent", [0, 100, -1, "10", None, True])
def test_a_canary_percent_outside_0_to_100_is_refused_naming_the_field(percent: object) -> None:
    with pytest.raises(ManifestError) as raised:
        Manifest.parse(with_canary(percent), "s3://store/manifest.json")
    assert raised.value.where == "s3://store/manifest.json: models.bytestats.canary"
    assert "percent" in raised.value.message


def test_split_sends_the_canary_its_share_and_a_sticky_key_always_one_version() -> None:
    manifest = Manifest.parse(with_canary(10), "manifest.json")
    info = manifest.models["bytestats"]
    assert contract.split(info, draw=0.0999) == "bytestats-canary.tar.gz"
    assert contract.split(info, draw=0.1) == info.target_model
    # Keyed: the same key reaches the same version every time; 10,000 keys give
    # about 10% (binomial: sd 30, so 1000 +- 5 sd).
    keys = [f"session-{n}" for n in range(10_000)]
    chosen = [contract.split(info, sticky_key=key) for key in keys]
    assert chosen == [contract.split(info, sticky_key=key) for key in keys]
    assert 850 <= chosen.count("bytestats-canary.tar.gz") <= 1150
    plain = dataclasses.replace(info, canary=None)
    assert {contract.split(plain, sticky_key=key) for key in keys[:50]} == {info.target_model}
