"""`--no-repo-code` is one command's choice, also when the CLI runs in-process twice."""

from __future__ import annotations

import os
from pathlib import Path

from typer.testing import CliRunner

from deploy.box.policy import ENV
from deploy.cli import app

AUTO_COMPLETE = Path(__file__).resolve().parents[1] / "corpus" / "repos" / "pb_auto_complete"


def test_the_flag_of_one_command_does_not_reach_the_next() -> None:
    runner = CliRunner()
    assert ENV not in os.environ
    refused = runner.invoke(app, ["validate", str(AUTO_COMPLETE), "--no-repo-code"])
    assert refused.exit_code == 1 and "--no-repo-code" in refused.output
    again = runner.invoke(app, ["validate", str(AUTO_COMPLETE)])
    assert again.exit_code == 0, again.output
    assert ENV not in os.environ
