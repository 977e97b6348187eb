"""The AWS CDK CLI this version of deploy was tested with: found, or installed once.

The CLI is a Node.js program, not a Python dependency, so the tool pins its
version here and looks for it in this order:

1. `node_modules/.bin/cdk` of the project (a checkout that ran `npm ci`);
2. `cdk` on PATH;
3. the cache, `<cache>/cdk-<version>/` (`DEPLOY_CACHE_DIR`, else
   `$XDG_CACHE_HOME/deploy`, else `~/.cache/deploy`).

The first whose version is the pinned one is used. Without one, npm installs the
pinned version into the cache (once, with a progress line, into a temporary folder
that is renamed into place, so an interrupted install leaves nothing half-written).
Node.js itself must be there: a missing or too old `node`/`npm` is an error that
says what to install.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from deploy.errors import ConfigError

# aws-cdk (the CLI) for aws-cdk-lib 2.275 (pyproject's infra extra).
CDK_CLI_VERSION = "2.1148.0"
# The CLI's package.json says `"node": ">= 18.0.0"`; jsii (aws-cdk-lib's runtime)
# counts 18 as end of life, so 20 or later is what to install.
MIN_NODE = (18, 0)
RECOMMENDED_NODE = 20
CACHE_ENV = "DEPLOY_CACHE_DIR"

_NODE_FIX = (
    f"install Node.js {RECOMMENDED_NODE} or later (https://nodejs.org/en/download, or your "
    "package manager, e.g. `sudo apt-get install nodejs npm` or `brew install node`), then run "
    "the command again"
)


def cache_dir() -> Path:
    """Where the tool keeps what it downloads on first use."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen:
        return Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "deploy"


def cached_cli_dir(version: str = CDK_CLI_VERSION) -> Path:
    return cache_dir() / f"cdk-{version}"


def node_version() -> tuple[int, int]:
    """The installed Node.js version; a `ConfigError` naming the fix when absent or too old."""
    node = shutil.which("node")
    if node is None:
        raise ConfigError(
            "Node.js is not installed: `node` is not on PATH, and the AWS CDK CLI runs on it",
            where="node",
            fix=_NODE_FIX,
        )
    try:
        answer = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"`node --version` failed: {exc}", where=node, fix=_NODE_FIX) from exc
    found = re.match(r"v?(\d+)\.(\d+)", answer.stdout.strip())
    if answer.returncode != 0 or found is None:
        raise ConfigError(
            f"`node --version` answered {answer.stdout.strip() or answer.stderr.strip()!r}",
            where=node,
            fix=_NODE_FIX,
        )
    version = (int(found.group(1)), int(found.group(2)))
    if version < MIN_NODE:
        raise ConfigError(
            f"Node.js {version[0]}.{version[1]} is too old: the AWS CDK CLI {CDK_CLI_VERSION} "
            f"needs Node.js {MIN_NODE[0]} or later ({RECOMMENDED_NODE} or later recommended)",
            where=node,
            fix=_NODE_FIX,
        )
    return version


def _package_version(prefix: Path) -> str | None:
    """The aws-cdk version installed under `prefix/node_modules` (None: not there)."""
    try:
        document = json.loads(
            (prefix / "node_modules" / "aws-cdk" / "package.json").read_text(encoding="utf-8")
        )
    except (OSError, ValueError):
        return None
    version = document.get("version") if isinstance(document, dict) else None
    return str(version) if version else None


def _installed_under(prefix: Path, version: str) -> Path | None:
    cli = prefix / "node_modules" / ".bin" / "cdk"
    if cli.is_file() and _package_version(prefix) == version:
        return cli
    return None


def _on_path(version: str) -> Path | None:
    found = shutil.which("cdk")
    if found is None:
        return None
    try:
        answer = subprocess.run(
            [found, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = answer.stdout.split()
    return Path(found) if answer.returncode == 0 and words[:1] == [version] else None


def find_cdk_cli(project: Path | None = None, version: str = CDK_CLI_VERSION) -> Path | None:
    """The pinned CLI if it is already on this machine (project, PATH, cache)."""
    if project is not None:
        local = _installed_under(project, version)
        if local is not None:
            return local
    return _on_path(version) or _installed_under(cached_cli_dir(version), version)


def cdk_cli(
    project: Path | None = None,
    *,
    version: str = CDK_CLI_VERSION,
    progress: TextIO | None = None,
) -> Path:
    """The pinned CDK CLI's executable, installed into the cache on first use."""
    node_version()
    found = find_cdk_cli(project, version)
    return found if found is not None else install_cdk_cli(version, progress=progress)


def install_cdk_cli(version: str = CDK_CLI_VERSION, *, progress: TextIO | None = None) -> Path:
    """npm-install `aws-cdk@version` into the cache; its executable."""
    target = cached_cli_dir(version)
    npm = shutil.which("npm")
    if npm is None:
        raise ConfigError(
            f"npm is not on PATH: it installs the AWS CDK CLI {version} on first use",
            where="npm",
            fix=_NODE_FIX.replace("Node.js", "Node.js with npm", 1)
            + f" (or install the CLI yourself: `npm install -g aws-cdk@{version}`)",
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    out = progress or sys.stderr
    print(
        f"installing the AWS CDK CLI {version} into {target} (npm, first use only)...",
        file=out,
        flush=True,
    )
    staging = Path(tempfile.mkdtemp(prefix=f".cdk-{version}-", dir=target.parent))
    try:
        done = subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(staging),
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                f"aws-cdk@{version}",
            ],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=900,
            check=False,
        )
        if done.returncode != 0 or _installed_under(staging, version) is None:
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            detail = " | ".join(lines[-4:])[-800:] or f"exit code {done.returncode}"
            raise ConfigError(
                f"npm could not install the AWS CDK CLI {version}: {detail}",
                where=f"npm install aws-cdk@{version}",
                fix="check that the npm registry is reachable (a proxy: `npm config set "
                f"proxy URL`), or install the CLI yourself: `npm install -g aws-cdk@{version}`",
            )
        try:
            staging.rename(target)
        except OSError:
            # Another process installed it meanwhile (or a broken copy is in the way).
            if _installed_under(target, version) is None:
                shutil.rmtree(target, ignore_errors=True)
                staging.rename(target)
    except subprocess.TimeoutExpired as exc:
        raise ConfigError(
            f"npm did not finish installing the AWS CDK CLI {version} in {exc.timeout:.0f} s",
            where=f"npm install aws-cdk@{version}",
            fix="check the network and run the command again",
        ) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    cli = _installed_under(target, version)
    if cli is None:  # pragma: no cover - the rename above put it there
        raise ConfigError(f"the AWS CDK CLI {version} is missing after install", where=str(target))
    print(f"installed the AWS CDK CLI {version}", file=out, flush=True)
    return cli


def cannot_run(cli: Path, exc: OSError) -> ConfigError:
    """The error for a CDK CLI that does not start (a broken or half-removed install)."""
    return ConfigError(
        f"cannot run the CDK CLI: {exc}",
        where=str(cli),
        fix="remove the folder named and run the command again (it is installed afresh)",
    )
