"""Bounds on the front end's client connections: time, head size, count.

    header_timeout    a request's head (request line and headers) must arrive in
                      this time, counted from the connection's start or, on a
                      keep-alive connection, from the request's first byte (408)
    body_timeout      its body must follow within this time (408)
    idle_timeout      a keep-alive connection with nothing to do is closed
    max_header_bytes  a larger request head is answered 431
    max_connections   at the limit a new connection takes the place of the one
                      waiting longest for a request (keep-alive, or still sending
                      its head); when every connection is busy it is answered 503
    max_pipelined     complete requests queued on one connection before reading
                      pauses (they are answered in order)

A connection is closed after an error answer once the client has had time to
read it (`LINGER_S`): closing with unread request bytes would reset the
connection and lose the answer.

No timer runs per request: a connection stamps the phase it is in with the
sweep's clock, and one sweep per tick checks every connection.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the CLI reads the defaults; asyncio is imported by the front end
    import asyncio

LINGER_S = 2.0
_FDS_KEPT_BACK = 64  # log files, archives being extracted, the supervisor's pipes

# A connection's phase (ints: they are compared on the hot path).
HEAD = 1  # waiting for (the rest of) a request's head
BODY = 2  # reading a body
IDLE = 3  # between requests (or waiting for answers to requests already read)
CLOSING = 4  # answered with an error; closed once the client read it


@dataclass(frozen=True)
class ConnectionLimits:
    """The front end's connection bounds (`deploy serve` flags set most of them)."""

    header_timeout: float = 10.0
    body_timeout: float = 60.0
    idle_timeout: float = 60.0
    max_header_bytes: int = 64 * 1024
    max_connections: int = 1000
    max_pipelined: int = 16

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout", "idle_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.max_header_bytes < 1024 or self.max_connections < 1 or self.max_pipelined < 1:
            raise ValueError("max_header_bytes >= 1024, max_connections and max_pipelined >= 1")

    def connections_allowed(self) -> int:
        """`max_connections`, lowered to what the process's file limit allows: a busy
        connection also holds one to tritonserver."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return self.max_connections
        return max(1, min(self.max_connections, (soft - _FDS_KEPT_BACK) // 2))

    @property
    def tick(self) -> float:
        shortest = min(self.header_timeout, self.body_timeout, self.idle_timeout)
        return min(1.0, max(0.05, shortest / 4))


class Tracked(Protocol):
    """What the guard needs of a connection (`frontend._Connection`)."""

    phase: int
    since: float  # the guard's clock when the phase began
    busy: bool  # a request is being answered
    paused: bool  # reading paused: the client waits for us, not we for it

    def time_out(self, what: str, limit: float) -> None: ...

    def evict(self) -> None: ...

    def abort(self) -> None: ...


class ConnectionGuard:
    """Admits, times out and evicts the front end's connections."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.max_connections = limits.connections_allowed()
        self.now = 0.0  # the clock, as of the last tick
        self.open: set[Tracked] = set()
        self.closing: set[Tracked] = set()
        self.refused = 0
        self.evicted = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.now = loop.time()
        self._timer = loop.call_later(self.limits.tick, self._sweep)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def admit(self, connection: Tracked) -> bool:
        """Count a new connection in; False: every connection is busy (answer 503)."""
        if len(self.open) >= self.max_connections:
            victim = self._waiting_longest()
            if victim is None:
                self.refused += 1
                return False
            self.open.discard(victim)
            self.evicted += 1
            victim.evict()
        self.open.add(connection)
        return True

    def closing_started(self, connection: Tracked) -> bool:
        """A connection answered an error; False: too many linger, close it now."""
        self.open.discard(connection)
        if len(self.closing) >= self.max_connections:
            return False
        self.closing.add(connection)
        return True

    def forget(self, connection: Tracked) -> None:
        self.open.discard(connection)
        self.closing.discard(connection)

    def _waiting_longest(self) -> Tracked | None:
        # Runs only at the limit: a scan is cheaper overall than keeping an
        # ordered index up to date on every request.
        best: Tracked | None = None
        best_key = (0, 0.0)
        for connection in self.open:
            if connection.busy or connection.phase == BODY:
                continue
            key = (0 if connection.phase == IDLE else 1, connection.since)
            if best is None or key < best_key:
                best, best_key = connection, key
        return best

    def _sweep(self) -> None:
        assert self._loop is not None
        limits = self.limits
        now = self.now = self._loop.time()
        slack = limits.tick  # phases are stamped with a clock up to one tick old
        for connection in list(self.open):
            if connection.paused:
                continue
            waited = now - connection.since - slack
            phase = connection.phase
            if phase == HEAD and waited >= limits.header_timeout:
                connection.time_out("the request head", limits.header_timeout)
            elif phase == BODY and waited >= limits.body_timeout:
                connection.time_out("the request body", limits.body_timeout)
            elif phase == IDLE and not connection.busy and waited >= limits.idle_timeout:
                self.open.discard(connection)
                connection.evict()
        for connection in list(self.closing):
            if now - connection.since - slack >= LINGER_S:
                self.closing.discard(connection)
                connection.abort()
        self._timer = self._loop.call_later(limits.tick, self._sweep)
