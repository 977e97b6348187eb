"""`--help` of every command, as a person reads it in an 80-column terminal."""

from __future__ import annotations

import re

import pytest
import typer.main
from typer.testing import CliRunner

from deploy.cli import app


def _command_paths() -> list[list[str]]:
    root = typer.main.get_command(app)
    paths: list[list[str]] = [[]]

    def walk(group: object, prefix: list[str]) -> None:
        for name, command in getattr(group, "commands", {}).items():
            paths.append([*prefix, name])
            walk(command, [*prefix, name])

    walk(root, [])
    return paths


@pytest.mark.parametrize("path", _command_paths(), ids=lambda p: " ".join(p) or "deploy")
def test_help_shows_flags_as_flags_and_arguments_in_capitals(path: list[str]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    text = result.output
    # Flags take no value: nothing after them; values are named, not typed.
    assert "<bool>" not in text and "list[" not in text
    assert not re.search(r"<(str|int|float|path)>\s+\S", text.split("Options")[-1])
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert "{" not in usage and "}" not in usage, usage
    assert all(len(line) <= 80 for line in text.splitlines())


def test_arguments_are_named_in_capitals() -> None:
    usage = CliRunner().invoke(app, ["validate", "--help"], env={"COLUMNS": "80"}).output
    assert "Usage: deploy validate [OPTIONS] REPO" in usage
    assert "--json  " in usage  # no type after a flag
    package = CliRunner().invoke(app, ["package", "--help"], env={"COLUMNS": "80"}).output
    assert re.search(r"--out\s+-o\s+PATH", package)
