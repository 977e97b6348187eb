"""tools/private_imports.py: private modules and names stay inside their package."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.private_imports import main, violations

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in (
        "pkg/__init__.py",
        "pkg/sdk/__init__.py",
        "pkg/sdk/_core.py",
        "pkg/cli/__init__.py",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / "pkg/sdk/public.py").write_text("def _helper(): ...\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(path: str, source: str) -> Path:
    Path(path).write_text(source)
    return Path(path)


@pytest.mark.parametrize(
    "source",
    [
        "import pkg.sdk._core\n",
        "from pkg.sdk._core import route\n",
        "from pkg.sdk import _core\n",
        "from ..sdk._core import route\n",
        "from pkg.sdk.public import _helper\n",
    ],
)
def test_a_private_module_or_name_imported_from_another_package_is_flagged(
    tree: Path, source: str
) -> None:
    found = list(violations(write("pkg/cli/run.py", source)))
    assert len(found) == 1 and "pkg/cli/run.py:1" in found[0], found
    assert main(["pkg"]) == 1


@pytest.mark.parametrize(
    "source",
    [
        "from ._core import route\n",
        "from pkg.sdk._core import route\n",
        "from .public import _helper\n",
        "from __future__ import annotations\n",
        "from pkg.sdk import public\n",
    ],
)
def test_the_package_itself_may_import_its_private_parts(tree: Path, source: str) -> None:
    assert list(violations(write("pkg/sdk/client.py", source))) == []


def test_this_repository_holds_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["deploy", "deploy_infra", "deploy_handlers", "bench", "tools"]) == 0
