"""One load-generator process: threads that call `Endpoint.infer` and time each call.

A worker opens one SDK endpoint (its connection pool is shared by its
threads), says it is ready, then runs the jobs the parent sends until told
to stop. A job is one step's share of the load:

- closed loop (`interval_s` None): each of `threads` threads sends its next
  request as soon as the previous one is answered;
- fixed rate: sends are scheduled every `interval_s` from `start_at +
  offset_s`, and a free thread takes the next one. A send is timed from its
  scheduled moment, not from when a thread got to it, so queueing in front of
  a slow endpoint shows in the latency (no coordinated omission); `threads`
  caps the requests in flight.

The main thread reads the process's CPU time at the edges of the measured
window (after the warm-up) while the others send.
"""

from __future__ import annotations

import itertools
import resource
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from deploy.bench.outcomes import CODE, OK, classify
from deploy.bench.target import Target

# A fixed-rate send that leaves this much after its schedule was held up by
# the cap on requests in flight (all threads busy), not by the timer.
LATE_S = 0.002
_MESSAGE_LIMIT = 500


@dataclass(frozen=True)
class Job:
    """One step's share of the load for one worker (times are `time.monotonic()`)."""

    threads: int
    start_at: float
    warm_until: float
    end_at: float
    interval_s: float | None = None  # fixed rate: seconds between this worker's sends
    offset_s: float = 0.0


@dataclass
class Samples:
    """Every call a worker made during a job (begin/end in `time.monotonic()`)."""

    begin: np.ndarray[Any, Any]
    end: np.ndarray[Any, Any]
    outcome: np.ndarray[Any, Any]
    cpu_s: float = 0.0  # this process's CPU time inside the measured window
    late: int = 0  # fixed rate: sends that left more than LATE_S after their schedule
    messages: dict[str, str] = field(default_factory=dict)  # first message per error class

    @classmethod
    def empty(cls) -> Samples:
        nothing = np.zeros(0)
        return cls(nothing, nothing.copy(), np.zeros(0, np.uint8))


Call = Callable[[], None]


def caller(endpoint: Any, target: Target, inputs: Mapping[str, Any]) -> Call:
    """One request through the SDK, as an application makes it."""

    def call() -> None:
        endpoint.infer(target.model, inputs, target_model=target.target_model)

    return call


def run_job(call: Call, job: Job, clock: Callable[[], float] = time.monotonic) -> Samples:
    """Run `job` with `call` on `job.threads` threads; returns every call's timing."""
    if job.threads < 1:
        return Samples.empty()
    records: list[list[tuple[float, float, int]]] = [[] for _ in range(job.threads)]
    messages: dict[str, str] = {}
    late = [0] * job.threads
    counter = itertools.count()

    def once(record: list[tuple[float, float, int]], begin: float) -> None:
        code = CODE[OK]
        try:
            call()
        except Exception as exc:  # every failure is a sample; the report counts them
            kind = classify(exc)
            code = CODE[kind]
            if kind not in messages:
                messages[kind] = f"{type(exc).__name__}: {exc}"[:_MESSAGE_LIMIT]
        record.append((begin, clock(), code))

    def closed_loop(index: int) -> None:
        record = records[index]
        _sleep_until(job.start_at, clock)
        while True:
            begin = clock()
            if begin >= job.end_at:
                return
            once(record, begin)

    interval = job.interval_s or 0.0

    def fixed_rate(index: int) -> None:
        record = records[index]
        first = job.start_at + job.offset_s
        while True:
            scheduled = first + next(counter) * interval
            if scheduled >= job.end_at:
                return
            now = _sleep_until(scheduled, clock)
            if now - scheduled > LATE_S and scheduled >= job.warm_until:
                late[index] += 1
            once(record, scheduled)

    body = closed_loop if job.interval_s is None else fixed_rate
    threads = [
        threading.Thread(target=body, args=(index,), name=f"bench-{index}", daemon=True)
        for index in range(job.threads)
    ]
    for thread in threads:
        thread.start()
    _sleep_until(job.warm_until, clock)
    cpu_before = _cpu_seconds()
    _sleep_until(job.end_at, clock)
    cpu_after = _cpu_seconds()
    for thread in threads:
        thread.join()
    rows = [row for record in records for row in record]
    table = np.array(rows, dtype=np.float64).reshape(-1, 3)
    return Samples(
        begin=table[:, 0].copy(),
        end=table[:, 1].copy(),
        outcome=table[:, 2].astype(np.uint8),
        cpu_s=cpu_after - cpu_before,
        late=sum(late),
        messages=messages,
    )


def _sleep_until(moment: float, clock: Callable[[], float]) -> float:
    while True:
        now = clock()
        if now >= moment:
            return now
        time.sleep(min(moment - now, 0.5))


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
    return usage.ru_utime + usage.ru_stime


def serve(connection: Connection, target: Target, inputs: Mapping[str, Any]) -> None:
    """A worker process's main: open the endpoint, then run jobs until told to stop.

    Messages to the parent: ("ready", None), ("error", text), ("samples", Samples).
    """
    # Ctrl-C reaches the whole process group; the parent decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        endpoint = target.open()
        # The manifest and the HTTP client are made on first use: make them now, untimed.
        endpoint.model_info(target.model)
        _ = endpoint.runtime
        call = caller(endpoint, target, inputs)
    except Exception as exc:
        connection.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    connection.send(("ready", None))
    try:
        while True:
            job = connection.recv()
            if job is None:
                return
            connection.send(("samples", run_job(call, job)))
    except (EOFError, BrokenPipeError):
        return  # the parent went away
    finally:
        endpoint.close()
