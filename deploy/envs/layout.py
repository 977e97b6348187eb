"""The folder layout that makes the python backend's stub use a folder's site-packages.

The stub embeds the image's Python, started without a program name: CPython
then looks for `python3` on PATH, and `site.venv` takes `../pyvenv.cfg` beside
it to make that folder `sys.prefix` (its `lib/pythonX.Y/site-packages` on
`sys.path`, the system's not, with `include-system-site-packages = false`).
The backend sources `bin/activate` (python_backend `src/stub_launcher.cc`),
which puts `bin/` first on PATH. No `home` key: the interpreter keeps the
standard library it was built with, the image's.
"""

from __future__ import annotations

from pathlib import Path

ACTIVATE = """\
# Sourced by Triton's python backend before it starts its stub.
VIRTUAL_ENV="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
export VIRTUAL_ENV
PATH="$VIRTUAL_ENV/bin:$PATH"
export PATH
unset PYTHONHOME
"""

PYTHON3 = """\
#!/bin/sh
# The stub's embedded Python looks for python3 on PATH and takes ../pyvenv.cfg
# to use this folder's site-packages. Run directly, this starts the system's
# python{python} with those packages.
here="$(cd "$(dirname "$0")/.." && pwd)"
PATH="$(printf %s "$PATH" | sed "s#$here/bin:##")"
PYTHONPATH="$here/lib/python{python}/site-packages" exec python{python} "$@"
"""


def site_packages(root: Path, python: str) -> Path:
    return root / "lib" / f"python{python}" / "site-packages"


def write_layout(root: Path, python: str) -> Path:
    """`bin/activate`, `bin/python3`, `pyvenv.cfg` under `root`; returns its site-packages."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "activate").write_text(ACTIVATE, encoding="utf-8")
    (bin_dir / "python3").write_text(PYTHON3.format(python=python), encoding="utf-8")
    (bin_dir / "python3").chmod(0o755)
    (root / "pyvenv.cfg").write_text(
        f"include-system-site-packages = false\nversion = {python}\n", encoding="utf-8"
    )
    site = site_packages(root, python)
    site.mkdir(parents=True, exist_ok=True)
    return site
