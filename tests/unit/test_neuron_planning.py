"""NeuronCore planning: per-instance slices, fit and overlap on an inf1 size."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deploy.errors import NeuronError
from deploy.neuron.instances import NEURON_CORES, is_inferentia, neuron_cores
from deploy.neuron.planning import (
    check_core_plan,
    repository_core_ranges,
    require_core_plan,
    split_cores,
)
from deploy.neuron.spec import CoreRange


def test_cores_per_size() -> None:
    assert [neuron_cores(f"ml.inf1.{size}") for size in ("xlarge", "2xlarge", "6xlarge")] == [
        4,
        4,
        16,
    ]
    assert neuron_cores("ml.inf1.24xlarge") == 64
    assert is_inferentia("ml.inf1.48xlarge") and not is_inferentia("ml.g5.xlarge")
    with pytest.raises(NeuronError, match="unknown Inferentia instance type") as raised:
        neuron_cores("ml.inf1.48xlarge")
    assert "ml.inf1.6xlarge" in (raised.value.fix or "")


def test_split_cores_gives_contiguous_slices() -> None:
    assert split_cores(CoreRange(4, 11), 4) == [
        CoreRange(4, 5),
        CoreRange(6, 7),
        CoreRange(8, 9),
        CoreRange(10, 11),
    ]
    with pytest.raises(NeuronError, match="split evenly"):
        split_cores(CoreRange(0, 2), 2)


@given(start=st.integers(0, 60), width=st.integers(1, 8), instances=st.integers(1, 8))
def test_split_cores_partitions_the_range(start: int, width: int, instances: int) -> None:
    cores = CoreRange(start, start + width * instances - 1)
    slices = split_cores(cores, instances)
    covered = [core for piece in slices for core in range(piece.start, piece.end + 1)]
    assert covered == list(range(cores.start, cores.end + 1))
    assert {piece.count for piece in slices} == {width}


def test_plan_accepts_disjoint_ranges_that_fit() -> None:
    ranges = {"a": CoreRange(0, 7), "b": CoreRange(8, 15)}
    assert check_core_plan(ranges, "ml.inf1.6xlarge") == []
    require_core_plan(ranges, "ml.inf1.6xlarge")


def test_plan_names_both_models_of_an_overlap() -> None:
    ranges = {"resnet": CoreRange(0, 3), "bert": CoreRange(2, 5), "tiny": CoreRange(6, 6)}
    problems = check_core_plan(ranges, "ml.inf1.6xlarge")
    assert [problem.models for problem in problems] == [("resnet", "bert")]
    assert "resnet (0:3)" in problems[0].message and "bert (2:5)" in problems[0].message
    with pytest.raises(NeuronError, match="overlap") as raised:
        require_core_plan(ranges, "ml.inf1.6xlarge")
    assert raised.value.where == "resnet, bert"


def test_plan_reports_out_of_range_per_size() -> None:
    ranges = {"big": CoreRange(0, 7)}
    assert check_core_plan(ranges, "ml.inf1.6xlarge") == []
    problems = check_core_plan(ranges, "ml.inf1.xlarge")
    assert [problem.models for problem in problems] == [("big",)]
    assert "ml.inf1.xlarge has 4 (0:3)" in problems[0].message
    assert sorted(NEURON_CORES) == sorted(
        ["ml.inf1.xlarge", "ml.inf1.2xlarge", "ml.inf1.6xlarge", "ml.inf1.24xlarge"]
    )


def _config(repository: Path, name: str, parameters: dict[str, str]) -> None:
    folder = repository / name
    folder.mkdir(parents=True)
    lines = [f'name: "{name}"', 'backend: "python"']
    lines += [
        f'parameters {{ key: "{key}" value {{ string_value: "{value}" }} }}'
        for key, value in parameters.items()
    ]
    (folder / "config.pbtxt").write_text("\n".join(lines) + "\n")


def test_repository_core_ranges_reads_neuron_models_only(tmp_path: Path) -> None:
    _config(tmp_path, "a", {"NEURON_CORE_START_INDEX": "0", "NEURON_CORE_END_INDEX": "3"})
    _config(tmp_path, "b", {"NEURON_CORE_START_INDEX": "4", "NEURON_CORE_END_INDEX": "4"})
    _config(tmp_path, "plain", {})
    assert repository_core_ranges(tmp_path) == {"a": CoreRange(0, 3), "b": CoreRange(4, 4)}
    _config(tmp_path, "broken", {"NEURON_CORE_START_INDEX": "x", "NEURON_CORE_END_INDEX": "1"})
    with pytest.raises(NeuronError, match="not integers") as raised:
        repository_core_ranges(tmp_path)
    assert raised.value.where is not None and raised.value.where.endswith("config.pbtxt")


def test_cli_plan_prints_the_cores_and_fails_on_problems(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from deploy.cli import app

    _config(tmp_path, "a", {"NEURON_CORE_START_INDEX": "0", "NEURON_CORE_END_INDEX": "3"})
    _config(tmp_path, "b", {"NEURON_CORE_START_INDEX": "2", "NEURON_CORE_END_INDEX": "5"})
    runner = CliRunner()
    fits = runner.invoke(app, ["neuron", "plan", str(tmp_path), "--instance", "ml.inf1.24xlarge"])
    assert fits.exit_code == 1  # a and b share cores 2-3 on any size
    assert "a (0:3) and b (2:5) overlap" in fits.output
    (tmp_path / "b" / "config.pbtxt").unlink()
    _config(tmp_path, "c", {"NEURON_CORE_START_INDEX": "4", "NEURON_CORE_END_INDEX": "5"})
    (tmp_path / "b").rmdir()
    ok = runner.invoke(
        app, ["neuron", "plan", str(tmp_path), "--instance", "ml.inf1.6xlarge", "--json"]
    )
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout) == {
        "instance_type": "ml.inf1.6xlarge",
        "neuron_cores": 16,
        "models": {"a": "0:3", "c": "4:5"},
        "problems": [],
    }
    unknown = runner.invoke(app, ["neuron", "plan", str(tmp_path), "--instance", "ml.inf2.xlarge"])
    assert unknown.exit_code == 1 and "unknown Inferentia instance type" in unknown.output
