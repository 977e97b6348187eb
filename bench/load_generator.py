"""`deploy bench`'s own ceiling: its load generator against a no-op endpoint.

Prints one JSON document. A no-op SageMaker runtime (its own process,
uvloop, one fixed Triton binary answer for every InvokeEndpoint, nothing
parsed beyond Content-Length) is called, in this same run, by:

- `deploy_bench`: `deploy.bench.benchmark` as `deploy bench` runs it
  (worker processes, `Endpoint.infer` per call: encode, SigV4 when
  credentials exist, HTTP, decode), closed loop at concurrency 1, 8 and 32;
- `raw_http` (the baseline): one uvloop process writing a pre-built
  keep-alive HTTP/1.1 request and reading the answer, no SDK at all, same
  concurrency and body.

For each it reports requests/s and the client's CPU per request (what
bounds the load one core can offer: 1 / cpu_ms_per_request x 1000 req/s),
and (raw HTTP runs) the no-op server's CPU per request. On a machine where client and
server share a few cores, requests/s is bounded by the sum of their CPU per
request; the client's share is the number to watch. Bodies: a small request
(two FP32 [1, 4] tensors) and a 1 MB one.

`--quick` (0.2 s steps) finishes in seconds and checks only that the
benchmark runs (tests/functional/test_bench_quick.py runs it).

    python bench/load_generator.py [--quick] [--seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deploy.bench.benchmark import benchmark  # noqa: E402
from deploy.bench.runner import Plan, Step  # noqa: E402
from deploy.bench.target import Target  # noqa: E402
from deploy.client import encode  # noqa: E402
from deploy.client.codec import encode_input, encode_response  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from local_endpoint import cpu_seconds, load, self_cpu  # noqa: E402

CONCURRENCY = (1, 8, 32)
SIZES = {"small": (1, 4), "1MB": (1, 262144)}


def warmup(seconds: float) -> float:
    """Seconds of warm-up before each measured step: 0.5, less for shorter steps."""
    return min(0.5, seconds)


# -- the no-op endpoint (runs in its own process) ----------------------------------------
def serve_noop(port: int) -> None:
    answer = encode_response([encode_input("OUTPUT0", np.zeros((1, 4), np.float32))])
    head = (
        f"HTTP/1.1 200 OK\r\nContent-Type: {answer.content_type}\r\n"
        f"Content-Length: {len(answer.body)}\r\n"
        "x-Amzn-Invoked-Production-Variant: AllTraffic\r\n\r\n"
    )
    reply = head.encode() + answer.body

    class Noop(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.transport = transport
            self.buffer = bytearray()

        def data_received(self, data: bytes) -> None:
            self.buffer += data
            while True:
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    return
                length = 0
                for line in bytes(self.buffer[:end]).split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                if len(self.buffer) < end + 4 + length:
                    return
                del self.buffer[: end + 4 + length]
                self.transport.write(reply)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Noop, "127.0.0.1", port, backlog=1024)
        await server.serve_forever()

    import uvloop

    uvloop.run(main())


def start_noop() -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    process = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process, port
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("the no-op endpoint did not start")


# -- the two clients ------------------------------------------------------------------------
def manifest_file(folder: Path, shape: tuple[int, ...]) -> Path:
    spec = {"name": "INPUT0", "datatype": "FP32", "shape": list(shape[1:])}
    out = {"name": "OUTPUT0", "datatype": "FP32", "shape": [4]}
    entry = {"target_model": "noop-0.tar.gz", "max_batch_size": 8, "inputs": [spec]}
    path = folder / "manifest.json"
    path.write_text(json.dumps({"format": 1, "models": {"noop": {**entry, "outputs": [out]}}}))
    return path


def with_deploy_bench(
    port: int, manifest: Path, inputs: dict[str, Any], seconds: float
) -> dict[str, Any]:
    target = Target(
        endpoint="noop",
        model="noop",
        endpoint_url=f"http://127.0.0.1:{port}",
        manifest=str(manifest),
    )
    plan = Plan(tuple(Step(c) for c in CONCURRENCY), duration_s=seconds, warmup_s=warmup(seconds))
    report = benchmark(target, inputs, plan, info=None)
    return {
        f"c{step.concurrency}": {
            "req_per_s": round(step.throughput_rps, 1),
            "p50_ms": step.latency_ms["p50"],
            "p99_ms": step.latency_ms["p99"],
            "client_cpu_ms_per_request": step.client_cpu_ms_per_request,
            "client_cpu_cores": round(step.client_cpu_cores, 2),
            "client_saturated": step.client_saturated,
            "workers": report.workers,
            "errors": step.failed,
        }
        for step in report.steps
    }


def with_raw_http(
    port: int, body: bytes, content_type: str, seconds: float, server: int
) -> dict[str, Any]:
    head = (
        "POST /endpoints/noop/invocations HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Length: {len(body)}\r\nContent-Type: {content_type}\r\n"
        "X-Amzn-SageMaker-Target-Model: noop-0.tar.gz\r\n\r\n"
    )
    request = head.encode() + body
    results = {}
    for concurrency in CONCURRENCY:
        load(port, request, concurrency, warmup(seconds))
        before = (self_cpu(), cpu_seconds(server))
        run = load(port, request, concurrency, seconds)
        after = (self_cpu(), cpu_seconds(server))
        count = max(run["requests"], 1)
        results[f"c{concurrency}"] = {
            "req_per_s": run["req_per_s"],
            "p50_ms": run["p50_ms"],
            "p99_ms": run["p99_ms"],
            "client_cpu_ms_per_request": round((after[0] - before[0]) / count * 1000, 4),
            "server_cpu_ms_per_request": round((after[1] - before[1]) / count * 1000, 4),
            "errors": run["errors"],
        }
    return results


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve_noop(int(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="0.2 s per step (a smoke run)")
    parser.add_argument("--seconds", type=float, default=None)
    args = parser.parse_args()
    seconds = args.seconds or (0.2 if args.quick else 3.0)
    process, port = start_noop()
    report: dict[str, Any] = {
        "benchmark": "load_generator",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "seconds_per_step": seconds,
        "bodies": {},
    }
    try:
        with tempfile.TemporaryDirectory(prefix="bench-loadgen-") as tmp:
            for label, shape in SIZES.items():
                inputs = {"INPUT0": np.random.default_rng(0).random(shape, dtype=np.float32)}
                encoded = encode(inputs)
                manifest = manifest_file(Path(tmp), shape)
                raw = with_raw_http(port, encoded.body, encoded.content_type, seconds, process.pid)
                sdk = with_deploy_bench(port, manifest, inputs, seconds)
                report["bodies"][label] = {
                    "request_bytes": len(encoded.body),
                    "raw_http": raw,
                    "deploy_bench": sdk,
                    "deploy_bench_vs_raw_client_cpu": {
                        key: round(
                            sdk[key]["client_cpu_ms_per_request"]
                            / raw[key]["client_cpu_ms_per_request"],
                            2,
                        )
                        for key in raw
                    },
                    "deploy_bench_vs_raw_throughput": {
                        key: round(sdk[key]["req_per_s"] / raw[key]["req_per_s"], 3) for key in raw
                    },
                }
    finally:
        process.terminate()
        process.wait(10)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
