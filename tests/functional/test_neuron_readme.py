"""The README's Inferentia commands, run as written (REPO = a temporary folder).

`deploy serve` blocks until Ctrl-C; the layout it serves is exercised in
test_neuron_single_model.py. `deploy neuron compile` needs torch-neuron: here
it must fail with the message that says where to get it.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deploy.cli import app

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _readme_commands() -> list[list[str]]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Inferentia (ml.inf1)", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.DOTALL)
    assert block, "README lost its Inferentia example"
    text = block.group(1).replace("\\\n", " ")
    return [
        shlex.split(line.split("  #", 1)[0])[1:]
        for line in text.splitlines()
        if line.startswith("deploy ")
    ]


def test_readme_inferentia_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from model_packages.generate import write_classifier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        traced = write_classifier(tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    shutil.copyfile(traced, tmp_path / "model.pt")
    runner = CliRunner()
    commands = _readme_commands()
    assert [c[:2] for c in commands] == [
        ["neuron", "compile"],
        ["neuron", "generate"],
        ["neuron", "plan"],
        ["validate", "REPO"],
        ["serve", "--hosting"],
        ["neuron", "package"],
    ]
    for command in commands:
        argv = [str(tmp_path / "REPO") if a == "REPO" else a for a in command]
        argv = [a.replace("REPO/", f"{tmp_path / 'REPO'}/") for a in argv]
        if argv[0] == "serve":
            continue
        result = runner.invoke(app, argv)
        if argv[:2] == ["neuron", "compile"] and importlib.util.find_spec("torch_neuron") is None:
            assert result.exit_code == 1
            assert "pip.repos.neuron.amazonaws.com" in result.output
            # What compile writes on a machine with torch-neuron: TorchScript.
            shutil.copyfile(traced, tmp_path / "compiled.pt")
            continue
        assert result.exit_code == 0, (argv, result.output)
    assert (tmp_path / "REPO" / "classifier" / "1" / "compiled.pt").is_file()
    assert (tmp_path / "build" / "inf1" / "model.tar.gz").is_file()
    assert (tmp_path / "build" / "inf1" / "manifest.json").is_file()
