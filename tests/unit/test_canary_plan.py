"""How `deploy up` plans a canary from the package's and the published manifests.

The cases the moto test of `deploy up --canary` does not reach: a new model, the
live version with a canary, a new version whose inputs differ, a per-model
setting naming a model the repository lacks, a stage with an async lane.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from deploy.errors import ConfigError
from deploy.hosting.per_model import diff_models, manifest_entries
from deploy.lifecycle.canary import parse_percent, plan_canaries, published_document

LIVE = "addsub-1111111111111111.tar.gz"
CANARY = "addsub-2222222222222222.tar.gz"
THIRD = "addsub-3333333333333333.tar.gz"


def entry(target: str, *, inputs: int = 4, canary: str | None = None) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": "addsub",
        "target_model": target,
        "sha256": target[7:23] * 4,
        "bytes": 1000,
        "max_batch_size": 8,
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [inputs]}],
        "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [4]}],
    }
    if canary is not None:
        document["canary"] = {"target_model": canary, "percent": 10}
    return document


def manifest(**models: dict[str, Any]) -> dict[str, Any]:
    return {"format": 1, "format_minor": 2, "hosting": "multi-model", "models": models}


def planned(
    package: dict[str, Any], published: dict[str, Any] | None, percents: dict[str, float]
) -> Any:
    local = manifest_entries(package, where="package")
    before = manifest_entries(published, where="published")
    changes = diff_models(local, before, {})
    return plan_canaries(changes, package, published, percents, stage="dev", lane=True)


def test_a_new_model_takes_all_its_calls_and_the_plan_says_why() -> None:
    models, canaries, notes = planned(manifest(addsub=entry(CANARY)), None, {"*": 10})
    assert canaries == () and models[0].action == "new"
    assert notes == (
        "addsub is new: there is no live version to canary against, so it takes all its calls",
    )


def test_the_live_version_with_a_canary_keeps_it_and_publishes_both() -> None:
    published = manifest(addsub=entry(LIVE, canary=CANARY))
    models, (canary,), notes = planned(manifest(addsub=entry(LIVE)), published, {})
    assert (canary.state, canary.target_model, canary.live_target_model) == ("kept", CANARY, LIVE)
    assert models[0].action == "unchanged" and notes == ()
    # the package's manifest names the live version alone; what is published keeps the canary
    document = json.loads(
        published_document(json.dumps(manifest(addsub=entry(LIVE))).encode(), (canary,))
    )
    assert document["models"]["addsub"]["canary"]["target_model"] == CANARY
    assert document["models"]["addsub"]["target_model"] == LIVE


def test_a_replaced_canary_on_a_stage_with_an_async_lane_is_noted() -> None:
    published = manifest(addsub=entry(LIVE, canary=CANARY))
    _, (canary,), notes = planned(manifest(addsub=entry(THIRD)), published, {"addsub": 25})
    assert (canary.state, canary.previous, canary.percent) == ("replaced", CANARY, 25)
    assert any("async lane" in note for note in notes)


def test_a_new_version_with_other_inputs_cannot_be_a_canary() -> None:
    with pytest.raises(ConfigError) as caught:
        planned(manifest(addsub=entry(CANARY, inputs=8)), manifest(addsub=entry(LIVE)), {"*": 10})
    assert "inputs, outputs or max_batch_size differ" in caught.value.message
    assert caught.value.where == "model 'addsub' (--canary)"


def test_a_per_model_canary_must_name_a_model_of_the_repository() -> None:
    with pytest.raises(ConfigError) as caught:
        planned(manifest(addsub=entry(CANARY)), manifest(addsub=entry(LIVE)), {"adsub": 10})
    assert caught.value.where == "[stages.dev.models.adsub] canary"
    assert caught.value.fix is not None and "addsub" in caught.value.fix


@pytest.mark.parametrize(("text", "percent"), [("10%", 10), (" 2.5 % ", 2.5), ("50", 50)])
def test_canary_percents_parse(text: str, percent: float) -> None:
    assert parse_percent(text) == percent
