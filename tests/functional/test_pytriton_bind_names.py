"""`deploy bind` writes names as data and stores a script's folder once.

GIVEN a PyTriton script whose file name (and arguments) hold `\"\"\"`, quotes,
      newlines and Python code, or a script that binds many models
WHEN `deploy bind` writes the models
THEN each model.py is the template as it is, the names live in a JSON file it
     reads, and running model.py runs nothing from a name; the script's folder
     is one copy on disk that every model's version folder links to.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from deploy.pytriton import bind_script

SCRIPT = """\
import sys
import numpy as np
from pytriton.model_config import Tensor
from pytriton.triton import Triton

def infer(requests):
    return [{"y": r["x"]} for r in requests]

X = [Tensor(name="x", dtype=np.float32, shape=(-1,))]
Y = [Tensor(name="y", dtype=np.float32, shape=(-1,))]
with Triton() as t:
    for i in range(int(sys.argv[1])):
        t.bind(f"m{i}", infer, X, Y)
"""
TEMPLATE = Path(__file__).resolve().parents[2] / "deploy" / "pytriton" / "model.py.tmpl"
# Closes the old docstring, runs code, and opens a string again.
CRAFTED = 'x""" if __import__("pathlib").Path("injected").touch() else """\ny\'.py'


def run_model_py(model_py: Path, cwd: Path) -> dict[str, object]:
    """Import model.py as the python backend does (with an empty stand-in for its utils)."""
    stubs = cwd / "stubs"
    stubs.mkdir(exist_ok=True)
    (stubs / "triton_python_backend_utils.py").write_text("")
    code = (
        "import json, runpy, sys\n"
        "model = runpy.run_path(sys.argv[1])['TritonPythonModel']\n"
        "print(json.dumps({'script': model.SCRIPT, 'model': model.MODEL, 'argv': model.ARGV}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(model_py)],
        cwd=cwd,
        env={"PYTHONPATH": str(stubs), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_crafted_script_name_is_data_in_the_generated_model(tmp_path: Path) -> None:
    folder = tmp_path / "app"
    folder.mkdir()
    script = folder / CRAFTED
    script.write_text(SCRIPT)
    argv = ["1", '"""; import os #', "\n"]
    result = bind_script(script, tmp_path / "repo", argv=argv)
    assert [m.name for m in result.models] == ["m0"]
    version = tmp_path / "repo" / "m0" / "1"
    model_py = version / "model.py"
    # The template as it is: no name was formatted into Python text.
    assert model_py.read_text() == TEMPLATE.read_text()
    tree = ast.parse(model_py.read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "__import__"]
    bound = json.loads((version / "deploy-bind.json").read_text())
    assert bound == {"script": CRAFTED, "model": "m0", "argv": argv}

    work = tmp_path / "run"
    work.mkdir()
    loaded = run_model_py(model_py, work)
    assert loaded == {"script": CRAFTED, "model": "m0", "argv": argv}
    assert not (work / "injected").exists()
    assert not list(tmp_path.rglob("injected"))


def test_the_script_folder_is_stored_once_for_all_its_models(tmp_path: Path) -> None:
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "server.py").write_text(SCRIPT)
    (folder / "weights.bin").write_bytes(b"\1" * (1 << 20))
    (folder / "requirements.txt").write_text("six==1.17.0\n")
    count = 40
    result = bind_script(folder / "server.py", tmp_path / "repo", argv=[str(count)])
    assert len(result.models) == count
    repo = tmp_path / "repo"
    weights = [(repo / f"m{i}" / "1" / "weights.bin").stat() for i in range(count)]
    assert len({(w.st_dev, w.st_ino) for w in weights}) == 1  # one file on disk
    assert weights[0].st_nlink == count  # the staging copy is gone, each model links it
    assert {(repo / f"m{i}" / "1" / "model.py").read_text() for i in range(count)} == {
        TEMPLATE.read_text()
    }
    blocks = sum(
        p.lstat().st_blocks * 512
        for p in {(p.stat().st_dev, p.stat().st_ino): p for p in repo.rglob("*")}.values()
        if p.is_file()
    )
    assert blocks < 2 * (1 << 20), "the folder is stored more than once"
    # Editing the source afterwards changes no model (the links are to bind's own copy).
    (folder / "weights.bin").write_bytes(b"\2")
    assert (repo / "m0" / "1" / "weights.bin").read_bytes()[:1] == b"\1"
