"""An exclusive lock on a file in a cache folder, for caches several processes fill.

The tritonserver wheel cache (`deploy.local.triton.wheel`) and the front door's
Lambda asset cache (`deploy_infra.lambda_bundle`) are each written once by
whichever `deploy` process comes first; the others wait on this lock. `flock`
is released by the kernel when a process dies, so a crash leaves no stale lock.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Callable, Iterator
from pathlib import Path


@contextlib.contextmanager
def locked(path: Path, error: Callable[..., Exception]) -> Iterator[None]:
    """Hold an exclusive lock on `path` (its folder is made). A folder that cannot be
    written raises `error(message, where=..., fix=...)`, the caller's own error type."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("a+b")
    except OSError as exc:
        raise error(
            f"the cache folder cannot be written: {exc.strerror or exc}",
            where=str(path.parent),
            fix="set XDG_CACHE_HOME to a folder this user may write",
        ) from None
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
