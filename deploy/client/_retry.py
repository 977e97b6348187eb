"""Retry policy: jittered exponential backoff for transient failures only.

TransientError: throttling (429), `ModelNotReadyException` (a model still loading
on a multi-model endpoint), 503, 507 and dropped connections. Validation and
model errors are never retried. botocore's own retries are switched off so
that this is the only policy in play.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from deploy.client._errors import EndpointError, InferenceTimeoutError, RetriesExhaustedError


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to retry transient failures.

    Attempt `n` (0-based) waits a random time in `[0, min(max_delay,
    base_delay * 2**n)]` ("full jitter"). `total_timeout` bounds the whole
    sequence: no sleep crosses it and no attempt starts after it.
    """

    max_attempts: int = 5
    base_delay: float = 0.05
    max_delay: float = 2.0
    total_timeout: float = 120.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0 or self.total_timeout <= 0:
            raise ValueError("delays must be >= 0 and total_timeout > 0")

    def backoff(self, attempt: int, draw: Callable[[], float] = random.random) -> float:
        return float(draw()) * min(self.max_delay, self.base_delay * 2.0**attempt)


NO_RETRIES = RetryPolicy(max_attempts=1)


class TransientError(Exception):
    """Internal: a failure worth another attempt; `error` is raised if none is left."""

    def __init__(self, error: EndpointError) -> None:
        super().__init__(str(error))
        self.error = error


class Attempts:
    """Book-keeping for one call's retry sequence (shared by sync and async)."""

    def __init__(
        self,
        policy: RetryPolicy,
        where: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.policy = policy
        self.where = where
        self.count = 0
        self._clock = clock
        self._draw = draw
        self._deadline = clock() + policy.total_timeout

    def remaining(self) -> float:
        return self._deadline - self._clock()

    def start(self) -> None:
        """Called before each attempt; raises when the deadline has passed."""
        if self.count and self.remaining() <= 0:
            raise InferenceTimeoutError(
                f"no answer within total_timeout={self.policy.total_timeout}s "
                f"({self.count} attempts)",
                where=self.where,
            )
        self.count += 1

    def delay_after(self, failure: TransientError) -> float:
        """Seconds to wait before the next attempt, or raise the final error."""
        error = failure.error
        if self.count >= self.policy.max_attempts:
            raise RetriesExhaustedError(
                error.message,
                attempts=self.count,
                code=error.code,
                status=error.status,
                where=error.where or self.where,
            ) from error
        delay = self.policy.backoff(self.count - 1, self._draw)
        if delay >= self.remaining():
            raise InferenceTimeoutError(
                f"still failing when total_timeout={self.policy.total_timeout}s ran out "
                f"({self.count} attempts; last: {error.message})",
                where=self.where,
            ) from error
        return delay
