"""`deploy validate` refuses model names the serving path cannot carry, and the
names it accepts make TargetModels the local endpoint serves."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from deploy.cli import app
from deploy.local.models.store import check_target_model
from deploy.repository.names import model_name_problem, target_model_problem
from deploy.validation import validate_repository

CONFIG = """backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""


def model(root: Path, name: str) -> None:
    (root / name / "1").mkdir(parents=True)
    (root / name / "config.pbtxt").write_text(CONFIG)
    (root / name / "1" / "model.py").write_text("")


def test_unservable_names_are_errors_that_say_which_characters(tmp_path: Path) -> None:
    bad = ["add sub", "naïve", "new\nline", "-dash-first", "semi;colon", "x" * 201]
    good = ["addsub", "Model_2.v1-rc", "_private", "7"]
    for name in bad + good:
        model(tmp_path, name)
    report = validate_repository(tmp_path)
    flagged = {d.model: d for d in report.errors if d.field == "name"}
    assert sorted(flagged) == sorted(bad)
    assert "' '" in flagged["add sub"].message
    assert "'ï'" in flagged["naïve"].message
    assert "'\\n'" in flagged["new\nline"].message
    assert "starts with '-'" in flagged["-dash-first"].message
    assert "over 200" in flagged["x" * 201].message
    for diagnostic in flagged.values():
        assert "letters A-Z and a-z, digits, '_', '.' and '-'" in diagnostic.fix


def test_cli_exits_1_naming_the_model(tmp_path: Path) -> None:
    model(tmp_path, "add sub")
    result = CliRunner().invoke(app, ["validate", str(tmp_path)])
    assert result.exit_code == 1
    assert "the model name 'add sub' has characters a served model cannot have" in result.output


names = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}", fullmatch=True)


@given(names, st.text(alphabet="0123456789abcdef", min_size=16, max_size=16))
def test_a_valid_name_packages_to_a_target_model_that_serves(name: str, digest: str) -> None:
    assert model_name_problem(name) is None
    target = f"{name}-{digest}.tar.gz"  # deploy package's archive name
    assert target_model_problem(target) is None
    assert check_target_model(f"models/{target}") == f"models/{target}"
