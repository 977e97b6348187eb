"""--scale-to-zero-after applies where a local endpoint unloads idle copies.

`deploy serve --hosting components` and `deploy up --local` on a components
stage take it; anywhere else it is a usage error naming the flag and where it
applies, before anything is packaged, started or called.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from deploy.cli import app


def _words(text: str) -> str:
    """The output's words, without the error panel's frame."""
    return " ".join(word for word in text.split() if word != "│")


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEPLOY_STAGE", raising=False)
    return CliRunner()


def test_deploy_up_on_aws_refuses_it(runner: CliRunner) -> None:
    result = runner.invoke(app, ["up", "--scale-to-zero-after", "2", "--dry-run"])
    assert result.exit_code == 2, result.output
    assert "--scale-to-zero-after does not apply to AWS" in _words(result.output)


def test_deploy_up_local_refuses_it_for_another_hosting(runner: CliRunner) -> None:
    result = runner.invoke(
        app,
        ["up", "--local", "--hosting", "multi-model", "--scale-to-zero-after", "2", "--dry-run"],
    )
    assert result.exit_code == 2, result.output
    words = _words(result.output)
    assert "--scale-to-zero-after" in words
    assert "it applies to hosting components; this run's hosting is multi-model" in words


def test_deploy_serve_refuses_it_for_another_hosting(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    result = runner.invoke(
        app,
        ["serve", "models", "--hosting", "multi-model", "--scale-to-zero-after", "2"],
    )
    assert result.exit_code == 2, result.output
    assert (
        "--scale-to-zero-after does not apply to --hosting multi-model; it applies to "
        "--hosting components" in _words(result.output)
    )
