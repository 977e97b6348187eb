"""Generated python-backend models are templates copied as they are, never formatted.

Names from scripts and configs reach the generated model.py files only as
data they read (a JSON file beside them, or the config's parameters), so
each template is already valid Python with no format fields.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
TEMPLATES = sorted(DEPLOY.rglob("*.py.tmpl"))


def test_the_templates_are_found() -> None:
    names = {path.name for path in TEMPLATES}
    assert {"model.py.tmpl", "adapter_model.py.tmpl", "neuron_model.py.tmpl"} <= names


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_each_template_is_python_as_it_is(template: Path) -> None:
    text = template.read_text(encoding="utf-8")
    tree = ast.parse(text, filename=str(template))
    docstring = ast.get_docstring(tree) or ""
    assert not re.search(r"\{[A-Za-z_]\w*(![rsa])?\}", docstring), "a format field"
