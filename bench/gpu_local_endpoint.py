"""GPU benchmark: a TorchScript ResNet-50 through the local endpoint against raw torch.

Run on a machine with an NVIDIA GPU, torch and torchvision (random weights,
nothing is downloaded):

    python bench/gpu_local_endpoint.py [--seconds S] [--rounds R] [--out FILE]
    python bench/gpu_local_endpoint.py --quick    # a smoke run, no GPU needed

In one run it traces torchvision's ResNet-50, packages it with
`deploy package` as a `pytorch_libtorch` model with a `KIND_GPU` instance
group and `dynamic_batching` (the python-backend adapter runs the requests
Triton gathers as one model call), serves it on the local endpoint and
measures, for requests of batch 1 and 8 at concurrency 1, 8 and 32:

- `endpoint`: images/s through the front end. Each client is a keep-alive
  HTTP connection sending pre-encoded binary-protocol requests; clients run
  in up to 8 worker processes so the load generator is not the bottleneck
  (its CPU per request is reported). Also p50/p99 latency and the mean
  number of images in the model call that computed a request (the model
  returns its call's batch size as a second output);
- `raw_torch` (the baseline, same run, same GPU, same TorchScript file):
  as many threads as the concurrency, each calling the model on its own
  batch from host memory (`from_numpy(x).to(cuda)`, the model, `.cpu()`),
  which is what the adapter does per model call;
- `raw_torch_ceiling`: one thread, batch `max_batch_size`: what the GPU
  gives this model at the largest batch Triton may form.

Rounds alternate endpoint and raw torch so drift hits both alike. Every
round's numbers are kept; each cell's ratio is given per round (against the
same round's raw torch), as a median and as the worst round. The target: with
ONE instance, at batch 8 and concurrency 8, the endpoint gives at least 0.9x
raw torch's images/s in every round of a run of at least 3 rounds. Also
reported: each cell against `raw_torch_ceiling`, and the latency the endpoint
adds at batch 1 and concurrency 1 (its p50 less raw torch's time per call,
one thread). In the same rounds, the target cell's requests also go to a
python-backend model that does no work (`no_work`: ResNet-50's answer shapes,
zeros), through the same front end and tritonserver, against which both the
endpoint and raw torch are reported. It is not a ceiling: it answers from
`execute`, which holds its one instance until its answers are back in
tritonserver, and the adapter's pipeline does not (the ResNet-50 endpoint
often carries more). Both models also take the same requests straight at
tritonserver's SageMaker port, past the front end (`direct`: the path a
SageMaker host's own HTTP hop takes to the container, with nothing of ours in
front), so the front end's share is measured in the same rounds. The JSON
names the machine, driver, torch and the git commit.
`--profile-adapter` has the adapter log where each model call's time goes
(DEPLOY_ADAPTER_PROFILE, every 100 calls; kept as `adapter_profile`), and
`--triton-log FILE` keeps tritonserver's log. `--model small` swaps
ResNet-50 for a small convolutional net (a smoke run on a machine without
torchvision or a GPU; its numbers are not the benchmark's); `--quick` is that
with short cells, one round and one instance.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import platform
import re
import socket
import statistics
import subprocess
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

MAX_BATCH = 64
TARGET_CONCURRENCY = 8
TARGET_RATIO = 0.9
TARGET_CELL = "x1/batch_8/concurrency_8"  # one instance
TARGET_MIN_ROUNDS = 3
LATENCY_CELL = "batch_1/concurrency_1"
MAX_CLIENT_PROCESSES = 8
INVOCATIONS = "/endpoints/local/invocations"  # the front end's; `direct` cells skip it
# ResNet-50's tensors (and the no-work model's), with the default dynamic batching.
TENSORS = """
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1000 ] },
         { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { }
"""
CONFIG = """
name: "{name}"
platform: "pytorch_libtorch"
max_batch_size: {max_batch}
instance_group [ {{ kind: KIND_GPU count: {instances} }} ]
"""
PARAMETER = 'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'
# The same requests to a model that does no work (a reference, not a ceiling: see above).
NO_WORK = "no_work"
NO_WORK_CONFIG = f"""
name: "{NO_WORK}"
backend: "python"
max_batch_size: {MAX_BATCH}
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
{TENSORS}"""
NO_WORK_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    # ResNet-50's answer shapes, no work: the input's shape only (as_numpy would copy it).
    def execute(self, requests):
        sizes = [pb_utils.get_input_tensor_by_name(r, "INPUT__0").shape()[0] for r in requests]
        rows = float(sum(sizes))
        return [
            pb_utils.InferenceResponse(
                output_tensors=[
                    pb_utils.Tensor("OUTPUT__0", np.zeros((size, 1000), np.float32)),
                    pb_utils.Tensor("OUTPUT__1", np.full((size, 1), rows, np.float32)),
                ]
            )
            for size in sizes
        ]
"""


def _connect(host: str, port: str, timeout: float) -> http.client.HTTPConnection:
    """A keep-alive connection with Nagle off, as urllib3 (the SDK's transport) opens them:
    http.client sends the head and the body in two writes, and with Nagle on the
    body waits for the server's delayed ACK of the head."""
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    connection.connect()
    assert connection.sock is not None
    connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return connection


def invoke(
    connection: http.client.HTTPConnection, target: str, request: Any
) -> tuple[int, bytes, str]:
    """POST an encoded request (deploy.client.encode) for `target` to the local endpoint:
    the answer's status, body and Content-Type."""
    connection.request(
        "POST",
        INVOCATIONS,
        body=request.body,
        headers={"Content-Type": request.content_type, "X-Amzn-SageMaker-Target-Model": target},
    )
    response = connection.getresponse()
    return response.status, response.read(), response.getheader("Content-Type", "")


def _images(batch: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, 3, 224, 224), dtype=np.float32)


