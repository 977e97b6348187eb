"""Eviction under concurrency on the real endpoint: budgets hold, nothing races or wedges.

GIVEN a local endpoint (real tritonserver + front end) with a small model budget
WHEN many clients call several models at once, models are unloaded while
being called, and loads or unloads take longer than a caller may wait
THEN every call is answered (results, or ModelNotReady for a wait that ran
out), Triton never holds more models than the budget, and status answers
at once.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from deploy.local.models.platform import LoadTimeoutError
from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint
from tests.functional.local_models import addsub_files, encode, write_archive

pytestmark = [pytest.mark.triton, pytest.mark.slow]

A = np.arange(4, dtype=np.float32).reshape(1, 4)
BODY, CONTENT_TYPE = encode({"INPUT0": A, "INPUT1": A})


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEndpoint]:
    root = tmp_path_factory.mktemp("eviction")
    (root / "store").mkdir()
    server = LocalEndpoint(
        root / "store", work_dir=root / "work", options=EndpointOptions(max_models=1)
    ).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def platform(endpoint: LocalEndpoint) -> Iterator[Any]:
    platform = endpoint.platform
    saved = platform.max_models, platform.load_timeout
    for model in platform.listing()["loaded"]:
        platform.unload(model["target_model"])
    try:
        yield platform
    finally:
        platform.max_models, platform.load_timeout = saved


def add_models(endpoint: LocalEndpoint, prefix: str, count: int, **delays: float) -> list[str]:
    store = Path(endpoint.store.location)
    targets = []
    for index in range(count):
        target = f"{prefix}/m{index}.tar.gz"
        write_archive(store / target, addsub_files(f"{prefix}_m{index}", **delays))
        targets.append(target)
    return targets


class Caller:
    """One client: a keep-alive connection to the front end, outcomes recorded."""

    def __init__(self, endpoint: LocalEndpoint) -> None:
        self.port = endpoint.port
        self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        self.outcomes: list[tuple[str, int, str, float]] = []

    def call(self, target: str) -> int:
        started = time.monotonic()
        try:
            self.connection.request(
                "POST",
                "/endpoints/local/invocations",
                body=BODY,
                headers={"Content-Type": CONTENT_TYPE, "X-Amzn-SageMaker-Target-Model": target},
            )
            response = self.connection.getresponse()
            data = response.read()
            status = response.status
            detail = "" if status == 200 else data.decode(errors="replace")[:300]
        except (OSError, http.client.HTTPException) as exc:
            self.connection.close()
            self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            status, detail = 0, f"{type(exc).__name__}: {exc}"
        self.outcomes.append((target, status, detail, time.monotonic() - started))
        return status


def run_clients(count: int, body: Callable[[int, Caller], None], endpoint: LocalEndpoint) -> list:
    callers = [Caller(endpoint) for _ in range(count)]
    threads = [
        threading.Thread(target=body, args=(index, caller)) for index, caller in enumerate(callers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
        assert not thread.is_alive(), "a client hung"
    for caller in callers:
        caller.connection.close()
    return [outcome for caller in callers for outcome in caller.outcomes]


def triton_models(endpoint: LocalEndpoint) -> list[Any]:
    """What tritonserver itself has loaded (its SageMaker `GET /models`: one entry each)."""
    connection = http.client.HTTPConnection("127.0.0.1", endpoint.supervisor.port, timeout=30)
    try:
        connection.request("GET", "/models")
        return list(json.loads(connection.getresponse().read())["models"])
    finally:
        connection.close()


class Sampler:
    """Largest number of models Triton held at once, sampled every 20 ms."""

    def __init__(self, endpoint: LocalEndpoint) -> None:
        self.endpoint = endpoint
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.most = max(self.most, len(triton_models(self.endpoint)))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


def test_concurrent_first_loads_stay_within_the_model_budget(
    endpoint: LocalEndpoint, platform: Any
) -> None:
    # GIVEN a budget of 2 models and 6 models nobody has loaded yet
    platform.max_models = 2
    targets = add_models(endpoint, "first", 6, delay=0.3)

    # WHEN 6 clients each call a different one at the same moment
    start = threading.Barrier(6)

    def client(index: int, caller: Caller) -> None:
        start.wait()
        caller.call(targets[index])

    with Sampler(endpoint) as sampler:
        outcomes = run_clients(6, client, endpoint)

    # THEN all are answered and Triton never held more than 2
    assert [status for _, status, _, _ in outcomes] == [200] * 6, outcomes
    assert 1 <= sampler.most <= 2
    assert len(platform.listing()["loaded"]) <= 2


def test_clients_over_more_models_than_the_budget_all_get_answers(
    endpoint: LocalEndpoint, platform: Any
) -> None:
    # GIVEN one model may be loaded and 8 clients call 3 models round robin for 8 s
    targets = add_models(endpoint, "thrash", 3, delay=0.05)
    deadline = time.monotonic() + 8

    def client(index: int, caller: Caller) -> None:
        turn = index
        while time.monotonic() < deadline:
            caller.call(targets[turn % len(targets)])
            turn += 1

    with Sampler(endpoint) as sampler:
        outcomes = run_clients(8, client, endpoint)

    # THEN every call succeeded, none took long, and Triton held one model at a time
    failures = [o for o in outcomes if o[1] != 200]
    assert not failures, failures[:5]
    assert max(o[3] for o in outcomes) < 30
    assert len(outcomes) >= 16
    assert sampler.most == 1
    assert platform.evictions > 0


def test_unload_racing_calls_of_the_same_model(endpoint: LocalEndpoint, platform: Any) -> None:
    # GIVEN a model called by 4 clients, and an operator unloading it again and again
    platform.max_models = None
    (target,) = add_models(endpoint, "race", 1, delay=0.05)
    deadline = time.monotonic() + 6
    unloads: list[bool] = []
    errors: list[BaseException] = []

    def unloader() -> None:
        while time.monotonic() < deadline:
            try:
                unloads.append(platform.unload(target))
            except Exception as exc:
                errors.append(exc)
            time.sleep(0.05)

    def client(index: int, caller: Caller) -> None:
        while time.monotonic() < deadline:
            caller.call(target)

    thread = threading.Thread(target=unloader)
    thread.start()
    outcomes = run_clients(4, client, endpoint)
    thread.join(60)

    # THEN each call got its result, each unload finished, and the end state is coherent
    assert not errors, errors
    assert any(unloads), "no unload happened while the model was in use"
    failures = [o for o in outcomes if o[1] != 200]
    assert not failures, failures[:5]
    loaded = {m["target_model"] for m in platform.listing()["loaded"]}
    folder = platform.work_dir / platform.hash_for(target) / "model"
    # Triton lists one (nameless) entry per model it holds.
    assert (target in loaded) == folder.is_dir() == (len(triton_models(endpoint)) == 1)


def test_a_load_slower_than_the_wait_is_model_not_ready_and_status_still_answers(
    endpoint: LocalEndpoint, platform: Any
) -> None:
    # GIVEN loads take 3 s, a caller may wait 1 s, and one model fits at a time
    platform.load_timeout = 1.0
    targets = add_models(endpoint, "slow", 12, delay=3.0)
    listing_seconds: list[float] = []

    def client(index: int, caller: Caller) -> None:
        caller.call(targets[index])

    def status() -> None:
        time.sleep(0.5)
        started = time.monotonic()
        connection = http.client.HTTPConnection("127.0.0.1", endpoint.port, timeout=60)
        try:
            connection.request("GET", "/models")
            response = connection.getresponse()
            response.read()
            assert response.status == 200
            listing_seconds.append(time.monotonic() - started)
        finally:
            connection.close()

    # WHEN 12 clients each call one of 12 models at once, and status is asked meanwhile
    watcher = threading.Thread(target=status)
    watcher.start()
    outcomes = run_clients(12, client, endpoint)
    watcher.join(60)

    # THEN each call is refused as not ready within about its wait, not after all loads
    assert {status for _, status, _, _ in outcomes} == {429}, outcomes
    assert all("ModelNotReadyException" in detail for _, _, detail, _ in outcomes)
    assert max(seconds for *_, seconds in outcomes) < 10
    assert listing_seconds and listing_seconds[0] < 2
    # AND the load Triton went on with is registered when it ends, within the budget
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not platform.listing()["loaded"]:
        time.sleep(0.1)
    listing = platform.listing()
    assert len(listing["loaded"]) == 1 and not listing["loading"]
    assert len(triton_models(endpoint)) == 1
    caller = Caller(endpoint)
    assert caller.call(listing["loaded"][0]["target_model"]) == 200
    caller.connection.close()


def test_an_unload_slower_than_the_wait_is_an_error_and_still_completes(
    endpoint: LocalEndpoint, platform: Any
) -> None:
    # GIVEN a loaded model whose finalize takes 3 s
    (target,) = add_models(endpoint, "linger", 1, finalize_delay=3.0)
    caller = Caller(endpoint)
    assert caller.call(target) == 200
    caller.connection.close()
    platform.load_timeout = 1.0
    folder = platform.work_dir / platform.hash_for(target)

    # WHEN it is unloaded by a caller who waits 1 s
    started = time.monotonic()
    with pytest.raises(LoadTimeoutError, match="did not finish unloading"):
        platform.unload(target)

    # THEN that caller gets an error in time, the model still counts while it unloads,
    # and the unload completes on its own
    assert time.monotonic() - started < 2.5
    assert platform.listing()["unloading"] == [target]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and platform.listing()["unloading"]:
        time.sleep(0.1)
    assert platform.listing()["unloading"] == [] and not folder.exists()
    assert triton_models(endpoint) == []
