"""The calling thread's deadline for one call (connect, send, every read).

`deadline(seconds)` sets it for a block; the sockets of
`deploy.client._transport` (which both transports send over) make every
operation inside the block give up when it passes.
"""

from __future__ import annotations

import threading
import time

_state = threading.local()


class DeadlineExceededError(TimeoutError):
    """The call's deadline passed (urllib3 reads it as a socket timeout)."""


class deadline:  # noqa: N801 - used as a function: `with deadline(seconds):`
    """Bound every socket operation of this thread's calls inside the block.

    A class rather than a generator-based context manager: it runs on every call."""

    __slots__ = ("_at", "_outer")

    def __init__(self, seconds: float) -> None:
        self._at = time.monotonic() + seconds
        self._outer: float | None = None

    def __enter__(self) -> None:
        outer: float | None = getattr(_state, "at", None)
        self._outer = outer
        _state.at = self._at if outer is None else min(self._at, outer)

    def __exit__(self, *exc: object) -> None:
        _state.at = self._outer


def remaining() -> float | None:
    """Seconds left before this thread's deadline (None: none is set)."""
    at: float | None = getattr(_state, "at", None)
    return None if at is None else at - time.monotonic()
