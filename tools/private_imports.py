"""Lint: private modules and names (`_name`) are not imported across packages.

`deploy/client/_core.py` is the SDK's business; code outside `deploy/client`
uses what the package makes public (`deploy.client`, `deploy.client.codec`,
...). import-linter cannot say this (its wildcards replace whole module names,
not a leading underscore), so this checks every import statement:

- a private module (`import a.b._c`, `from a.b._c import x`, `from a.b import _c`
  where `a/b/_c.py` or `a/b/_c/` exists) is imported only by modules inside `a.b`;
- a private name of a module (`from a.b.m import _x`) only by modules of `a.b`,
  the module's own package;
- relative imports are resolved against the importing module first.

Dunder names (`__future__`, `__main__`) are not private. Tests are not checked:
they test private modules on purpose.

    python tools/private_imports.py deploy deploy_infra deploy_handlers bench tools
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path


def is_private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def module_name(path: Path) -> str:
    parts = list(path.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(parts: list[str]) -> bool:
    path = Path(*parts)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def owner(dotted: str) -> str | None:
    """The package a private module or name belongs to (None: nothing private)."""
    parts = dotted.split(".")
    for index, part in enumerate(parts):
        if is_private(part):
            if is_module(parts[: index + 1]) or index < 2:
                return ".".join(parts[:index])
            return ".".join(parts[: index - 1])  # a module's name: its package owns it
    return None


def resolved(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def violations(path: Path) -> Iterator[str]:
    importer = module_name(path)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = resolved(node, importer, is_package)
            targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
        for target in targets:
            package = owner(target)
            if package is None:
                continue
            if importer != package and not importer.startswith(package + "."):
                yield (
                    f"{path}:{node.lineno}: imports {target} from outside {package}: "
                    "use what the package makes public"
                )
                break


def main(roots: list[str]) -> int:
    found = [
        problem
        for root in roots
        for path in sorted(Path(root).rglob("*.py"))
        if "standin" not in path.parts  # a stand-in of another project, imported as it
        for problem in violations(path)
    ]
    for problem in found:
        print(problem)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["deploy", "deploy_infra", "deploy_handlers", "bench", "tools"]))