# -- the model -----------------------------------------------------------------
def write_model(path: Path, kind: str) -> str:
    """Trace the network (random weights) and save it with a batch-size output."""
    import torch

    torch.manual_seed(0)
    if kind == "resnet50":
        import torchvision

        network = torchvision.models.resnet50(weights=None).eval()
        description = "torchvision resnet50 (random weights), traced, fp32"
    else:
        network = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 7, stride=4),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
            torch.nn.Linear(16, 1000),
        ).eval()
        description = "small convolutional net (smoke run), traced, fp32"
    with torch.no_grad():
        traced = torch.jit.trace(network, torch.from_numpy(_images(1)))

    class WithCallSize(torch.nn.Module):
        """The traced network, plus the size of the batch it ran (per row)."""

        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            rows = x.shape[0]
            return self.inner(x), torch.zeros(rows, 1, device=x.device) + rows

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.script(WithCallSize(traced))
    scripted.save(str(path))
    return description


def write_repository(
    root: Path, kind: str, instance_counts: list[int], parameters: dict[str, str] | None = None
) -> tuple[Path, str]:
    names = {count: f"resnet50_x{count}" for count in instance_counts}
    first = root / names[instance_counts[0]] / "1" / "model.pt"
    first.parent.mkdir(parents=True)
    description = write_model(first, kind)
    for count, name in names.items():
        folder = root / name
        (folder / "1").mkdir(parents=True, exist_ok=True)
        if not (folder / "1" / "model.pt").exists():
            (folder / "1" / "model.pt").write_bytes(first.read_bytes())
        (folder / "config.pbtxt").write_text(
            CONFIG.format(name=name, max_batch=MAX_BATCH, instances=count)
            + TENSORS
            + "".join(
                PARAMETER.format(key=key, value=value) for key, value in (parameters or {}).items()
            )
        )
    (root / NO_WORK / "1").mkdir(parents=True)
    (root / NO_WORK / "config.pbtxt").write_text(NO_WORK_CONFIG)
    (root / NO_WORK / "1" / "model.py").write_text(NO_WORK_MODEL)
    return first, description


