"""Pure planning functions: model and infra diffs, pruning choice, prices, rendering."""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import pytest

from deploy.errors import ConfigError, PackagingError
from deploy.lifecycle.plan import (
    ArchiveEntry,
    InfraSpec,
    Plan,
    diff_infra,
    diff_models,
    manifest_entries,
    superseded_archives,
)
from deploy.lifecycle.prices import estimate, price_table, supported_instance_types
from deploy.lifecycle.render import render_plan
from deploy.lifecycle.smoke import generated_inputs


def entry(name: str, digest: str, size: int = 100) -> ArchiveEntry:
    return ArchiveEntry(name, f"{name}-{digest}.tar.gz", digest * 4, size)


def test_models_are_new_changed_unchanged_or_removed() -> None:
    local = {"a": entry("a", "1111"), "b": entry("b", "2222"), "c": entry("c", "3333")}
    published = {"b": entry("b", "2222"), "c": entry("c", "0000"), "gone": entry("gone", "9")}
    stored = {"a-1111.tar.gz": None, "b-2222.tar.gz": "2222" * 4, "c-3333.tar.gz": None}
    changes = {c.name: c for c in diff_models(local, published, stored)}
    assert {name: c.action for name, c in changes.items()} == {
        "a": "new",
        "b": "unchanged",
        "c": "changed",
        "gone": "removed",
    }
    assert changes["c"].previous_target_model == "c-0000.tar.gz"
    assert [name for name, c in changes.items() if c.upload] == ["a", "c"]


def test_an_archive_missing_from_the_store_is_uploaded_even_if_published() -> None:
    # A previous run may have published, then the object was deleted by hand.
    local = {"a": entry("a", "1111")}
    (change,) = diff_models(local, dict(local), {"a-1111.tar.gz": None})
    assert change.action == "unchanged" and change.upload


def test_stored_bytes_with_another_checksum_are_replaced() -> None:
    local = {"a": entry("a", "1111")}
    (change,) = diff_models(local, {}, {"a-1111.tar.gz": "f" * 16})
    assert change.upload


def test_infra_diff_names_each_setting() -> None:
    now = InfraSpec("ml.m5.xlarge", 1, 1, 2)
    assert diff_infra(now, now) == ()
    changes = diff_infra(now, InfraSpec("ml.g5.xlarge", 1, 1, 4))
    assert [(c.setting, c.before, c.after) for c in changes] == [
        ("instance_type", "ml.m5.xlarge", "ml.g5.xlarge"),
        ("max_instance_count", "2", "4"),
    ]
    assert all(c.before is None for c in diff_infra(None, now))


def test_prune_keeps_referenced_and_the_newest_superseded() -> None:
    stored = ["a-1.tar.gz", "b-1.tar.gz", "a-2.tar.gz", "a-3.tar.gz", "a-4.tar.gz", "x.json"]
    referenced = {"a-4.tar.gz", "b-1.tar.gz"}
    assert superseded_archives(stored, referenced, keep=1) == ["a-1.tar.gz", "a-2.tar.gz"]
    assert superseded_archives(stored, referenced, keep=0) == [
        "a-1.tar.gz",
        "a-2.tar.gz",
        "a-3.tar.gz",
    ]
    assert superseded_archives(stored, referenced, keep=5) == []


def test_model_names_with_dashes_group_by_the_last_dash() -> None:
    stored = ["my-model-aaaa.tar.gz", "my-model-bbbb.tar.gz", "my-cccc.tar.gz"]
    assert superseded_archives(stored, {"my-model-bbbb.tar.gz"}, keep=0) == [
        "my-model-aaaa.tar.gz",
        "my-cccc.tar.gz",
    ]


def test_manifest_entries_reject_other_formats() -> None:
    with pytest.raises(PackagingError, match="format-1"):
        manifest_entries({"format": 2, "models": {}}, where="m.json")
    with pytest.raises(PackagingError, match=r"models\.a"):
        manifest_entries({"format": 1, "models": {"a": {"name": "a"}}}, where="m.json")
    assert manifest_entries(None, where="m.json") == {}


def test_price_table_is_dated_marked_and_covers_supported_families() -> None:
    table = price_table()
    assert table["estimate"] is True and table["as_of"] and "aws.amazon.com" in table["source"]
    families = {name.split(".")[1] for name in supported_instance_types()}
    assert {"g4dn", "g5", "g6", "p3", "m5", "c5", "inf1"} <= families
    for region, prices in table["regions"].items():
        assert all(price > 0 for price in prices.values()), region


def test_estimate_spans_the_scaling_bounds() -> None:
    cost = estimate("us-east-1", "ml.g5.xlarge", min_instances=1, max_instances=3)
    per = price_table()["regions"]["us-east-1"]["ml.g5.xlarge"]
    assert cost.hourly_min == pytest.approx(per) and cost.hourly_max == pytest.approx(3 * per)
    assert "estimate as of" in cost.describe()
    unknown = estimate("us-east-1", "ml.zz.huge", min_instances=1, max_instances=1)
    assert unknown.hourly_min is None and "no price" in unknown.describe()
    with pytest.raises(ConfigError):
        estimate("us-east-1", "ml.g5.xlarge", min_instances=3, max_instances=1)


def test_generated_inputs_follow_the_manifest_specs() -> None:
    model: dict[str, Any] = {
        "name": "m",
        "max_batch_size": 8,
        "inputs": [
            {"name": "A", "datatype": "FP32", "shape": [4]},
            {"name": "B", "datatype": "BYTES", "shape": [-1]},
            {"name": "C", "datatype": "INT64", "shape": [2, 3]},
        ],
    }
    inputs = generated_inputs(model)
    assert inputs["A"].shape == (1, 4) and inputs["A"].dtype == np.float32
    assert inputs["B"].shape == (1, 1) and inputs["B"][0, 0] == b"smoke"
    assert inputs["C"].shape == (1, 2, 3) and inputs["C"].dtype == np.int64
    unbatched = generated_inputs({**model, "max_batch_size": 0})
    assert unbatched["A"].shape == (4,)
    assert np.array_equal(generated_inputs(model)["A"], inputs["A"])  # deterministic


def test_dry_run_rendering_reads_at_a_glance() -> None:
    from rich.console import Console

    local = {"a": entry("a", "1111", 2048), "b": entry("b", "2222")}
    published = {"b": entry("b", "2222"), "a": entry("a", "0000")}
    changes = diff_models(local, published, {"b-2222.tar.gz": "2222" * 4})
    plan = Plan(
        stage="prod",
        provider="aws",
        endpoint="ep",
        models=changes,
        infra_action="update",
        infra=diff_infra(InfraSpec("ml.m5.xlarge", 1, 1, 1), InfraSpec("ml.g5.xlarge", 1, 1, 2)),
        resources=({"stack": "ep-prod-endpoint", "action": "update"},),
        cost=estimate("us-east-1", "ml.g5.xlarge", min_instances=1, max_instances=2),
    )
    buffer = io.StringIO()
    render_plan(plan, Console(file=buffer, width=140, color_system=None))
    text = buffer.getvalue()
    for expected in (
        "a-1111.tar.gz",
        "changed",
        "was a-0000.tar.gz",
        "unchanged",
        "2.0 KiB",
        "to upload: 1 archive(s)",
        "ml.m5.xlarge",
        "ml.g5.xlarge",
        "stack ep-prod-endpoint",
        "estimated cost: $",
    ):
        assert expected in text, expected
    assert json.loads(json.dumps(plan.to_dict()))["upload_bytes"] == 2048
