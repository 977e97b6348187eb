"""How pip runs for an execution environment: the user's index, binary wheels, a bare environment.

A requirements file may come from someone else (`deploy.envs.requirements`
keeps it to specifiers), so pip gets nothing of the user's that the file could
reach, and nothing from the user's pip configuration that could change where it
downloads from:

- the index is the one the user chose (`--index-url` flag, `pip_index_url` in
  deploy.toml, `DEPLOY_PIP_INDEX_URL`; PyPI when none), passed to pip itself;
- `--only-binary=:all:`: wheels only, so no build backend ever runs;
- `--isolated` and `PIP_CONFIG_FILE=/dev/null`: no `PIP_*` variable and no
  pip.conf (user, site or global) is read;
- an allow-listed environment: locale, PATH, CA bundles, proxies without
  credentials; a temporary HOME, so `~/.aws`, `~/.netrc` and `~/.pypirc` are
  out of reach; no `AWS_*`, tokens or other secrets;
- the working folder is a scratch folder, so no relative path means anything.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from deploy.errors import ConfigError

DEFAULT_INDEX_URL = "https://pypi.org/simple"
INDEX_SCHEMES = ("https", "http", "file")
# Passed through when set: none of them holds a secret.
_PASSED = (
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
)
_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


def index_url_problem(url: str) -> str | None:
    """Why pip cannot use `url` as its index (None: it can)."""
    parts = urlsplit(url)
    if parts.scheme in INDEX_SCHEMES and (parts.netloc or parts.scheme == "file"):
        return None
    return "is not an http(s) or file URL of a package index (e.g. https://pypi.org/simple)"


def index_url(explicit: str | None = None) -> str:
    """The index pip uses: `explicit` (a flag), else the `pip_index_url` setting, else PyPI."""
    if explicit:
        problem = index_url_problem(explicit)
        if problem:
            raise ConfigError(
                f"{redacted(explicit)!r} {problem}",
                where="--index-url",
                fix="give the index's simple URL: https://pypi.org/simple or your mirror's",
            )
        return explicit
    from deploy.config import load_settings

    return load_settings().pip_index_url or DEFAULT_INDEX_URL


def redacted(url: str) -> str:
    """`url` without the password of its user part, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def _has_credentials(proxy: str) -> bool:
    try:
        parts = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    except ValueError:
        return True
    return parts.username is not None or parts.password is not None or "@" in parts.netloc


def pip_environment(home: Path, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment pip runs with: an allow-list of `source` (default os.environ)."""
    source = os.environ if source is None else source
    env = {name: source[name] for name in _PASSED if name in source}
    for name in (*_PROXIES, *(p.lower() for p in _PROXIES)):
        value = source.get(name)
        if value and (name.upper() == "NO_PROXY" or not _has_credentials(value)):
            env[name] = value
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        TMPDIR=str(home / "tmp"),
        PIP_CONFIG_FILE=os.devnull,
        PYTHONNOUSERSITE="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    return env


def pip_install_command(
    *,
    index: str,
    target: Path,
    python: str,
    platforms: Sequence[str],
    requirements: Path,
    constraints: Path,
    cache: Path,
    hashed: bool,
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--isolated",
        "--disable-pip-version-check",
        "--no-input",
        "--no-compile",
        "--no-warn-script-location",
        "--progress-bar=off",
        "--quiet",
        "--index-url",
        index,
        "--cache-dir",
        str(cache),
        "--target",
        str(target),
        "--implementation",
        "cp",
        "--python-version",
        python,
        "--only-binary=:all:",
        *(arg for tag in platforms for arg in ("--platform", tag)),
        *(["--require-hashes"] if hashed else []),
        "-r",
        str(requirements),
        "-c",
        str(constraints),
    ]


def run_pip(command: list[str], *, work: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run pip in `work` (its scratch folder) with the allow-listed environment."""
    return subprocess.run(
        command,
        cwd=work,
        env=pip_environment(work / "home"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