# -- load through the endpoint -------------------------------------------------
def _client_process(
    url: str,
    path: str,
    target: str,
    batch: int,
    threads: int,
    warmup: float,
    seconds: float,
    ready: Any,
    go: Any,
    results: Any,
) -> None:
    host, port = url.removeprefix("http://").split(":")
    request = encode({"INPUT__0": _images(batch)})
    headers = {"Content-Type": request.content_type, "X-Amzn-SageMaker-Target-Model": target}
    latencies: list[list[float]] = [[] for _ in range(threads)]
    call_sizes: list[float] = [0.0] * threads
    failures: list[str] = []
    start_at = [0.0]

    def client(index: int) -> None:
        connection = _connect(host, port, 120)
        measure_from = start_at[0] + warmup
        stop = measure_from + seconds
        while True:
            sent = time.perf_counter()
            if sent >= stop:
                break
            connection.request("POST", path, body=request.body, headers=headers)
            response = connection.getresponse()
            body = response.read()
            done = time.perf_counter()
            if response.status != 200:
                failures.append(f"HTTP {response.status}: {body[:300]!r}")
                return
            if measure_from <= done <= stop:  # throughput: completions in the window
                decoded = decode(body, response.getheader("Content-Type", ""))
                latencies[index].append(done - sent)
                call_sizes[index] += float(np.asarray(decoded.outputs["OUTPUT__1"])[0, 0])
        connection.close()

    ready.put(os.getpid())
    go.wait()
    start_at[0] = time.perf_counter()
    workers = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    cpu_start = time.process_time()
    for worker in workers:
        worker.join()
    cpu = time.process_time() - cpu_start  # includes warm-up: an upper bound per request
    all_latencies = [value for values in latencies for value in values]
    results.put(
        {
            "failures": failures,
            "latencies": all_latencies,
            "call_sizes": sum(call_sizes),
            "cpu_s": cpu,
            "requests_all": len(all_latencies),
        }
    )


