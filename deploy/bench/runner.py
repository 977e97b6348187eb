"""Runs a load test: the probe call, the worker processes, one step after another.

Before any load, one call through the SDK checks what a user can get wrong
(an unknown model, an endpoint that is down, inputs that do not match the
model) and turns it into a `BenchError` that says so; on a multi-model
endpoint it also loads the model, so the first step does not time a cold load.

Worker processes (`deploy.bench.worker`) are started once, with the spawn
method (the CLI may hold threads: a local endpoint's front end, for one), and
given one job per step. Their number follows the highest concurrency: one
per core, more when a process would need more threads than the SDK keeps
connections (`THREADS_PER_WORKER`), never more than the concurrency.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deploy.bench.target import Target
from deploy.bench.worker import Job, Samples, serve
from deploy.errors import BenchError

# The SDK's sync client keeps this many connections per endpoint.
THREADS_PER_WORKER = 32
_START_TIMEOUT_S = 120.0
_LEAD_S = 0.25  # jobs are sent this long before their start, so every worker starts together


@dataclass(frozen=True)
class Step:
    """One load level: `concurrency` requests in flight (closed loop), or sends at
    `rate` per second with at most `concurrency` in flight (fixed rate)."""

    concurrency: int
    rate: float | None = None

    def label(self) -> str:
        if self.rate is None:
            return f"concurrency {self.concurrency}"
        return f"{self.rate:g}/s (max {self.concurrency} in flight)"


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]
    duration_s: float = 10.0
    warmup_s: float = 2.0
    workers: int | None = None  # None: from the concurrency and the cores

    def processes(self) -> int:
        highest = max(step.concurrency for step in self.steps)
        if self.workers is not None:
            return max(1, min(self.workers, highest))
        cores = os.cpu_count() or 1
        return max(1, min(highest, max(cores, math.ceil(highest / THREADS_PER_WORKER))))


@dataclass
class Probe:
    """The first call: how long it took (a cold load on MME) and what came back."""

    seconds: float
    outputs: tuple[str, ...]


def probe(target: Target, inputs: Mapping[str, Any], *, timeout_s: float = 300.0) -> Probe:
    """One call with retries (a model still loading answers ModelNotReady); a clear
    `BenchError` for anything that would make every request of the run fail."""
    from dataclasses import replace

    from deploy.client import (
        ClientError,
        EndpointError,
        InvalidInputError,
        ModelError,
        ModelNotFoundError,
    )

    first = replace(target, timeout_s=max(target.timeout_s, timeout_s), attempts=8)
    where = f"{target.describe()}, model {target.model!r}"
    started = time.monotonic()
    try:
        with first.open() as endpoint:
            result = endpoint.infer(target.model, inputs, target_model=target.target_model)
    except ModelNotFoundError as exc:
        raise BenchError(
            f"unknown model: {exc.message}", where=where, fix=exc.fix or "check the model name"
        ) from exc
    except InvalidInputError as exc:
        raise BenchError(
            f"the inputs do not match the model: {exc}",
            where=where,
            fix="give inputs with the model's names, datatypes and shapes (--input), "
            "or leave --input out to generate them from the manifest",
        ) from exc
    except ModelError as exc:
        raise BenchError(
            f"the model rejected the first request: {exc.message}",
            where=where,
            fix=exc.fix or "check the inputs against the model's config.pbtxt",
        ) from exc
    except EndpointError as exc:
        if exc.status is None:
            message = f"the endpoint is not reachable: {exc.message}"
            fix = (
                "start it (`deploy serve`, `deploy up --local`) or check --endpoint-url"
                if target.endpoint_url
                else "check the endpoint name, the region and `deploy status`"
            )
        else:
            message = f"the endpoint failed the first call ({exc.status}): {exc.message}"
            fix = "check `deploy status` and the endpoint's log, then run again"
        raise BenchError(message, where=where, fix=fix) from exc
    except ClientError as exc:
        raise BenchError(
            f"the first request failed: {exc}", where=where, fix=exc.fix or "see the message"
        ) from exc
    return Probe(time.monotonic() - started, tuple(sorted(result)))


class WorkerPool:
    """Worker processes that each hold an SDK endpoint; `run` gives each a job."""

    def __init__(self, target: Target, inputs: Mapping[str, Any], processes: int) -> None:
        self.target = target
        self.inputs = dict(inputs)
        self.size = processes
        self._processes: list[Any] = []
        self._connections: list[Any] = []

    def start(self) -> WorkerPool:
        context = multiprocessing.get_context("spawn")
        for index in range(self.size):
            parent, child = context.Pipe()
            process = context.Process(
                target=serve,
                args=(child, self.target, self.inputs),
                name=f"deploy-bench-{index}",
                daemon=True,
            )
            process.start()
            child.close()
            self._processes.append(process)
            self._connections.append(parent)
        deadline = time.monotonic() + _START_TIMEOUT_S
        for index, connection in enumerate(self._connections):
            kind, detail = self._receive(index, connection, deadline)
            if kind != "ready":
                raise BenchError(
                    f"load-generator process {index} could not open the endpoint: {detail}",
                    where=self.target.describe(),
                    fix="the probe call worked from this process: check credentials and "
                    "environment variables a child process sees",
                )
        return self

    def run(self, jobs: Sequence[Job]) -> list[Samples]:
        """One job per worker (a worker without a share gets `threads=0`)."""
        for connection, job in zip(self._connections, jobs, strict=True):
            connection.send(job)
        end = max(job.end_at for job in jobs)
        deadline = end + self.target.timeout_s * 2 + 30
        results = []
        for index, connection in enumerate(self._connections):
            kind, detail = self._receive(index, connection, deadline)
            if kind != "samples":
                raise BenchError(f"load-generator process {index} failed: {detail}")
            results.append(detail)
        return results

    def _receive(self, index: int, connection: Any, deadline: float) -> tuple[str, Any]:
        while not connection.poll(0.2):
            if not self._processes[index].is_alive():
                code = self._processes[index].exitcode
                return "error", f"it exited with code {code}"
            if time.monotonic() > deadline:
                return "error", "it did not answer in time"
        try:
            message: tuple[str, Any] = connection.recv()
        except EOFError:
            return "error", "it closed its pipe"
        return message

    def close(self) -> None:
        for connection in self._connections:
            with suppress(OSError):
                connection.send(None)
        for process in self._processes:
            process.join(5)
            if process.is_alive():
                process.terminate()
                process.join(5)
        for connection in self._connections:
            connection.close()
        self._processes.clear()
        self._connections.clear()


@contextmanager
def worker_pool(target: Target, inputs: Mapping[str, Any], processes: int) -> Iterator[WorkerPool]:
    pool = WorkerPool(target, inputs, processes)
    try:
        yield pool.start()
    finally:
        pool.close()


def jobs_for(step: Step, plan: Plan, processes: int, start_at: float) -> list[Job]:
    """The step's concurrency (and rate) split over the workers."""
    used = min(processes, step.concurrency)
    base, extra = divmod(step.concurrency, used)
    warm_until = start_at + plan.warmup_s
    end_at = warm_until + plan.duration_s
    jobs = []
    for index in range(processes):
        threads = (base + (1 if index < extra else 0)) if index < used else 0
        interval = offset = None
        if step.rate is not None and threads:
            interval = used / step.rate  # each worker sends 1/used of the rate
            offset = index / step.rate  # interleaved, so the sends are evenly spaced
        jobs.append(
            Job(
                threads=threads,
                start_at=start_at,
                warm_until=warm_until,
                end_at=end_at,
                interval_s=interval,
                offset_s=offset or 0.0,
            )
        )
    return jobs


