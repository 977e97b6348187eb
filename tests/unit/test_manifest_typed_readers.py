"""Readers of the manifest that parse it once: the router layout's diff, the canary
plan's published manifest and the bundle check.

A router layout's published manifest that breaks the contract is refused naming the
field (as the per-model layout's is), and a published canary keeps every key a newer
version wrote, in the model, its canary and the manifest, byte for byte.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from deploy.client import manifest as contract
from deploy.errors import PackagingError
from deploy.hosting import router
from deploy.hosting.per_model import diff_models, manifest_entries
from deploy.lifecycle.canary import plan_canaries, published_document
from deploy.packaging.bundles import BUNDLES_KEY, manifest_bundles

LIVE = "addsub-1111111111111111.tar.gz"
CANARY = "addsub-2222222222222222.tar.gz"
THIRD = "addsub-3333333333333333.tar.gz"


def entry(target: str, **more: Any) -> dict[str, Any]:
    return {
        "name": "addsub",
        "target_model": target,
        "sha256": target[7:23] * 4,
        "bytes": 1000,
        "max_batch_size": 8,
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4]}],
        "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [4]}],
        **more,
    }


def manifest(**models: dict[str, Any]) -> dict[str, Any]:
    return {"format": 1, "format_minor": 2, "hosting": "multi-model", "models": models}


def test_a_router_published_manifest_without_a_target_model_is_refused_naming_it() -> None:
    local = {
        "format": 1,
        "hosting": "single-model",
        "models": {"a": {"target_model": "a", "source_digest": "1"}},
    }
    published = {"format": 1, "hosting": "single-model", "models": {"a": {"bytes": 3}}}
    with pytest.raises(PackagingError) as caught:
        router.diff_models(local, published)
    assert caught.value.where == "published manifest: models.a"
    assert "has no target_model" in caught.value.message
    assert caught.value.fix is not None and "deploy package" in caught.value.fix


def test_a_published_canary_keeps_a_newer_versions_keys_byte_for_byte() -> None:
    # GIVEN a published model with a canary, both carrying keys this version does not know
    canary = {"target_model": CANARY, "percent": 10, "weight_by": "region"}
    published = {
        **manifest(addsub=entry(LIVE, canary=canary, later={"x": 1})),
        "signed_by": "release-key",
    }
    package = {
        **manifest(addsub=entry(CANARY), other=entry(THIRD, later={"y": 2})),
        "signed_by": "package-key",
    }
    changes = diff_models(
        manifest_entries(package, where="package"), manifest_entries(published, where="p"), {}
    )
    # WHEN the repository holds the canary's version and the canary goes to 20%
    _, canaries, _ = plan_canaries(changes, package, published, {"*": 20}, stage="dev")
    (change,) = (canary for canary in canaries if canary.name == "addsub")
    assert change.state == "percent"
    raw = published_document(json.dumps(package).encode(), canaries)
    # THEN the live entry keeps its own keys and the canary's; the rest is the package's
    expected = entry(
        LIVE, later={"x": 1}, canary={"target_model": CANARY, "percent": 20, "weight_by": "region"}
    )
    document = {
        **manifest(addsub=expected, other=entry(THIRD, later={"y": 2})),
        "signed_by": "package-key",
    }
    written = contract.written(contract.parse(document, "expected"))
    assert raw == contract.dump(written)
    assert json.loads(raw)["models"]["addsub"]["canary"]["weight_by"] == "region"


def test_bundles_are_read_from_the_parsed_entries_and_none_from_a_broken_manifest() -> None:
    bundles = {"preprocess": "d" * 16}
    document = manifest(addsub=entry(LIVE, **{BUNDLES_KEY: bundles}), plain=entry(CANARY))
    assert manifest_bundles(document) == {LIVE: bundles}
    assert manifest_bundles({"models": {"addsub": entry(LIVE, **{BUNDLES_KEY: bundles})}}) == {}
