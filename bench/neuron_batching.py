"""Neuron model batching benchmark: concatenating queued requests vs one by one.

Prints one JSON document. In this same run, through the local single-model
endpoint (router + generated Neuron models, CPU fallback), it measures two
models generated from the example classifier that differ only in
`--per-request`: both have max_batch_size 8, dynamic batching (preferred 8,
2 ms queue delay) and one instance, so Triton hands each `execute` the same
queued requests; `concat` runs them as one forward pass, `per_request` (the
baseline) runs one forward pass each. Reported: requests/s and p50/p99
latency at concurrency 1 and 8 (SDK `Endpoint.infer`, batch 1 each), rounds
alternating between the two models so background load hits both alike.

On CPU this measures the generated model.py's batching path, not Inferentia:
on inf1 one forward pass per batch also saves NeuronCore round trips.

`--quick` is a smoke run that checks only that the benchmark works
(tests/functional/test_bench_quick.py runs it).

    python bench/neuron_batching.py [--seconds S] [--rounds R] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deploy.client import Endpoint  # noqa: E402
from deploy.local.modes.endpoint import EndpointOptions  # noqa: E402
from deploy.local.modes.single_model import SingleModelEndpoint  # noqa: E402
from deploy.neuron.generate import generate_model  # noqa: E402
from deploy.neuron.spec import build_spec  # noqa: E402

MODELS = {"concat": False, "per_request": True}  # name → per_request


def _repository(root: Path) -> Path:
    from model_packages.generate import write_classifier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        compiled = write_classifier(root / "examples")
    repository = root / "repository"
    for name, per_request in MODELS.items():
        spec = build_spec(
            name=name,
            compiled_model=compiled,
            inputs=["INPUT__0,FP32,3x32x32"],
            outputs=["OUTPUT__0,FP32,10"],
            cores=f"{0 if per_request else 1}:{0 if per_request else 1}",
            max_batch_size=8,
            preferred_batch_sizes=[8],
            max_queue_delay_us=2000,
            per_request=per_request,
        )
        generate_model(spec, repository / name)
    return repository


def _round(client: Endpoint, model: str, concurrency: int, seconds: float) -> dict[str, float]:
    image = np.random.default_rng(0).random((1, 3, 32, 32), dtype=np.float32)
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker() -> None:
        mine = []
        while time.monotonic() < stop:
            start = time.perf_counter()
            client.infer(model, {"INPUT__0": image})
            mine.append(time.perf_counter() - start)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    ordered = sorted(latencies)
    return {
        "requests": len(ordered),
        "rps": len(ordered) / elapsed,
        "p50_ms": 1000 * statistics.median(ordered),
        "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=4.0, help="per round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="one 0.5 s round (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.rounds = 0.5, 1
    with tempfile.TemporaryDirectory(prefix="bench-neuron-") as scratch:
        repository = _repository(Path(scratch))
        endpoint = SingleModelEndpoint(
            repository,
            work_dir=Path(scratch) / "endpoint",
            options=EndpointOptions(endpoint_name="bench"),
            router_instances=8,
        )
        endpoint.start()
        results: dict[str, dict[str, list[dict[str, float]]]] = {}
        try:
            with Endpoint(
                "bench", endpoint_url=endpoint.url, manifest=endpoint.manifest_path
            ) as client:
                for model in MODELS:  # warm-up
                    _round(client, model, 1, 0.5)
                for concurrency in (1, 8):
                    for _ in range(args.rounds):
                        for model in MODELS:
                            run = _round(client, model, concurrency, args.seconds)
                            results.setdefault(f"c{concurrency}", {}).setdefault(model, []).append(
                                run
                            )
        finally:
            endpoint.stop()
    summary: dict[str, Any] = {}
    for level, by_model in results.items():
        summary[level] = {
            model: {
                "rps": round(statistics.mean(r["rps"] for r in runs), 1),
                "p50_ms": round(statistics.mean(r["p50_ms"] for r in runs), 2),
                "p99_ms": round(statistics.mean(r["p99_ms"] for r in runs), 2),
                "requests": sum(int(r["requests"]) for r in runs),
            }
            for model, runs in by_model.items()
        }
        summary[level]["concat_vs_baseline_rps"] = round(
            summary[level]["concat"]["rps"] / summary[level]["per_request"]["rps"], 2
        )
    print(
        json.dumps(
            {
                "benchmark": "neuron_batching",
                "baseline": "per_request (same model, same queue, one forward pass per request)",
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                "seconds_per_round": args.seconds,
                "rounds": args.rounds,
                "results": summary,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