# A finished step: its samples, the machine's CPU use, its measured window.
StepDone = Callable[[Step, list[Samples], "MachineCpu", tuple[float, float]], None]


def run_steps(pool: WorkerPool, plan: Plan, on_step: StepDone) -> None:
    """Each step in turn; `on_step` gets its samples and the machine's CPU use."""
    for step in plan.steps:
        start_at = time.monotonic() + _LEAD_S
        jobs = jobs_for(step, plan, pool.size, start_at)
        machine = MachineCpu.watch(jobs[0].warm_until, jobs[0].end_at)
        samples = pool.run(jobs)
        on_step(step, samples, machine.finish(), (jobs[0].warm_until, jobs[0].end_at))


@dataclass
class MachineCpu:
    """The share of all cores busy during the measured window (Linux /proc/stat;
    None elsewhere). Reads happen in a thread so the parent stays free."""

    busy: float | None = None
    _thread: Any = None

    @classmethod
    def watch(cls, start: float, end: float) -> MachineCpu:
        import threading

        watcher = cls()

        def measure() -> None:
            _sleep_until(start)
            before = _proc_stat()
            _sleep_until(end)
            after = _proc_stat()
            if before is not None and after is not None:
                total = after[0] - before[0]
                watcher.busy = (total - (after[1] - before[1])) / total if total > 0 else None

        watcher._thread = threading.Thread(target=measure, name="bench-cpu", daemon=True)
        watcher._thread.start()
        return watcher

    def finish(self) -> MachineCpu:
        if self._thread is not None:
            self._thread.join(5)
        return self


def _sleep_until(moment: float) -> None:
    while (left := moment - time.monotonic()) > 0:
        time.sleep(min(left, 0.5))


def _proc_stat() -> tuple[int, int] | None:
    """(all jiffies, idle + iowait jiffies) of the machine, or None off Linux."""
    try:
        with Path("/proc/stat").open(encoding="ascii") as handle:
            fields = handle.readline().split()[1:]
    except OSError:
        return None
    values = [int(value) for value in fields]
    return sum(values), values[3] + (values[4] if len(values) > 4 else 0)
