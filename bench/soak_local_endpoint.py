"""Soak: many clients over every example model with room for only one loaded model.

Prints one JSON document. `deploy serve` runs in its own process over the
packaged examples with `--max-loaded-models 1`, so nearly every call that
changes model evicts one and loads another; N client threads (keep-alive
HTTP/1.1, InvokeEndpoint with a TargetModel) call randomly chosen models for
the run's duration. A call answered ModelNotReadyException (429: "retry")
is retried with jittered backoff, as the SDK does; any other answer ends
it. Reported per run: calls, attempts, answers by status, calls over 30 s,
latency of whole calls (p50/p99/max, retries included), loads and evictions,
and the memory of the endpoint's processes before and after.

Target: every call answered 200, none over 30 s, no 5xx and no 424.
Baseline, measured in the same run: the same clients with no model limit
(every model stays loaded, no eviction).

`--quick` is a smoke run that checks only that the benchmark works
(tests/functional/test_bench_quick.py runs it).

    python bench/soak_local_endpoint.py [--clients N] [--seconds S] [--baseline-seconds S]
    python bench/soak_local_endpoint.py --quick
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import platform
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deploy.lifecycle.smoke import generated_inputs  # noqa: E402

SLOW_S = 30.0
RETRY_FOR_S = 60.0  # how long a call keeps retrying ModelNotReady


def binary_body(inputs: dict[str, np.ndarray]) -> tuple[bytes, str]:
    import tritonclient.http as th
    from tritonclient.utils import np_to_triton_dtype

    tensors = []
    for name, array in inputs.items():
        tensor = th.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
        tensor.set_data_from_numpy(array, binary_data=True)
        tensors.append(tensor)
    body, header = th.InferenceServerClient.generate_request_body(tensors)
    if header is None:
        return body, "application/json"
    return body, f"application/vnd.sagemaker-triton.binary+json;json-header-size={header}"


def output_names(body: bytes, content_type: str) -> list[str]:
    size = len(body)
    if "json-header-size=" in content_type:
        size = int(content_type.rsplit("=", 1)[1])
    return sorted(o["name"] for o in json.loads(body[:size])["outputs"])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(port: int, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def rss_mb(pid: int) -> float:
    total = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return round(total / 1024, 1)


def start_endpoint(store: Path, log: Path, max_models: int | None) -> tuple[Any, int]:
    port = free_port()
    limit = ["--max-loaded-models", str(max_models)] if max_models else []
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "deploy", "serve", str(store), "--port", str(port), *limit],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if get(port, "/ping")[0] == 200:
                return process, port
        time.sleep(0.1)
    process.kill()
    raise SystemExit(f"endpoint did not start; see {log}")


class Client:
    """One caller: a keep-alive connection; ModelNotReady retried with backoff."""

    def __init__(self, port: int, requests: dict[str, Any], seed: int) -> None:
        self.port = port
        self.requests = requests
        self.rng = random.Random(seed)
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.calls: list[dict[str, Any]] = []
        self.attempt_statuses: list[int] = []

    def _attempt(self, name: str) -> tuple[int, str]:
        request = self.requests[name]
        try:
            self.connection.request(
                "POST",
                "/endpoints/local/invocations",
                body=request["body"],
                headers=request["headers"],
            )
            response = self.connection.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.connection.close()
            self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            return 0, f"{type(exc).__name__}: {exc}"
        if response.status != 200:
            return response.status, body.decode(errors="replace")[:300]
        names = output_names(body, response.getheader("Content-Type", ""))
        if names != request["outputs"]:
            return -1, f"outputs {names}, expected {request['outputs']}"
        return 200, ""

    def run(self, deadline: float) -> None:
        names = sorted(self.requests)
        while time.monotonic() < deadline:
            name = self.rng.choice(names)
            started = time.monotonic()
            attempts = 0
            while True:
                attempts += 1
                status, detail = self._attempt(name)
                self.attempt_statuses.append(status)
                if status != 429 or time.monotonic() - started > RETRY_FOR_S:
                    break
                time.sleep(self.rng.random() * min(2.0, 0.05 * 2**attempts))
            self.calls.append(
                {
                    "model": name,
                    "status": status,
                    "seconds": time.monotonic() - started,
                    "attempts": attempts,
                    "detail": detail,
                }
            )
        self.connection.close()


def soak(
    store: Path, work: Path, *, clients: int, seconds: float, max_models: int | None
) -> dict[str, Any]:
    manifest = json.loads((store / "manifest.json").read_text())
    requests = {}
    for name, model in sorted(manifest["models"].items()):
        body, content_type = binary_body(generated_inputs(model))
        requests[name] = {
            "body": body,
            "headers": {
                "Content-Type": content_type,
                "X-Amzn-SageMaker-Target-Model": model["target_model"],
            },
            "outputs": sorted(o["name"] for o in model["outputs"]),
        }
    log = work / f"serve-{max_models or 'unlimited'}.log"
    process, port = start_endpoint(store, log, max_models)
    try:
        rss_before = rss_mb(process.pid)
        callers = [Client(port, requests, seed) for seed in range(clients)]
        started = time.monotonic()
        deadline = started + seconds
        threads = [threading.Thread(target=c.run, args=(deadline,)) for c in callers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(seconds + RETRY_FOR_S + 120)
        hung = sum(thread.is_alive() for thread in threads)
        elapsed = time.monotonic() - started
        listing = json.loads(get(port, "/models")[1])
        rss_after = rss_mb(process.pid)
    finally:
        process.send_signal(2)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    calls = [call for caller in callers for call in caller.calls]
    statuses = [status for caller in callers for status in caller.attempt_statuses]
    seconds_per_call = np.array([call["seconds"] for call in calls]) * 1000
    by_status: dict[str, int] = {}
    for call in calls:
        by_status[str(call["status"])] = by_status.get(str(call["status"]), 0) + 1
    failures = [call for call in calls if call["status"] != 200]
    return {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "max_loaded_models": max_models,
        "models": sorted(requests),
        "calls": len(calls),
        "calls_per_s": round(len(calls) / elapsed, 1),
        "attempts": len(statuses),
        "final_status": by_status,
        "model_not_ready_retries": statuses.count(429),
        "errors_5xx": sum(1 for s in statuses if s >= 500),
        "errors_424": statuses.count(424),
        "calls_over_30s": int((seconds_per_call > SLOW_S * 1000).sum()),
        "hung_clients": hung,
        "latency_ms": {
            "p50": round(float(np.percentile(seconds_per_call, 50)), 1),
            "p99": round(float(np.percentile(seconds_per_call, 99)), 1),
            "max": round(float(seconds_per_call.max()), 1),
        },
        "calls_per_model": {
            name: sum(1 for call in calls if call["model"] == name) for name in sorted(requests)
        },
        "loads": listing.get("loads_total"),
        "evictions": listing.get("evictions"),
        "endpoint_rss_mb": {"before": rss_before, "after": rss_after},
        "first_failures": [
            {k: call[k] for k in ("model", "status", "seconds", "detail")} for call in failures[:5]
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument(
        "--baseline-seconds", type=float, default=30.0, help="0: skip the baseline run"
    )
    parser.add_argument("--quick", action="store_true", help="2 clients, 3 s (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.clients, args.seconds, args.baseline_seconds = 2, 3.0, 2.0

    from deploy.packaging import package_repository

    with tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp:
        work = Path(tmp)
        store = work / "store"
        package_repository(ROOT / "model_packages" / "examples", store)
        run = soak(store, work, clients=args.clients, seconds=args.seconds, max_models=1)
        report: dict[str, Any] = {
            "benchmark": "soak_local_endpoint",
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "max_loaded_models_1": run,
        }
        if args.baseline_seconds > 0:
            report["baseline_no_model_limit"] = soak(
                store, work, clients=args.clients, seconds=args.baseline_seconds, max_models=None
            )
    report["targets"] = {
        "every_call_answered_200": run["final_status"] == {"200": run["calls"]}
        and run["hung_clients"] == 0,
        "no_5xx": run["errors_5xx"] == 0,
        "no_424": run["errors_424"] == 0,
        "no_call_over_30s": run["calls_over_30s"] == 0,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
