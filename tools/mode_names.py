"""Lint: no code outside `deploy/hosting` compares a hosting mode's name as a string.

Everything that differs between hosting modes hangs off the mode
(`deploy.hosting.mode.HostingMode`): code elsewhere asks it (`mode.scales_to_zero`,
`mode.local`, `mode.endpoint_stack`, ...) instead of testing which mode it is, so
that adding a mode touches its own module and no `if hosting == "..."` elsewhere.

A comparison (`==`, `!=`, `in`, `not in`, `is`, a `match` case) is flagged when
one side is a mode name: the string itself ("async"), a name bound to it in the
same module (`ASYNC_HOSTING = "async"`, `SERVED = ("async", ...)`), a mode
constant of the manifest contract (`MULTI_MODEL`, `manifest.ASYNC`, ...), or a
tuple/list/set holding one. The SDK
(`deploy/client`) and the Lambda (`deploy_handlers`) cannot import `deploy.hosting`
and are not checked.

    python tools/mode_names.py deploy deploy_infra
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

# The places that may name modes: the modes themselves, and the SDK's manifest contract.
ALLOWED = ("deploy/hosting/", "deploy/client/")
# The manifest contract's constants for the mode names (deploy.client.manifest).
CONTRACT_CONSTANTS = frozenset({"MULTI_MODEL", "SINGLE_MODEL", "ASYNC", "SERVERLESS", "COMPONENTS"})


def mode_names() -> frozenset[str]:
    from deploy.hosting import MODES

    return frozenset(MODES)


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    column: int
    name: str

    def __str__(self) -> str:
        return (
            f"{self.path}:{self.line}:{self.column}: hosting mode {self.name!r} compared as a "
            "string outside deploy/hosting; ask the HostingMode (deploy/hosting/mode.py) "
            "through an attribute instead"
        )


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str, names: frozenset[str]) -> None:
        self.path = path
        self.names = names
        self.bound: dict[str, str] = {}  # module names bound to a mode name
        self.findings: list[Finding] = []

    def bind(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "deploy.client.manifest":
                for alias in node.names:
                    if alias.name in CONTRACT_CONSTANTS:
                        self.bound[alias.asname or alias.name] = alias.name
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
                found = self.mode_name(value) if isinstance(target, ast.Name) else None
                if isinstance(target, ast.Name) and found is not None:
                    self.bound[target.id] = found

    def _literal(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value if node.value in self.names else None
        return None

    def mode_name(self, node: ast.expr) -> str | None:
        """The mode name `node` stands for, or None."""
        literal = self._literal(node)
        if literal is not None:
            return literal
        if isinstance(node, ast.Name) and node.id in self.bound:
            return self.bound[node.id]
        if isinstance(node, ast.Attribute) and node.attr in CONTRACT_CONSTANTS:
            return node.attr
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            for element in node.elts:
                found = self.mode_name(element)
                if found is not None:
                    return found
        return None

    def report(self, node: ast.AST, name: str) -> None:
        line, column = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
        self.findings.append(Finding(self.path, line, column + 1, name))

    def visit_Compare(self, node: ast.Compare) -> None:
        for operand in (node.left, *node.comparators):
            found = self.mode_name(operand)
            if found is not None:
                self.report(node, found)
                break
        self.generic_visit(node)

    def visit_MatchValue(self, node: ast.MatchValue) -> None:
        found = self.mode_name(node.value)
        if found is not None:
            self.report(node, found)
        self.generic_visit(node)


def check_source(source: str, path: str, names: frozenset[str] | None = None) -> list[Finding]:
    """The findings in one module's source (`path` as reported, relative to the root)."""
    if any(path.startswith(allowed) for allowed in ALLOWED):
        return []
    checker = _Checker(path, names if names is not None else mode_names())
    tree = ast.parse(source, filename=path)
    checker.bind(tree)
    checker.visit(tree)
    return checker.findings


def python_files(roots: Iterable[Path]) -> Iterator[Path]:
    for root in roots:
        yield from sorted(root.rglob("*.py")) if root.is_dir() else [root]


def check(roots: Iterable[Path], base: Path) -> list[Finding]:
    names = mode_names()
    findings: list[Finding] = []
    for path in python_files(roots):
        relative = path.resolve().relative_to(base.resolve()).as_posix()
        findings += check_source(path.read_text(encoding="utf-8"), relative, names)
    return findings


def main(argv: list[str]) -> int:
    base = Path.cwd()
    findings = check([Path(arg) for arg in argv or ["deploy", "deploy_infra"]], base)
    for finding in findings:
        print(finding)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
