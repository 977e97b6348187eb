"""What each role installs (pyproject.toml's extras), and what a missing extra says.

An application that uses the SDK installs numpy and boto3 only; the CLI, the
local endpoint, provisioning and async calls are extras. A command whose extra
is missing stops with the pip command, not a traceback. Missing packages are
simulated by a finder that refuses to import them, in a fresh interpreter.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from deploy.extras import DISTRIBUTION, PROVIDED_BY

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "model_packages" / "examples"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]


def name_of(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9_.-]+", requirement)
    assert match, requirement
    return match.group(0).lower().replace("_", "-")


def names(extra: str) -> set[str]:
    """Distribution names an extra installs, following its references to other extras."""
    found = set()
    for requirement in EXTRAS[extra]:
        if name_of(requirement) == DISTRIBUTION:
            inner = re.search(r"\[(.*)\]", requirement)
            assert inner, requirement
            for other in inner.group(1).split(","):
                found |= names(other.strip())
        else:
            found.add(name_of(requirement))
    return found


def test_the_distribution_has_a_free_name_and_keeps_the_command() -> None:
    assert PROJECT["name"] == DISTRIBUTION != "deploy"
    assert PROJECT["scripts"] == {"deploy": "deploy.console:main"}


def test_the_sdk_installs_numpy_and_boto3_only() -> None:
    assert {name_of(r) for r in PROJECT["dependencies"]} <= {"numpy", "boto3", "botocore"}
    assert names("async") == {"aiohttp"}


def test_each_role_gets_its_own_extra() -> None:
    assert {"httptools", "uvloop"} <= names("local")
    assert {"aws-cdk-lib", "cdk-nag", "sagemaker-core"} <= names("infra")
    assert not {"aws-cdk-lib", "sagemaker-core", "httptools"} & names("cli")
    # tritonclient's HTTP/gRPC clients are for tests only; the tool reads its schema.
    for extra in ("cli", "local", "infra", "async"):
        for requirement in EXTRAS[extra]:
            if name_of(requirement) == "tritonclient":
                assert "[" not in requirement, requirement
        assert "grpcio" not in names(extra)


def test_every_module_an_extra_provides_is_named_once_and_listed() -> None:
    for module, (extra, distribution) in PROVIDED_BY.items():
        assert distribution in names(extra), (module, extra, distribution)
    for extra in ("cli", "local", "infra", "async"):
        own = {name_of(r) for r in EXTRAS[extra]} - {DISTRIBUTION}
        told = {d for e, d in PROVIDED_BY.values() if e == extra}
        assert own <= told, (extra, own - told)


def test_importing_the_sdk_imports_no_optional_package() -> None:
    code = (
        "import sys, deploy.client; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & {set(PROVIDED_BY)!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def run_without(blocked: set[str], argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`deploy ARGV` in a fresh interpreter where the `blocked` packages are not importable."""
    code = f"""
import importlib.abc, sys

class Missing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Missing())
sys.argv = ["deploy", *{argv!r}]
from deploy.console import main
main()
"""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(cwd)},
    )


@pytest.mark.parametrize(
    ("blocked", "argv", "extra"),
    [
        ({"typer"}, ["--help"], "cli"),
        ({"httptools"}, ["serve", str(EXAMPLES), "--port", "0"], "local"),
        ({"httptools"}, ["up", "--local", "--repository", str(EXAMPLES)], "local"),
        ({"aws_cdk"}, ["up", "--dry-run"], "infra"),
    ],
)
def test_a_missing_extra_names_the_pip_command(
    tmp_path: Path, blocked: set[str], argv: list[str], extra: str
) -> None:
    done = run_without(blocked, argv, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"pip install '{DISTRIBUTION}[{extra}]'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "build").exists(), "nothing is packaged before the check"


def test_the_tool_needs_no_grpc_client(tmp_path: Path) -> None:
    done = run_without({"grpc"}, ["validate", str(EXAMPLES)], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 error(s)" in done.stdout
