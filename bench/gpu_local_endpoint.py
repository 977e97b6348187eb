"""GPU check: a TorchScript model with a KIND_GPU instance group runs on the GPU
through the local endpoint, and gives the same answer as on the CPU.

Run on a machine with an NVIDIA GPU, over a store written by `deploy package`
that holds `classifier_gpu` (KIND_GPU) and `classifier_cpu` (KIND_CPU), two
copies of the example classifier:

    python bench/gpu_local_endpoint.py STORE_DIR

Prints one JSON document: the device the adapter reported in Triton's log,
the largest difference between the GPU and CPU outputs, and per-call latency
of both through the front end (the CPU copy is the baseline, same run).
"""

from __future__ import annotations

import http.client
import json
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from deploy.client import decode, encode
from deploy.local.endpoint import EndpointOptions, LocalEndpoint


def _call(url: str, endpoint: str, target: str, images: np.ndarray) -> np.ndarray:
    request = encode({"INPUT__0": images}, outputs=["OUTPUT__0"])
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=120)
    connection.request(
        "POST",
        f"/endpoints/{endpoint}/invocations",
        body=request.body,
        headers={"Content-Type": request.content_type, "X-Amzn-SageMaker-Target-Model": target},
    )
    response = connection.getresponse()
    body = response.read()
    if response.status != 200:
        raise SystemExit(f"{target}: HTTP {response.status}: {body[:500]!r}")
    decoded = decode(body, response.getheader("Content-Type", "application/json"))
    return np.array(decoded.outputs["OUTPUT__0"])


def _latency(url: str, endpoint: str, target: str, images: np.ndarray, rounds: int) -> dict:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        _call(url, endpoint, target, images)
        times.append(time.perf_counter() - start)
    times.sort()
    return {
        "p50_ms": round(statistics.median(times) * 1e3, 3),
        "p99_ms": round(times[int(len(times) * 0.99) - 1] * 1e3, 3),
    }


def main(store: Path) -> None:
    manifest = json.loads((store / "manifest.json").read_text())["models"]
    rng = np.random.default_rng(0)
    images = rng.standard_normal((8, 3, 32, 32), dtype=np.float32)
    with LocalEndpoint(store, options=EndpointOptions(endpoint_name="gpu-check")) as endpoint:
        gpu_target = manifest["classifier_gpu"]["target_model"]
        cpu_target = manifest["classifier_cpu"]["target_model"]
        on_gpu = _call(endpoint.url, endpoint.endpoint_name, gpu_target, images)
        on_cpu = _call(endpoint.url, endpoint.endpoint_name, cpu_target, images)
        log = Path(endpoint.supervisor.log_path).read_text(errors="replace")
        devices = sorted(set(re.findall(r"(cuda:\d+|on cpu|device cpu)", log)))
        adapter_lines = [line.strip()[-200:] for line in log.splitlines() if "adapter" in line]
        result = {
            "devices_in_log": devices,
            "adapter_log": adapter_lines[:6],
            "max_abs_diff_gpu_vs_cpu": float(np.max(np.abs(on_gpu - on_cpu))),
            "batch": list(images.shape),
            "gpu_instance": _latency(endpoint.url, endpoint.endpoint_name, gpu_target, images, 200),
            "cpu_instance_baseline": _latency(
                endpoint.url, endpoint.endpoint_name, cpu_target, images, 200
            ),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
