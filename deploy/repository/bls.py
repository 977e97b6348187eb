"""Which models a python model calls through BLS, read from its source without running it.

`pb_utils.InferenceRequest(model_name=...)` names the callee. The name is known
when it is a string literal or a variable only ever bound to string literals;
otherwise (a name taken from an input, a computed string) it is None: nobody
can know it before the model runs. Validation warns about both kinds; the
router layouts load the known callees of a model together with it, since
SageMaker's single-model and asynchronous endpoints load only the default model.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path


def string_bindings(tree: ast.Module) -> dict[str, set[str]]:
    """Names only ever bound to string literals: `x = "a"`, `for x in ["a", "b"]`."""
    found: dict[str, set[str]] = {}
    other: set[str] = set()

    def bind(target: ast.expr, values: list[ast.expr]) -> None:
        if not isinstance(target, ast.Name):
            return
        strings = [v.value for v in values if isinstance(v, ast.Constant)]
        if len(strings) == len(values) and all(isinstance(v, str) for v in strings):
            found.setdefault(target.id, set()).update(str(v) for v in strings)
        else:
            other.add(target.id)

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                bind(target, [node.value])
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            bind(node.target, [node.value])
        elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
            values = node.iter.elts if isinstance(node.iter, ast.List | ast.Tuple) else []
            bind(node.target, list(values) or [node.iter])
    return {name: values for name, values in found.items() if name not in other}


def model_name_calls(tree: ast.Module) -> Iterator[tuple[str | None, int]]:
    """(model_name, line) of each `InferenceRequest(model_name=...)`: the name when it is
    known (a string literal, or a variable only ever bound to string literals), else None."""
    bindings = string_bindings(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name != "InferenceRequest":
            continue
        value: ast.expr | None = next(
            (k.value for k in node.keywords if k.arg == "model_name"),
            node.args[0] if node.args else None,
        )
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            yield value.value, node.lineno
        elif isinstance(value, ast.Name) and value.id in bindings:
            for literal in sorted(bindings[value.id]):
                yield literal, node.lineno
        else:
            yield None, node.lineno


def literal_callees(model_folder: Path) -> set[str]:
    """The models `model_folder`'s python code calls by a name known before it runs.

    Reads each numbered version's `model.py`; a file that does not parse (validation
    reports it) adds nothing.
    """
    found: set[str] = set()
    for source in sorted(model_folder.glob("[0-9]*/model.py")):
        try:
            tree = ast.parse(source.read_bytes(), filename=str(source))
        except (OSError, SyntaxError, ValueError):
            continue
        found.update(name for name, _line in model_name_calls(tree) if name is not None)
    return found
