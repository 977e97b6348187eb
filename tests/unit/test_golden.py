"""Golden cases: the format, `deploy validate` on them, `deploy package` leaving them out."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deploy.packaging.packager import package_repository
from deploy.repository.golden import GoldenError, compare, load_cases, write_case
from deploy.validation import validate_repository

EXAMPLES = Path(__file__).resolve().parents[2] / "model_packages" / "examples"
X = np.arange(4, dtype=np.float32).reshape(1, 4)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copytree(EXAMPLES / "addsub", root / "addsub")
    return root


def good_case(model: Path, name: str = "basic") -> Path:
    return write_case(
        model,
        name,
        {"INPUT0": X, "INPUT1": X},
        {"OUTPUT0": X + X, "OUTPUT1": X - X},
    )


def golden_errors(root: Path) -> list[dict[str, str]]:
    report = validate_repository(root)
    return [d.as_dict() for d in report.diagnostics if "golden" in d.file]


def test_a_written_case_reads_back_and_matches_within_tolerance(repo: Path) -> None:
    path = good_case(repo / "addsub")
    assert path == repo / "addsub" / "golden" / "basic.npz"
    (case,) = load_cases(repo / "addsub")
    assert case.inputs["INPUT0"].dtype == np.float32
    assert compare(case, {"OUTPUT0": X + X + 1e-7, "OUTPUT1": X - X}) == []


def test_a_mismatch_reports_max_abs_diff_and_first_index(repo: Path) -> None:
    good_case(repo / "addsub")
    (case,) = load_cases(repo / "addsub")
    wrong = (X + X).copy()
    wrong[0, 2] += 0.5
    wrong[0, 3] += 2.0
    (mismatch,) = compare(case, {"OUTPUT0": wrong, "OUTPUT1": X - X})
    assert mismatch.output == "OUTPUT0"
    assert mismatch.max_abs_diff == pytest.approx(2.0)
    assert mismatch.first_index == (0, 2)
    assert (mismatch.expected, mismatch.actual) == (4.0, 4.5)
    assert "2 of 4 values differ" in mismatch.message


def test_tolerance_file_and_json_cases(repo: Path) -> None:
    golden = repo / "addsub" / "golden"
    golden.mkdir()
    v2 = {"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": [0, 1, 2, 3]}
    document = {
        "inputs": [v2, {**v2, "name": "INPUT1"}],
        "outputs": [{**v2, "name": "OUTPUT0", "data": [0, 2, 4, 6]}],
    }
    (golden / "v2.json").write_text(json.dumps(document))
    (golden / "tolerance.json").write_text(json.dumps({"cases": {"v2": {"atol": 0.1}}}))
    (case,) = load_cases(repo / "addsub")
    assert (case.name, case.atol) == ("v2", 0.1)
    assert compare(case, {"OUTPUT0": X + X + 0.05}) == []
    assert compare(case, {"OUTPUT0": X + X + 0.2})[0].output == "OUTPUT0"
    assert golden_errors(repo) == []


def test_write_refuses_to_overwrite_without_force(repo: Path) -> None:
    good_case(repo / "addsub")
    with pytest.raises(GoldenError, match="exists already") as caught:
        good_case(repo / "addsub")
    assert caught.value.fix is not None and "--force" in caught.value.fix
    write_case(repo / "addsub", "basic", {"INPUT0": X}, {"OUTPUT0": X}, force=True)
    (case,) = load_cases(repo / "addsub")
    assert set(case.inputs) == {"INPUT0"}
    assert [p.name for p in (repo / "addsub" / "golden").iterdir()] == ["basic.npz"]


def test_validate_accepts_a_fitting_case(repo: Path) -> None:
    good_case(repo / "addsub")
    assert validate_repository(repo).ok
    assert golden_errors(repo) == []


def test_validate_names_the_file_and_the_fix_for_cases_that_do_not_fit(repo: Path) -> None:
    model = repo / "addsub"
    (model / "golden").mkdir()
    np.savez(
        model / "golden" / "bad.npz",
        **{
            "input.INPUT0": X.astype(np.int32),  # wrong datatype
            "input.INPUT9": X,  # no such input (and INPUT1 missing)
            "output.OUTPUT0": np.zeros((1, 5), np.float32),  # wrong shape
        },
    )
    np.savez(model / "golden" / "batch.npz", **{"input.INPUT0": np.zeros((9, 4), np.float32)})
    found = golden_errors(repo)
    where = str(model / "golden" / "bad.npz")
    messages = {(d["file"], d["field"]): d["message"] for d in found}
    assert messages[(where, "input.INPUT0")] == "input 'INPUT0' is INT32, the model declares FP32"
    assert "no input named 'INPUT9'" in messages[(where, "input.INPUT9")]
    assert "required input 'INPUT1'" in messages[(where, "input.INPUT1")]
    assert messages[(where, "output.OUTPUT0")] == (
        "output 'OUTPUT0' has shape [1, 5], the model takes [batch 1..8, 4]"
    )
    batch = str(model / "golden" / "batch.npz")
    assert any(d["file"] == batch and "no expected outputs" in d["message"] for d in found)
    assert all(d["severity"] == "error" and d["fix"] for d in found)
    assert not validate_repository(repo).ok


def test_validate_reports_an_unreadable_case(repo: Path) -> None:
    (repo / "addsub" / "golden").mkdir()
    (repo / "addsub" / "golden" / "broken.json").write_text("{not json")
    (found,) = golden_errors(repo)
    assert found["file"] == str(repo / "addsub" / "golden" / "broken.json")
    assert found["message"].startswith("cannot read the case")


def test_package_leaves_golden_out_and_keeps_the_digest(repo: Path, tmp_path: Path) -> None:
    before = package_repository(repo, tmp_path / "out1")
    good_case(repo / "addsub")
    after = package_repository(repo, tmp_path / "out2")
    (first,) = before.models
    (second,) = after.models
    assert first.entry.target_model == second.entry.target_model
    with tarfile.open(second.path) as archive:
        names = archive.getnames()
    assert "addsub/config.pbtxt" in names
    assert not [name for name in names if "golden" in name]


def test_record_names_the_missing_model_folder_and_strips_a_target_model(repo: Path) -> None:
    from deploy.cli.golden import record_case
    from deploy.errors import DeployError

    class Result:
        def items(self) -> list[tuple[str, np.ndarray]]:
            return [("OUTPUT0", X + X)]

    result: Any = Result()
    with pytest.raises(DeployError, match="no model folder 'other'") as caught:
        record_case("other", "basic", {"INPUT0": X}, result, repo, force=False)
    assert caught.value.fix is not None and "--repository" in caught.value.fix
    path = record_case(
        "addsub-0123456789abcdef.tar.gz",
        "basic",
        {"INPUT0": X},
        result,
        repo,
        force=False,
    )
    assert path == repo / "addsub" / "golden" / "basic.npz"
