"""Adapter batching benchmark: a TorchScript model through the local endpoint.

Prints one JSON document. In this same run it measures, for one TorchScript
MLP served by the python-backend adapter:

- `endpoint`: rows/s and the mean rows per model call at concurrency C
  (each client sends batch-1 requests over its own keep-alive connection)
  for the model with `dynamic_batching` (the requests Triton gathers run as
  one model call) and for the same model without it (every request alone,
  one call each: how the adapter ran every request before);
- `raw_torch`: the same TorchScript file called directly in this process,
  rows/s at batch 1 and at batch C (the baseline);

torch runs one intra-op thread everywhere (`INTRA_OP_THREAD_COUNT: 1`, the
PyTorch backend's parameter, which the adapter honours): on a small machine
whose cores the client and the server share, torch's default of one thread
per core makes a batched call slower than batch-1 calls.
- ratios of the endpoint to raw torch at batch 1.

The model reports the batch size of the call that computed each row, so
rows per call is read from the answers, not estimated. Client, front end
and tritonserver share this machine's cores.

`--quick` is a smoke run that checks only that the benchmark works
(tests/functional/test_bench_quick.py runs it).

    python bench/adapter_batching.py [--seconds S] [--concurrency C] [--rounds R] [--quick]
"""

from __future__ import annotations

import argparse
import http.client
import json
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

from deploy.client import decode, encode  # noqa: E402
from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint  # noqa: E402
from deploy.packaging import package_repository  # noqa: E402

WIDTH = 512
HIDDEN = 8192  # large enough that the model, not HTTP, is most of a call
CONFIG = """
name: "{name}"
platform: "pytorch_libtorch"
max_batch_size: 64
input [ {{ name: "INPUT__0" data_type: TYPE_FP32 dims: [ {width} ] }} ]
output [ {{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ {width} ] }},
         {{ name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
parameters {{ key: "INTRA_OP_THREAD_COUNT" value {{ string_value: "1" }} }}
{batching}
"""


def write_repository(root: Path) -> Path:
    import torch

    class Mlp(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up = torch.nn.Linear(WIDTH, HIDDEN)
            self.down = torch.nn.Linear(HIDDEN, WIDTH)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            rows = x.shape[0]
            return self.down(torch.relu(self.up(x))), torch.full((rows, 1), float(rows))

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.script(Mlp())
    for name, batching in (
        ("mlp_batched", "dynamic_batching { max_queue_delay_microseconds: 500 }"),
        ("mlp_alone", ""),
    ):
        folder = root / name
        (folder / "1").mkdir(parents=True)
        (folder / "config.pbtxt").write_text(
            CONFIG.format(name=name, width=WIDTH, batching=batching)
        )
        scripted.save(str(folder / "1" / "model.pt"))
    return root


def drive(url: str, target: str, seconds: float, concurrency: int) -> dict[str, Any]:
    host, port = url.removeprefix("http://").split(":")
    row = np.random.default_rng(1).standard_normal((1, WIDTH), dtype=np.float32)
    request = encode({"INPUT__0": row})
    headers = {"Content-Type": request.content_type, "X-Amzn-SageMaker-Target-Model": target}
    stop = time.perf_counter() + seconds
    counts: list[int] = [0] * concurrency
    call_sizes: list[float] = [0.0] * concurrency
    failures: list[str] = []

    def client(index: int) -> None:
        connection = http.client.HTTPConnection(host, int(port), timeout=60)
        while time.perf_counter() < stop:
            connection.request(
                "POST", "/endpoints/local/invocations", body=request.body, headers=headers
            )
            response = connection.getresponse()
            body = response.read()
            if response.status != 200:
                failures.append(f"HTTP {response.status}: {body[:200]!r}")
                return
            decoded = decode(body, response.getheader("Content-Type"))
            counts[index] += 1
            call_sizes[index] += float(np.asarray(decoded.outputs["OUTPUT__1"])[0, 0])
        connection.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise SystemExit(f"{target}: {failures[0]}")
    total = sum(counts)
    return {
        "rows_per_s": round(total / elapsed, 1),
        "mean_rows_per_model_call": round(sum(call_sizes) / total, 2),
        "requests": total,
    }


def raw_torch(model_file: Path, seconds: float, batch: int) -> float:
    import torch

    torch.set_num_threads(1)  # as the served copies (INTRA_OP_THREAD_COUNT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = torch.jit.load(str(model_file)).eval()
    x = torch.from_numpy(np.random.default_rng(1).standard_normal((batch, WIDTH), np.float32))
    rows = 0
    with torch.inference_mode():
        module(x)
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            module(x)
            rows += batch
    return round(rows / (time.perf_counter() - started), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one 0.5 s round (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.concurrency, args.rounds = 0.5, 4, 1
    raw_names = ("batch_1", f"batch_{args.concurrency}")
    runs: dict[str, list[dict[str, Any]]] = {"mlp_batched": [], "mlp_alone": []}
    raw: dict[str, list[float]] = {name: [] for name in raw_names}
    with tempfile.TemporaryDirectory(prefix="adapter-batching-") as scratch:
        root = Path(scratch)
        repository = write_repository(root / "repo")
        model_file = repository / "mlp_batched" / "1" / "model.pt"
        package_repository(repository, root / "store")
        manifest = json.loads((root / "store" / "manifest.json").read_text())["models"]
        with LocalEndpoint(
            root / "store", work_dir=root / "work", options=EndpointOptions()
        ) as endpoint:
            for name in runs:  # load and warm up
                drive(endpoint.url, manifest[name]["target_model"], 1.0, args.concurrency)
            # Rounds alternate between all four so background load hits them alike.
            for _ in range(args.rounds):
                for name in runs:
                    target = manifest[name]["target_model"]
                    runs[name].append(drive(endpoint.url, target, args.seconds, args.concurrency))
                raw["batch_1"].append(raw_torch(model_file, args.seconds, 1))
                raw[raw_names[1]].append(raw_torch(model_file, args.seconds, args.concurrency))
    endpoint_results = {
        name: {
            "rows_per_s": statistics.median(r["rows_per_s"] for r in results),
            "mean_rows_per_model_call": statistics.median(
                r["mean_rows_per_model_call"] for r in results
            ),
            "rows_per_s_each_round": [r["rows_per_s"] for r in results],
        }
        for name, results in runs.items()
    }
    torch_rows = {name: statistics.median(values) for name, values in raw.items()}
    batch_1 = torch_rows["batch_1"]
    result = {
        "machine": {"python": platform.python_version(), "processor": platform.machine()},
        "model": f"TorchScript MLP {WIDTH}->{HIDDEN}->{WIDTH}, batch-1 requests",
        "concurrency": args.concurrency,
        "seconds_per_round": args.seconds,
        "rounds": args.rounds,
        "endpoint_median": endpoint_results,
        "raw_torch_baseline_rows_per_s_median": torch_rows,
        "raw_torch_rows_per_s_each_round": raw,
        "ratio_to_raw_torch_batch_1": {
            name: round(values["rows_per_s"] / batch_1, 3)
            for name, values in endpoint_results.items()
        },
        "batched_over_alone": round(
            endpoint_results["mlp_batched"]["rows_per_s"]
            / endpoint_results["mlp_alone"]["rows_per_s"],
            3,
        ),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
