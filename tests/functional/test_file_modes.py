"""Files `deploy` writes get the mode the user's umask gives, as any other tool's would.

Atomic writes go through a temporary name (mkstemp makes it 0600); the final
file must not keep that mode, nor a fixed 0644 that ignores a group-writable
umask.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from deploy._files import umask, with_umask
from tests.conftest import EXAMPLES
from tests.functional.test_init_config import onnx_model

ROOT = Path(__file__).resolve().parents[2]


def _deploy(*args: str, mask: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deploy", *args],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        umask=mask,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("mask", "expected"), [(0o002, 0o664), (0o077, 0o600)])
def test_init_config_writes_config_pbtxt_as_the_umask_says(
    tmp_path: Path, mask: int, expected: int
) -> None:
    model = tmp_path / "m"
    onnx_model(model, "N")
    done = _deploy("init-config", str(model), mask=mask)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _mode(model / "config.pbtxt") == expected


def test_package_writes_archives_and_manifest_as_the_umask_says(tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    shutil.copytree(EXAMPLES / "addsub", repository / "addsub")
    done = _deploy("package", str(repository), "--out", str(tmp_path / "out"), mask=0o002)
    assert done.returncode == 0, done.stdout + done.stderr
    written = sorted((tmp_path / "out").iterdir())
    assert {p.name for p in written} >= {"manifest.json"}
    assert {p.name: _mode(p) for p in written if p.is_file()} == {
        p.name: 0o664 for p in written if p.is_file()
    }


def test_with_umask_gives_a_temporary_file_and_folder_their_open_and_mkdir_modes(
    tmp_path: Path,
) -> None:
    handle, name = tempfile.mkstemp(dir=tmp_path)
    os.close(handle)
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    assert _mode(Path(name)) == 0o600 and _mode(folder) == 0o700
    assert _mode(with_umask(Path(name))) == 0o666 & ~umask()
    assert _mode(with_umask(folder)) == 0o777 & ~umask()
