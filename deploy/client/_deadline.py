"""The calling thread's deadline for one call (connect, send, every read).

`deadline(seconds)` sets it for a block; the sockets of
`deploy.client._transport` (which both transports send over) make every
operation inside the block give up when it passes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_state = threading.local()


class DeadlineExceededError(TimeoutError):
    """The call's deadline passed (urllib3 reads it as a socket timeout)."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Bound every socket operation of this thread's calls inside the block."""
    outer = getattr(_state, "at", None)
    at = time.monotonic() + seconds
    _state.at = at if outer is None else min(at, outer)
    try:
        yield
    finally:
        _state.at = outer


def remaining() -> float | None:
    """Seconds left before this thread's deadline (None: none is set)."""
    at: float | None = getattr(_state, "at", None)
    return None if at is None else at - time.monotonic()
