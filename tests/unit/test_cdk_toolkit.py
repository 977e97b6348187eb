"""The pinned CDK CLI: found where it is, never another version, and Node.js named.

Executables on a PATH made for each test stand in for what a user's machine
has (no node, an old node, a cdk of another version); nothing is patched in-process.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from deploy.errors import ConfigError
from deploy.lifecycle import cdk_toolkit
from deploy.lifecycle.cdk_toolkit import CDK_CLI_VERSION, cdk_cli, find_cdk_cli, node_version


def executable(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH of one empty folder (sh itself is called by absolute path) and an empty cache."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.setenv("DEPLOY_CACHE_DIR", str(tmp_path / "cache"))
    return folder


def test_a_missing_node_is_named_with_the_fix(bare_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        cdk_cli(bare_path)
    assert "Node.js is not installed: `node` is not on PATH" in raised.value.message
    assert "install Node.js 20 or later" in (raised.value.fix or "")
    assert "make" not in str(raised.value)


def test_an_old_node_is_named(bare_path: Path) -> None:
    executable(bare_path, "node", "echo v16.20.2")
    with pytest.raises(ConfigError, match=r"Node\.js 16\.20 is too old") as raised:
        node_version()
    assert f"CLI {CDK_CLI_VERSION} needs Node.js 18 or later" in raised.value.message
    executable(bare_path, "node", "echo v20.11.1")
    assert node_version() == (20, 11)


def test_a_cdk_on_path_is_used_only_at_the_pinned_version(bare_path: Path) -> None:
    executable(bare_path, "cdk", 'echo "2.1000.0 (build 1234567)"')
    assert find_cdk_cli() is None
    on_path = executable(bare_path, "cdk", f'echo "{CDK_CLI_VERSION} (build 1234567)"')
    assert find_cdk_cli() == on_path


def test_a_project_or_cached_cli_is_used_at_the_pinned_version(
    bare_path: Path, tmp_path: Path
) -> None:
    def install(prefix: Path, version: str) -> Path:
        package = prefix / "node_modules" / "aws-cdk"
        package.mkdir(parents=True)
        (package / "package.json").write_text(f'{{"version": "{version}"}}')
        return executable(prefix / "node_modules" / ".bin", "cdk", "exit 0")

    project = tmp_path / "project"
    install(project, "2.1000.0")
    assert find_cdk_cli(project) is None
    cached = install(cdk_toolkit.cached_cli_dir(), CDK_CLI_VERSION)
    assert find_cdk_cli(project) == cached
    shutil.rmtree(project / "node_modules")
    own = install(project, CDK_CLI_VERSION)
    assert find_cdk_cli(project) == own


def test_without_npm_the_first_use_says_what_to_install(bare_path: Path) -> None:
    executable(bare_path, "node", "echo v20.11.1")
    with pytest.raises(ConfigError, match="npm is not on PATH") as raised:
        cdk_cli(bare_path)
    assert f"npm install -g aws-cdk@{CDK_CLI_VERSION}" in (raised.value.fix or "")
    assert not cdk_toolkit.cached_cli_dir().exists()


@pytest.mark.slow
def test_the_first_use_installs_the_pinned_cli_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """npm (from the registry) installs it once, with a progress line; then it is found."""
    node = shutil.which("node")
    npm = shutil.which("npm")
    assert node and npm, "node and npm are needed (make install)"
    tools = tmp_path / "bin"
    for name, path in (("node", node), ("npm", npm)):
        tools.mkdir(exist_ok=True)
        (tools / name).symlink_to(path)
    monkeypatch.setenv("PATH", os.pathsep.join([str(tools), "/usr/bin", "/bin"]))
    monkeypatch.setenv("DEPLOY_CACHE_DIR", str(tmp_path / "cache"))
    cli = cdk_cli(tmp_path)
    assert cli == tmp_path / "cache" / f"cdk-{CDK_CLI_VERSION}" / "node_modules" / ".bin" / "cdk"
    err = capsys.readouterr().err
    assert f"installing the AWS CDK CLI {CDK_CLI_VERSION} into {tmp_path / 'cache'}" in err
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [f"cdk-{CDK_CLI_VERSION}"]
    assert cdk_cli(tmp_path) == cli
    assert "installing" not in capsys.readouterr().err
