"""Whether repository code may run at all: `--no-repo-code` or deploy.toml.

Commands that can run repository code take `--no-repo-code`; deploy.toml's
`repository_code = false` (or DEPLOY_REPOSITORY_CODE=false) does the same for
every command. A command records the choice once (`decide`); code that would
run repository code asks `skip_reason()` first and, when it cannot do without,
raises the error `refused` builds.
"""

from __future__ import annotations

import os

from deploy.errors import RepositoryError

FLAG = "--no-repo-code"
SETTING = "repository_code"
ENV = "DEPLOY_REPOSITORY_CODE"
_FALSE = {"0", "false", "no", "off"}


def decide(*, flag: bool, configured: object = None, where: str = "deploy.toml") -> None:
    """Record this command's choice: the flag, else the setting, else run boxed.

    The choice is also put in the environment, so commands this one starts
    (`deploy up --local` starting `deploy serve`) make the same one.
    """
    if os.environ.get(ENV + "_SOURCE"):
        # An earlier command in this process decided (the CLI run in-process, as tests and
        # embedding applications do): its choice is not this command's.
        os.environ.pop(ENV, None)
        os.environ.pop(ENV + "_SOURCE", None)
    if flag:
        os.environ[ENV] = "false"
        os.environ[ENV + "_SOURCE"] = FLAG
    elif configured is False and ENV not in os.environ:
        os.environ[ENV] = "false"
        os.environ[ENV + "_SOURCE"] = f"{SETTING} = false in {where}"


def skip_reason() -> str | None:
    """Why repository code is skipped (the flag or the setting), or None when it runs."""
    if os.environ.get(ENV, "true").strip().lower() in _FALSE:
        return os.environ.get(ENV + "_SOURCE") or f"{ENV}={os.environ[ENV]}"
    return None


def refused(code: str, purpose: str, *, fix: str) -> RepositoryError:
    """The error for code that must run but may not."""
    reason = skip_reason() or FLAG
    return RepositoryError(
        f"{purpose} needs to run repository code ({code}), which {reason} skips",
        where=code,
        fix=f"{fix}, or drop {FLAG} (and set {SETTING} = true) to run it in the box",
    )
