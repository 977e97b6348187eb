"""kill -9 of tritonserver under traffic: errors, not hangs; then recovery."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import numpy as np
import pytest
from botocore.exceptions import ClientError

from tests.functional.local_models import addsub_files, invoke, runtime_client, write_archive

pytestmark = [pytest.mark.triton, pytest.mark.slow]

A = np.arange(4, dtype=np.float32).reshape(1, 4)


def test_kill_9_under_traffic_restarts_and_reloads(local_endpoint: Any) -> None:
    target = "tests/crash_addsub.tar.gz"
    files = addsub_files("crash_addsub", execute_delay=0.2)
    write_archive(local_endpoint.store_dir / target, files)
    endpoint = local_endpoint.endpoint
    invoke(runtime_client(local_endpoint.url), "local", target, {"INPUT0": A, "INPUT1": A})
    loads_before = endpoint.platform.loads[target]
    restarts_before = endpoint.supervisor.restarts

    stop = threading.Event()
    outcomes: list[str] = []
    durations: list[float] = []

    def traffic() -> None:
        client = runtime_client(local_endpoint.url)
        while not stop.is_set():
            started = time.monotonic()
            try:
                invoke(client, "local", target, {"INPUT0": A, "INPUT1": A})
                outcomes.append("ok")
            except ClientError as exc:
                outcomes.append(exc.response["Error"]["Code"])
            durations.append(time.monotonic() - started)

    threads = [threading.Thread(target=traffic) for _ in range(3)]
    for thread in threads:
        thread.start()
    # Kill once traffic flows: each call then spends 0.2 s of a ~0.2 s cycle in Triton.
    deadline = time.monotonic() + 20
    while len(outcomes) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    pid = endpoint.supervisor.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and endpoint.supervisor.restarts == restarts_before:
        time.sleep(0.05)
    assert endpoint.supervisor.wait_ready(30)
    # The supervisor reloads what was loaded before the crash.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and endpoint.platform.loads[target] == loads_before:
        time.sleep(0.05)
    time.sleep(1.0)
    stop.set()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive(), "a request hung"

    assert endpoint.supervisor.restarts == restarts_before + 1
    assert endpoint.platform.loads[target] == loads_before + 1
    errors = set(outcomes) - {"ok"}
    # Requests inside Triton when it died get an error (each call takes 0.2 s there).
    assert errors == {"ServiceUnavailable"}, outcomes
    assert max(durations) < 30
    assert outcomes[-1] == "ok"
    _, outputs = invoke(
        runtime_client(local_endpoint.url), "local", target, {"INPUT0": A, "INPUT1": A}
    )
    np.testing.assert_array_equal(outputs["OUTPUT0"], A + A)
