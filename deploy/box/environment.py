"""The environment repository code gets: an allow-list, never credentials.

Only variables that locate the system's libraries, set the locale or size
thread pools pass; AWS_*, tokens, secrets, keys, passwords and every proxy
setting (a proxy URL may carry credentials, and boxed code has no network to
use it on) are dropped, whatever their name says. HOME and TMPDIR point at
the run's own folders, so `~/.aws` and the like are not found through them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

ALLOWED = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "LD_LIBRARY_PATH",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "TOKENIZERS_PARALLELISM",
        "PYTHONHASHSEED",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
    }
)
ALLOWED_PREFIXES = ("LC_",)
# Whatever the allow-list says, a name like these never passes.
_SECRET = re.compile(
    r"^AWS_|TOKEN|SECRET|KEY|PASSWORD|PASSWD|CREDENTIAL|SESSION|AUTH|PROXY", re.IGNORECASE
)


def allowed(name: str) -> bool:
    """Whether the variable `name` may reach repository code."""
    if _SECRET.search(name):
        return False
    return name in ALLOWED or name.startswith(ALLOWED_PREFIXES)


def scrubbed_environment(
    *,
    home: Path,
    tmp: Path,
    extra: Mapping[str, str] | None = None,
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The allow-listed part of `source` (os.environ), HOME and TMPDIR, then `extra`.

    `extra` is what deploy itself sets (paths it computed), taken as given
    except for names that look like secrets.
    """
    base = os.environ if source is None else source
    env = {name: value for name, value in base.items() if allowed(name)}
    env.setdefault("PATH", os.defpath)
    env.update({"HOME": str(home), "TMPDIR": str(tmp), "USER": "deploy", "LOGNAME": "deploy"})
    for name, value in (extra or {}).items():
        if not _SECRET.search(name):
            env[name] = value
    return env