def drive_endpoint(
    url: str,
    target: str,
    batch: int,
    concurrency: int,
    warmup: float,
    seconds: float,
    path: str = INVOCATIONS,
) -> dict[str, Any]:
    """Load `url` with `concurrency` clients; `path`: the front end's invocations, or a
    model's path on tritonserver's SageMaker port (`direct`)."""
    context = multiprocessing.get_context("spawn")
    processes = min(concurrency, MAX_CLIENT_PROCESSES)
    shares = [concurrency // processes + (i < concurrency % processes) for i in range(processes)]
    ready, results, go = context.Queue(), context.Queue(), context.Event()
    workers = [
        context.Process(
            target=_client_process,
            args=(url, path, target, batch, share, warmup, seconds, ready, go, results),
        )
        for share in shares
    ]
    for worker in workers:
        worker.start()
    for _ in workers:
        ready.get(timeout=120)
    server_cpu = time.process_time()  # this process runs the front end
    go.set()
    reports = [results.get(timeout=warmup + seconds + 180) for _ in workers]
    server_cpu = time.process_time() - server_cpu
    for worker in workers:
        worker.join(30)
    failures = [failure for report in reports for failure in report["failures"]]
    if failures:
        raise SystemExit(f"{target} batch {batch} concurrency {concurrency}: {failures[0]}")
    latencies = sorted(value for report in reports for value in report["latencies"])
    requests = len(latencies)
    if requests == 0:
        raise SystemExit(f"{target}: no request finished inside the {seconds} s window")
    all_requests = max(requests, 1)
    return {
        "images_per_s": round(requests * batch / seconds, 1),
        "requests": requests,
        "p50_ms": round(latencies[requests // 2] * 1e3, 2),
        "p99_ms": round(latencies[max(0, int(requests * 0.99) - 1)] * 1e3, 2),
        "mean_images_per_model_call": round(
            sum(report["call_sizes"] for report in reports) / requests, 1
        ),
        "client_cpu_ms_per_request": round(
            sum(report["cpu_s"] for report in reports) / all_requests * 1e3, 3
        ),
        "front_end_process_cpu_ms_per_request": round(server_cpu / all_requests * 1e3, 3),
    }


# -- raw torch -----------------------------------------------------------------
class RawTorch:
    """The same TorchScript file called directly, from host memory, on the same device."""

    def __init__(self, model_file: Path) -> None:
        import torch

        self.torch = torch
        self.device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            self.module = torch.jit.load(str(model_file), map_location=self.device).eval()

    def call(self, images: np.ndarray) -> np.ndarray:
        torch = self.torch
        with torch.inference_mode():
            logits, _ = self.module(torch.from_numpy(images).to(self.device))
            return logits.cpu().numpy()

    def drive(self, batch: int, concurrency: int, warmup: float, seconds: float) -> dict[str, Any]:
        counts = [0] * concurrency
        start = time.perf_counter() + 0.05
        measure_from, stop = start + warmup, start + warmup + seconds

        def worker(index: int) -> None:
            images = _images(batch, seed=index)
            while time.perf_counter() < start:
                time.sleep(0.001)
            while time.perf_counter() < stop:
                self.call(images)
                if measure_from <= time.perf_counter() <= stop:
                    counts[index] += 1

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return {"images_per_s": round(sum(counts) * batch / seconds, 1), "calls": sum(counts)}


# -- the run -------------------------------------------------------------------
def _machine() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        info["nvidia_smi"] = smi.stdout.strip() or None
    except OSError:
        info["nvidia_smi"] = None
    fields = (info["nvidia_smi"] or "").split(", ")
    info["driver"] = fields[1] if len(fields) > 1 else None
    return info


def _commit() -> dict[str, Any]:
    """The checkout's commit: from git, else the COMMIT file an exported tree carries."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
        return {"commit": head, "uncommitted_changes": bool(dirty)}
    except (OSError, subprocess.SubprocessError):
        marker = ROOT / "COMMIT"
        commit = marker.read_text().strip() if marker.is_file() else None
        return {"commit": commit, "uncommitted_changes": None, "from": "COMMIT file"}


def _per_round(served: list[dict[str, Any]], baseline: list[dict[str, Any]]) -> dict[str, Any]:
    """A cell's ratio to a baseline in each round (the same round's), median and worst."""
    ratios = [
        round(cell["images_per_s"] / base["images_per_s"], 3)
        for cell, base in zip(served, baseline, strict=True)
    ]
    return {
        "each_round": ratios,
        "median": round(statistics.median(ratios), 3),
        "worst_round": min(ratios),
    }


def _median(cells: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [key for key in cells[0] if isinstance(cells[0][key], (int, float))]
    merged: dict[str, Any] = {
        key: round(statistics.median(cell[key] for cell in cells), 3) for key in keys
    }
    merged["images_per_s_each_round"] = [cell["images_per_s"] for cell in cells]
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="measured seconds per cell")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds before each cell")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--instances", default="1,2", help="instance_group counts to serve")
    parser.add_argument("--model", choices=("resnet50", "small"), default="resnet50")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument(
        "--profile-adapter",
        action="store_true",
        help="have the adapter log where its time goes (DEPLOY_ADAPTER_PROFILE), kept in the JSON",
    )
    parser.add_argument(
        "--adapter-parameter",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config parameter for the adapter, e.g. DEPLOY_ADAPTER_PIPELINE=0 (repeatable)",
    )
    parser.add_argument(
        "--triton-log", type=Path, help="keep tritonserver's log here (else removed at the end)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: small model, short cells, one round"
    )
    args = parser.parse_args()
    if args.quick:
        args.model, args.seconds, args.warmup, args.rounds = "small", 0.5, 0.2, 1
        args.batches, args.concurrency, args.instances = "1,8", "1,8", "1"
    batches = [int(value) for value in args.batches.split(",")]
    levels = [int(value) for value in args.concurrency.split(",")]
    instance_counts = [int(value) for value in args.instances.split(",")]

    with tempfile.TemporaryDirectory(prefix="gpu-bench-") as scratch:
        root = Path(scratch)
        parameters = dict(item.split("=", 1) for item in args.adapter_parameter)
        if args.profile_adapter:
            parameters["DEPLOY_ADAPTER_PROFILE"] = "1"
        model_file, description = write_repository(
            root / "repo", args.model, instance_counts, parameters
        )
        package_repository(root / "repo", root / "store")
        manifest = json.loads((root / "store" / "manifest.json").read_text())["models"]
        targets = {
            count: manifest[f"resnet50_x{count}"]["target_model"] for count in instance_counts
        }
        no_work = manifest[NO_WORK]["target_model"]
        raw = RawTorch(model_file)
        with LocalEndpoint(
            root / "store",
            work_dir=root / "work",
            # `direct` cells call tritonserver's port from this user's client processes.
            options=EndpointOptions(
                invoke_timeout=120, triton_log=args.triton_log, triton_clients="user"
            ),
        ) as endpoint:
            # Load every variant, and check the served answer against raw torch's.
            probe = _images(8, seed=7)
            request = encode({"INPUT__0": probe}, outputs=["OUTPUT__0"])
            host, port = endpoint.url.removeprefix("http://").split(":")
            differences = {}
            for count, target in targets.items():
                connection = _connect(host, port, 300)
                status, body, content_type = invoke(connection, target, request)
                if status != 200:
                    raise SystemExit(f"{target}: HTTP {status}: {body[:500]!r}")
                served = np.asarray(decode(body, content_type).outputs["OUTPUT__0"])
                differences[f"x{count}"] = float(np.max(np.abs(served - raw.call(probe))))
                connection.close()
            # tritonserver's SageMaker port, and the path there of each model (`direct`).
            connection = _connect(host, port, 300)
            status, body, _ = invoke(connection, no_work, request)
            if status != 200:
                raise SystemExit(f"{NO_WORK}: HTTP {status}: {body[:500]!r}")
            connection.request("GET", "/models")
            listing = json.loads(connection.getresponse().read())
            connection.close()
            triton_url = f"http://127.0.0.1:{listing['triton_port']}"
            direct_path = {
                model["target_model"]: f"/models/{model['hash']}/invoke"
                for model in listing["loaded"]
            }
            # The target cell's requests on the serving path alone: the no-work model
            # through the front end and straight at tritonserver, ResNet-50 straight.
            serving_path_cells = {
                NO_WORK: (endpoint.url, INVOCATIONS, no_work),
                f"{NO_WORK}/direct": (triton_url, direct_path[no_work], no_work),
            }
            if 1 in targets:  # the target cell's model (one instance) is served
                serving_path_cells["x1/direct"] = (triton_url, direct_path[targets[1]], targets[1])
            log = Path(endpoint.supervisor.log_path).read_text(errors="replace")
            adapter_lines = [
                re.sub(r"^.*deploy adapter: ", "", line.strip()).rstrip('"')
                for line in log.splitlines()
                if "deploy adapter:" in line
            ]
            if raw.device.type == "cuda" and any(" on cpu " in line for line in adapter_lines):
                raise SystemExit(
                    "the adapter runs the model on the CPU although this machine has a GPU "
                    f"(tritonserver log: {endpoint.supervisor.log_path}); nothing is measured"
                )

            served_rounds: dict[str, list[dict[str, Any]]] = {}
            raw_rounds: dict[str, list[dict[str, Any]]] = {}
            ceiling: list[dict[str, Any]] = []
            serving_path_rounds: dict[str, list[dict[str, Any]]] = {
                name: [] for name in serving_path_cells
            }
            for round_index in range(args.rounds):
                order = ["endpoint", "raw"] if round_index % 2 == 0 else ["raw", "endpoint"]
                for part in order:
                    for batch in batches:
                        for level in levels:
                            if part == "raw":
                                key = f"batch_{batch}/concurrency_{level}"
                                raw_rounds.setdefault(key, []).append(
                                    raw.drive(batch, level, args.warmup, args.seconds)
                                )
                                continue
                            for count, target in targets.items():
                                key = f"x{count}/batch_{batch}/concurrency_{level}"
                                cell = drive_endpoint(
                                    endpoint.url, target, batch, level, args.warmup, args.seconds
                                )
                                served_rounds.setdefault(key, []).append(cell)
                                print(key, cell, file=sys.stderr, flush=True)
                            if f"x1/batch_{batch}/concurrency_{level}" != TARGET_CELL:
                                continue
                            for name, (url, path, target) in serving_path_cells.items():
                                cell = drive_endpoint(
                                    url, target, batch, level, args.warmup, args.seconds, path
                                )
                                serving_path_rounds[name].append(cell)
                                print(name, cell, file=sys.stderr, flush=True)
                ceiling.append(raw.drive(MAX_BATCH, 1, args.warmup, args.seconds))
            log = Path(endpoint.supervisor.log_path).read_text(errors="replace")
            profile_lines = [
                re.sub(r"^.*deploy adapter: ", "", line.strip()).rstrip('"')
                for line in log.splitlines()
                if "deploy adapter: profile" in line
            ]

    served = {key: _median(cells) for key, cells in served_rounds.items()}
    raw_median = {key: _median(cells) for key, cells in raw_rounds.items()}
    ratios = {
        key: round(cell["images_per_s"] / raw_median[key.split("/", 1)[1]]["images_per_s"], 3)
        for key, cell in served.items()
    }
    by_round = {
        key: _per_round(cells, raw_rounds[key.split("/", 1)[1]])
        for key, cells in served_rounds.items()
    }
    against_ceiling = {key: _per_round(cells, ceiling) for key, cells in served_rounds.items()}
    requests_at_target = TARGET_CELL.split("/", 1)[1]  # the cell without its instances
    serving_path = {}
    no_work_rounds = serving_path_rounds[NO_WORK]
    if no_work_rounds and TARGET_CELL in served_rounds:
        raw_at_target = raw_rounds[requests_at_target]
        no_work_direct = serving_path_rounds[f"{NO_WORK}/direct"]
        endpoint_direct = serving_path_rounds["x1/direct"]
        serving_path = {
            "no_work_rounds": no_work_rounds,
            "no_work_direct_rounds": no_work_direct,
            "endpoint_direct_rounds": endpoint_direct,
            "ratio_endpoint_to_no_work_by_round": _per_round(
                served_rounds[TARGET_CELL], no_work_rounds
            ),
            "ratio_raw_torch_to_no_work_by_round": _per_round(raw_at_target, no_work_rounds),
            # tritonserver alone, no front end: with no model work, and with ResNet-50.
            "ratio_raw_torch_to_no_work_direct_by_round": _per_round(raw_at_target, no_work_direct),
            "ratio_endpoint_direct_to_raw_torch_by_round": _per_round(
                endpoint_direct, raw_at_target
            ),
            "ratio_endpoint_to_endpoint_direct_by_round": _per_round(
                served_rounds[TARGET_CELL], endpoint_direct
            ),
        }
    at_target = {
        key: value
        for key, value in ratios.items()
        if key.endswith(f"/concurrency_{TARGET_CONCURRENCY}")
    }
    target_rounds = by_round.get(TARGET_CELL)
    added_latency = {}
    for count in instance_counts:
        key = f"x{count}/{LATENCY_CELL}"
        if key in served_rounds and LATENCY_CELL in raw_rounds:
            # One thread: raw torch's time per call is the measured seconds over its calls.
            raw_ms = [args.seconds / cell["calls"] * 1e3 for cell in raw_rounds[LATENCY_CELL]]
            added = [
                round(cell["p50_ms"] - raw, 2)
                for cell, raw in zip(served_rounds[key], raw_ms, strict=True)
            ]
            added_latency[key] = {
                "endpoint_p50_ms_each_round": [cell["p50_ms"] for cell in served_rounds[key]],
                "raw_torch_ms_per_call_each_round": [round(value, 2) for value in raw_ms],
                "added_ms_each_round": added,
                "added_ms_median": round(statistics.median(added), 2),
                "added_ms_worst_round": max(added),
            }
    result = {
        "machine": _machine(),
        "git": _commit(),
        "command": " ".join(sys.argv),
        "model": description,
        "config": {
            "max_batch_size": MAX_BATCH,
            "dynamic_batching": "default (max_queue_delay_microseconds 0)",
            "instance_group": f"KIND_GPU, count {instance_counts}",
            "adapter_parameters": parameters,
        },
        "seconds_per_cell": args.seconds,
        "warmup_s": args.warmup,
        "rounds": args.rounds,
        "adapter_log": adapter_lines[:4],
        **({"adapter_profile": profile_lines} if args.profile_adapter else {}),
        "max_abs_diff_endpoint_vs_raw_torch": differences,
        "endpoint_median": served,
        "endpoint_rounds": served_rounds,
        "raw_torch_rounds": raw_rounds,
        "raw_torch_ceiling_rounds": ceiling,
        "raw_torch_baseline_median": raw_median,
        "raw_torch_ceiling_one_thread": {
            f"batch_{MAX_BATCH}": _median(ceiling),
        },
        "ratio_endpoint_to_raw_torch": ratios,
        "ratio_endpoint_to_raw_torch_by_round": by_round,
        "ratio_endpoint_to_raw_torch_ceiling_by_round": against_ceiling,
        "added_latency_batch_1_concurrency_1": added_latency,
        # The target cell's requests to a model doing no work, alternating with it.
        **({f"serving_path_{requests_at_target}": serving_path} if serving_path else {}),
        "ratios_at_concurrency_8": at_target,
        "target": {
            "cell": TARGET_CELL,
            "min_ratio_every_round": TARGET_RATIO,
            "min_rounds": TARGET_MIN_ROUNDS,
            "rounds": target_rounds,
            "met": bool(
                target_rounds
                and args.rounds >= TARGET_MIN_ROUNDS
                and target_rounds["worst_round"] >= TARGET_RATIO
            ),
        },
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
