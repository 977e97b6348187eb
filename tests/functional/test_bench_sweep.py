"""`deploy bench --sweep`: config variants of one example model served on a local
endpoint (the real tritonserver), measured, the best written back.

One axis of two values and one short step: the machine that runs CI has 2 cores.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deploy.bench.sweep import Axis, apply, describe, parse_axes, parse_budget, variants
from deploy.cli import app
from deploy.errors import BenchError
from deploy.repository import CONFIG_FILE, load_repository, parse_config

EXAMPLES = Path(__file__).resolve().parents[2] / "model_packages" / "examples"


def _repository(tmp_path: Path, *models: str) -> Path:
    root = tmp_path / "repo"
    for model in models:
        shutil.copytree(EXAMPLES / model, root / model)
    return root


@pytest.mark.triton
@pytest.mark.slow
def test_sweep_measures_each_variant_and_writes_the_best(tmp_path: Path) -> None:
    repo = _repository(tmp_path, "addsub")
    config = repo / "addsub" / CONFIG_FILE
    original = config.read_bytes()
    plot = tmp_path / "sweep.html"
    args = ["bench", "addsub", "--local", "--repository", str(repo), "--sweep", "instances=1,2"]
    args += ["-c", "2", "--duration", "0.5", "--warmup", "0.2", "--latency-budget", "10s"]
    args += ["--instance", "ml.m5.xlarge", "--json", "--plot", str(plot)]
    result = CliRunner().invoke(app, [*args, "--write"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["sweep"] == {"instances": [1, 2]}
    assert [v["variant"] for v in report["variants"]] == [{"instances": 1}, {"instances": 2}]
    targets = {v["target_model"] for v in report["variants"]}
    assert len(targets) == 2  # new content, new archive name
    for entry in report["variants"]:
        assert entry["error"] is None
        (step,) = entry["report"]["steps"]
        assert step["ok"] > 0 and step["failed"] == 0
        assert entry["report"]["target_model"] == entry["target_model"]
    best = report["best"]
    measured = {
        v["variant"]["instances"]: v["report"]["steps"][0]["items_per_s"]
        for v in report["variants"]
    }
    assert best["items_per_s"] == pytest.approx(max(measured.values()), rel=1e-3)
    assert best["cost_per_million_usd"] > 0
    # --write: the winner's config, as text_format writes it, replaces the file.
    assert report["written"] == str(config)
    written = parse_config(config.read_text())
    assert written.instance_group[0].count == best["variant"]["instances"]
    assert written.max_batch_size == 8 and written.name == "addsub"
    assert config.read_bytes() != original
    assert "<svg" in plot.read_text()


@pytest.mark.triton
@pytest.mark.slow
def test_sweep_leaves_the_repository_alone_without_write(tmp_path: Path) -> None:
    repo = _repository(tmp_path, "addsub")
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    args = ["bench", "addsub", "--local", "--repository", str(repo)]
    args += ["--sweep", "max_queue_delay_us=0,500", "-c", "1", "--duration", "0.3"]
    args += ["--warmup", "0.1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "best: max_queue_delay_us=" in result.stdout
    assert {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()} == before


def test_sweep_variants_change_only_the_swept_fields(tmp_path: Path) -> None:
    repo = load_repository(_repository(tmp_path, "addsub", "strings"))
    config = repo.models["addsub"].config
    axes = parse_axes(["max_batch_size=1,4", "instances=3", "max_queue_delay_us=100"])
    chosen = variants(axes)
    assert chosen == [
        {"max_batch_size": 1, "instances": 3, "max_queue_delay_us": 100},
        {"max_batch_size": 4, "instances": 3, "max_queue_delay_us": 100},
    ]
    changed = apply(config, chosen[1], where="addsub")
    assert changed.max_batch_size == 4
    assert [group.count for group in changed.instance_group] == [3]
    assert changed.dynamic_batching.max_queue_delay_microseconds == 100
    assert config.max_batch_size == 8 and not config.HasField("dynamic_batching")  # a copy
    expected = changed.__class__()
    expected.CopyFrom(config)
    expected.max_batch_size = 4
    expected.instance_group[0].count = 3
    expected.dynamic_batching.max_queue_delay_microseconds = 100
    assert changed == expected
    assert describe(chosen[0], short=True) == "batch=1 inst=3 delay=100"
    with pytest.raises(BenchError, match="does not batch"):
        apply(repo.models["strings"].config, {"max_batch_size": 4}, where="strings")


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        (["threads=1,2"], "unknown field 'threads'"),
        (["instances=0,1"], "values must be whole numbers >= 1"),
        (["max_batch_size=a"], "values must be whole numbers"),
        (["instances=1", "instances=2"], "given twice"),
    ],
)
def test_sweep_flags_are_checked(specs: list[str], message: str) -> None:
    with pytest.raises(BenchError, match=message):
        parse_axes(specs)


def test_latency_budget_units() -> None:
    assert parse_budget("50ms") == 50
    assert parse_budget("0.2s") == pytest.approx(200)
    assert parse_budget("7") == 7
    with pytest.raises(BenchError, match="is not a duration"):
        parse_budget("soon")


def test_sweep_usage_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    no_local = runner.invoke(app, ["bench", "addsub", "--sweep", "instances=1,2"])
    assert no_local.exit_code == 2
    assert "--sweep serves each variant on a local endpoint" in no_local.output
    write_alone = runner.invoke(app, ["bench", "addsub", "--local", "--write"])
    assert write_alone.exit_code == 2
    repo = _repository(tmp_path, "addsub", "preprocess", "classifier", "image_pipeline")
    ensemble = runner.invoke(
        app,
        ["bench", "image_pipeline", "--local", "--repository", str(repo), "--sweep",
         "instances=1,2"],
    )  # fmt: skip
    assert ensemble.exit_code == 1
    assert "an ensemble has no instances of its own" in ensemble.output
    unknown = runner.invoke(
        app, ["bench", "nope", "--local", "--repository", str(repo), "--sweep", "instances=1"]
    )
    assert unknown.exit_code == 1
    assert "model 'nope' is not in the repository" in unknown.output


def test_axis_values_keep_their_order_without_repeats() -> None:
    assert parse_axes(["instances=2,1,2"]) == [Axis("instances", (2, 1))]
