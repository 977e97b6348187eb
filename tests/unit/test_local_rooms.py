"""`deploy/local/`'s rooms: what a hosting mode may do with the front end, and the
files the endpoint reads from its own package at run time.

The import edges between the rooms are import-linter contracts (pyproject.toml);
what they cannot say is checked here.
"""

from __future__ import annotations

import ast
from importlib import resources
from pathlib import Path

LOCAL = Path(__file__).resolve().parents[2] / "deploy" / "local"


def test_no_local_mode_subclasses_the_front_end() -> None:
    # A mode hands the front end an `Invoker` (FrontEnd(invoker=...)); a subclass
    # would reach into its private routing (`_invoke`) again.
    subclasses = []
    for path in sorted(LOCAL.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases}
                if "FrontEnd" in bases:
                    subclasses.append(f"{path.relative_to(LOCAL)}: {node.name}")
    assert subclasses == []


def test_the_modes_plug_in_through_the_invoker() -> None:
    from deploy.local.http.frontend import FrontEnd, Invoker
    from deploy.local.modes.async_endpoint import AsyncInvoker
    from deploy.local.modes.single_model import SingleModelInvoker

    # The Protocol's members, each implemented (mypy checks the signatures).
    for invoker in (SingleModelInvoker, AsyncInvoker):
        for member in ("headers", "route", "invoke", "close"):
            assert hasattr(invoker, member), (invoker.__name__, member)
    assert "invoker" in FrontEnd.__init__.__annotations__
    assert Invoker.__module__ == "deploy.local.http.frontend"


def test_the_files_read_at_run_time_are_in_their_rooms() -> None:
    # guard.py compiles triton_guard.c and adapters.py copies the adapter's model.py
    # from their own packages (package data: **/*.c, **/*.py.tmpl).
    assert resources.files("deploy.local.triton").joinpath("triton_guard.c").is_file()
    assert resources.files("deploy.local.models").joinpath("adapter_model.py.tmpl").is_file()
