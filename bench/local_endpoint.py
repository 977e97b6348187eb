"""Local endpoint benchmark: front end vs Triton's SageMaker port, and cold load.

Prints one JSON document. In this same run it measures:

- `throughput`: requests/s and p50/p99 latency for the `addsub` example at
  concurrency 1, 8 and 32, through the front end
  (`POST /endpoints/local/invocations` + TargetModel) and straight to
  tritonserver's SageMaker port (`POST /models/<hash>/invoke`, the baseline),
  with the same keep-alive HTTP/1.1 load generator and the same binary body.
  A plain aiohttp pass-through runs as a reference in the same rounds.
  Rounds alternate between them so background load hits all alike.
  Targets: front end ≥ 80% of direct throughput at concurrency 8, ≤ 0.4 ms
  added p50 at concurrency 1.
- `cold_load`: first invocation of a ~500 MB model (fetch + sha256 + safe
  extraction + Triton load + the call) against the time to extract its
  archive alone (`deploy.local.models.archive.extract_archive`, and `tar -xzf`),
  for a model that reads all its weights in `initialize` and for one that
  memory-maps them. Target: cold load ≤ 1.5× the extract time.
- CPU per request of the client, the front-end process and tritonserver
  (with its python-backend stubs), read from /proc: req/s on a shared
  machine swing with other load; CPU per request does much less.
- `large_body`: the front end's hop with a 4.8 MB request against a minimal
  loopback hop (a byte relay: no HTTP parsing, every read written on as it
  is) in front of the same tritonserver port, both against calling that port
  directly, for a model answering a few bytes (`sum`) and one answering the
  4.8 MB back (`echo`), at concurrency 1 and 4. A hop's cost is its
  process's CPU per request and the p50 it adds over direct. Target: the
  front end's hop at most 1.3× the minimal hop's CPU per request in every
  cell; each cell reports every round, its ratio per round (rounds alternate
  the paths, so a round's paths share the machine's load), the median and
  the worst round. `--before CHECKOUT` adds a second endpoint run from
  another checkout of this repository (say, the main branch) as
  `front_end_before`, in the same rounds.

The endpoint runs as `python -m deploy serve` in its own process; client,
front end and tritonserver share this machine's cores.

    python bench/local_endpoint.py [--quick] [--seconds S] [--rounds N] [--model-mb MB]
                                   [--parts throughput,cold_load,large_body]
                                   [--before CHECKOUT]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import platform
import resource
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deploy.local.models.archive import extract_archive  # noqa: E402
from deploy.local.triton.supervisor import free_port  # noqa: E402

CONTENT_TYPE = "application/vnd.sagemaker-triton.binary+json;json-header-size={}"

BIG_MODEL = """
import os
import numpy as np
import triton_python_backend_utils as pb_utils

# read: np.fromfile (all weights into memory, like most models); mmap: np.memmap
LOAD = {load}


class TritonPythonModel:
    def initialize(self, args):
        path = os.path.join(args["model_repository"], args["model_version"], "weights.bin")
        self.weights = LOAD(path)

    def execute(self, requests):
        out = np.array([[float(self.weights[:4].sum())]], dtype=np.float32)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", out)]) for _ in requests]
"""
BIG_CONFIG = """
name: "big"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [1, 1] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [1, 1] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


def binary_body(inputs: dict[str, np.ndarray]) -> tuple[bytes, str]:
    """The body tritonclient's `generate_request_body` writes for binary inputs (and all
    outputs asked for binary), byte for byte, without importing `tritonclient.http`
    (its gevent client is not on every machine the benchmark runs on)."""
    from tritonclient.utils import np_to_triton_dtype

    header = {
        "inputs": [
            {
                "name": name,
                "shape": list(array.shape),
                "datatype": np_to_triton_dtype(array.dtype),
                "parameters": {"binary_data_size": array.nbytes},
            }
            for name, array in inputs.items()
        ],
        "parameters": {"binary_data_output": True},
    }
    head = json.dumps(header, separators=(",", ":")).encode()
    body = head + b"".join(np.ascontiguousarray(a).tobytes() for a in inputs.values())
    return body, CONTENT_TYPE.format(len(head))


# -- load generator ---------------------------------------------------------------
async def _worker(
    port: int, request: bytes, deadline: float, latencies: list[float], errors: list[int]
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    clock = time.perf_counter
    try:
        while clock() < deadline:
            started = clock()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            latencies.append(clock() - started)
            if status != 200:
                errors.append(status)
    finally:
        writer.close()


async def _drive(port: int, request: bytes, concurrency: int, seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[int] = []
    started = time.perf_counter()
    deadline = started + seconds
    await asyncio.gather(
        *(_worker(port, request, deadline, latencies, errors) for _ in range(concurrency))
    )
    elapsed = time.perf_counter() - started
    ordered = np.sort(np.array(latencies)) * 1000
    return {
        "requests": len(latencies),
        "errors": len(errors),
        "req_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(float(np.percentile(ordered, 50)), 3),
        "p99_ms": round(float(np.percentile(ordered, 99)), 3),
    }


def load(port: int, request: bytes, concurrency: int, seconds: float) -> dict[str, Any]:
    try:
        import uvloop

        return uvloop.run(_drive(port, request, concurrency, seconds))
    except ImportError:
        return asyncio.run(_drive(port, request, concurrency, seconds))


def http_request(path: str, headers: dict[str, str], body: bytes) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode() + b"\r\n" + body


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (noise-proof cost, unlike req/s)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_tree(root: int) -> list[int]:
    """`root` and all its descendants (tritonserver and its python-backend stubs)."""
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


def tree_cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError):  # a stub may just have exited
            total += cpu_seconds(pid)
    return total


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measured(
    port: int, request: bytes, concurrency: int, seconds: float, front: int, triton: list[int]
) -> dict[str, Any]:
    """One load run plus the CPU each party spent per request."""
    before = (self_cpu(), cpu_seconds(front), tree_cpu(triton))
    run = load(port, request, concurrency, seconds)
    after = (self_cpu(), cpu_seconds(front), tree_cpu(triton))
    count = max(run["requests"], 1)
    run["cpu_us_per_request"] = {
        party: round((after[i] - before[i]) / count * 1e6, 1)
        for i, party in enumerate(("client", "front_end", "triton"))
    }
    return run


# -- endpoint process ------------------------------------------------------------------
def get(port: int, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def post(port: int, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def start_endpoint(
    store: Path, log: Path, checkout: Path = ROOT
) -> tuple[subprocess.Popen[bytes], int]:
    """`deploy serve` over `store`, run from `checkout` (this one, or another's code)."""
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            # The baseline calls tritonserver's port directly, from this process.
            [
                *(sys.executable, "-m", "deploy", "serve", str(store), "--port", str(port)),
                *("--triton-clients", "user"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=checkout,
            # That checkout's code first; the dependencies wherever this run found them.
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(
                    filter(None, (str(checkout), os.environ.get("PYTHONPATH")))
                ),
            },
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if get(port, "/ping")[0] == 200:
                return process, port
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"endpoint did not start; see {log}")


# -- parts ------------------------------------------------------------------------------
def naive_proxy(port: int, triton_port: int, name: str) -> None:
    """Reference point: a plain aiohttp pass-through (web server + pooled ClientSession)."""
    from aiohttp import ClientSession, TCPConnector, web

    upstream = f"http://127.0.0.1:{triton_port}/models/{name}/invoke"

    async def invoke(request: web.Request) -> web.Response:
        session: ClientSession = request.app["session"]
        body = await request.read()
        headers = {
            "Content-Type": request.headers.get("Content-Type", ""),
            "X-Amzn-SageMaker-Target-Model": request.headers.get(
                "X-Amzn-SageMaker-Target-Model", ""
            ),
        }
        async with session.post(upstream, data=body, headers=headers) as answer:
            data = await answer.read()
            return web.Response(
                status=answer.status,
                body=data,
                headers={
                    "Content-Type": answer.headers.get("Content-Type", ""),
                    "x-Amzn-Invoked-Production-Variant": "AllTraffic",
                },
            )

    async def start(app: web.Application) -> None:
        app["session"] = ClientSession(connector=TCPConnector(limit=64))

    async def stop(app: web.Application) -> None:
        await app["session"].close()

    app = web.Application()
    app.router.add_post("/endpoints/local/invocations", invoke)
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def start_naive_proxy(triton_port: int, name: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, __file__, "--naive-proxy", str(port), str(triton_port), name],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process, port
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("the naive proxy did not start")


def throughput(store: Path, target: str, seconds: float, rounds: int, work: Path) -> dict[str, Any]:
    process, port = start_endpoint(store, work / "serve-throughput.log")
    try:
        a = np.arange(4, dtype=np.float32).reshape(1, 4)
        body, content_type = binary_body({"INPUT0": a, "INPUT1": a})
        headers = {"Content-Type": content_type, "X-Amzn-SageMaker-Target-Model": target}
        status, _ = post(port, "/endpoints/local/invocations", headers, body)
        assert status == 200, status
        listing = json.loads(get(port, "/models")[1])
        name = next(m["hash"] for m in listing["loaded"] if m["target_model"] == target)
        triton = listing["triton_port"]
        triton_tree = [pid for pid in process_tree(process.pid) if pid != process.pid]
        via_front = http_request("/endpoints/local/invocations", headers, body)
        direct = http_request(f"/models/{name}/invoke", headers, body)
        naive, naive_port = start_naive_proxy(triton, name)
        results: dict[str, Any] = {}
        for concurrency in (1, 8, 32):
            load(port, via_front, concurrency, 0.5)  # warm every path
            load(triton, direct, concurrency, 0.5)
            load(naive_port, via_front, concurrency, 0.5)
            runs: dict[str, list[dict[str, Any]]] = {
                "front_end": [],
                "direct": [],
                "naive_aiohttp_proxy": [],
            }
            for _ in range(rounds):
                runs["direct"].append(
                    measured(triton, direct, concurrency, seconds, process.pid, triton_tree)
                )
                runs["front_end"].append(
                    measured(port, via_front, concurrency, seconds, process.pid, triton_tree)
                )
                runs["naive_aiohttp_proxy"].append(
                    measured(naive_port, via_front, concurrency, seconds, naive.pid, triton_tree)
                )
            best = {k: max(v, key=lambda r: r["req_per_s"]) for k, v in runs.items()}
            results[f"c{concurrency}"] = {
                **best,
                "rounds": runs,
                "front_end_vs_direct_throughput": round(
                    best["front_end"]["req_per_s"] / best["direct"]["req_per_s"], 3
                ),
                "added_p50_ms": round(best["front_end"]["p50_ms"] - best["direct"]["p50_ms"], 3),
                "naive_proxy_vs_direct_throughput": round(
                    best["naive_aiohttp_proxy"]["req_per_s"] / best["direct"]["req_per_s"], 3
                ),
                # On 2 shared cores CPU is the limit: the throughput the CPU spent per
                # request allows, front end vs direct (immune to other load on the box).
                "cpu_bound_ratio": cpu_bound_ratio(runs),
            }
        naive.terminate()
        naive.wait(10)
        return results
    finally:
        process.send_signal(2)
        process.wait(30)


def cpu_bound_ratio(runs: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
    def total(kind: str) -> float:
        spent = [sum(r["cpu_us_per_request"].values()) for r in runs[kind]]
        return sum(spent) / len(spent)

    return {
        kind: round(total("direct") / total(kind), 3)
        for kind in ("front_end", "naive_aiohttp_proxy")
    }


LOADERS = {
    "read_all_weights": "lambda path: np.fromfile(path, dtype=np.float32)",
    "memory_mapped_weights": "lambda path: np.memmap(path, dtype=np.float32, mode='r')",
}


def write_big_archive(store: Path, megabytes: int, variant: str) -> tuple[str, Path]:
    from isal import igzip

    folder = store.parent / "big-src"
    (folder / "big" / "1").mkdir(parents=True, exist_ok=True)
    (folder / "big" / "config.pbtxt").write_text(BIG_CONFIG)
    (folder / "big" / "1" / "model.py").write_text(BIG_MODEL.replace("{load}", LOADERS[variant]))
    weights = folder / "big" / "1" / "weights.bin"
    rng = np.random.default_rng(0)
    with weights.open("wb") as out:  # float weights barely compress: random data is fair
        for _ in range(megabytes):
            out.write(rng.standard_normal(262144, dtype=np.float32).tobytes())
    target = f"big-{variant}.tar.gz"
    with (
        igzip.open(store / target, "wb", compresslevel=1) as raw,
        tarfile.open(fileobj=raw, mode="w|") as tar,
    ):
        tar.add(folder / "big", arcname="big")
    shutil.rmtree(folder)
    return target, store / target


def cold_load(store: Path, megabytes: int, work: Path) -> dict[str, Any]:
    """Both ways a model may load its weights; the archives differ only in model.py."""
    return {variant: cold_load_one(store, megabytes, work, variant) for variant in LOADERS}


def cold_load_one(store: Path, megabytes: int, work: Path, variant: str) -> dict[str, Any]:
    target, archive = write_big_archive(store, megabytes, variant)
    archive_mb = round(archive.stat().st_size / 1e6, 1)
    # Baselines: extraction alone, warm page cache (the endpoint reads the same file).
    extract_s = []
    for attempt in range(2):
        destination = work / f"extract-{attempt}" / "model"
        started = time.perf_counter()
        extract_archive(archive, destination)
        extract_s.append(time.perf_counter() - started)
        shutil.rmtree(destination.parent)
    tar_dir = work / "tar-x"
    tar_dir.mkdir()
    started = time.perf_counter()
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(tar_dir)], check=True)
    tar_s = time.perf_counter() - started
    shutil.rmtree(tar_dir)

    process, port = start_endpoint(store, work / f"serve-cold-{variant}.log")
    try:
        body, content_type = binary_body({"X": np.ones((1, 1), np.float32)})
        headers = {"Content-Type": content_type, "X-Amzn-SageMaker-Target-Model": target}
        started = time.perf_counter()
        status, answer = post(port, "/endpoints/local/invocations", headers, body)
        cold = time.perf_counter() - started
        if status != 200:
            raise SystemExit(f"cold load failed: {status} {answer[:300]!r}")
        started = time.perf_counter()
        post(port, "/endpoints/local/invocations", headers, body)
        warm = time.perf_counter() - started
        listing = json.loads(get(port, "/models")[1])
        loaded = next(m for m in listing["loaded"] if m["target_model"] == target)
    finally:
        process.send_signal(2)
        process.wait(30)
        archive.unlink()
    best_extract = min(extract_s)
    inherent = loaded["extract_s"] + loaded["triton_load_s"]
    return {
        "model_mb": megabytes,
        "archive_mb": archive_mb,
        "extract_s": round(best_extract, 3),
        "tar_xzf_s": round(tar_s, 3),
        "cold_invoke_s": round(cold, 3),
        "platform_load_s": loaded["load_seconds"],
        "platform_phases_s": {
            key: loaded[key] for key in ("fetch_s", "extract_s", "triton_load_s") if key in loaded
        },
        # What the platform adds beyond extracting and Triton loading the model
        # (the model's own initialize reads all of its weights).
        "overhead_beyond_extract_and_triton_load_s": round(cold - inherent, 3),
        "warm_invoke_ms": round(warm * 1000, 2),
        "cold_vs_extract": round(cold / best_extract, 2),
    }


# -- large bodies: the front end's hop against a minimal one --------------------------------
LARGE_FLOATS = 1_200_000  # 4.8 MB of FP32
LARGE_MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        replies = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            y = {answer}
            replies.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", y)]))
        return replies
"""
LARGE_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_FP32 dims: [-1] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [-1] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
"""
LARGE_ANSWERS = {"sum": "np.array([x.sum()], dtype=np.float32)", "echo": "x"}


def relay(port: int, upstream_port: int) -> None:
    """The minimal loopback hop: bytes from the client to tritonserver and back, as
    they come (one upstream connection per client connection, nothing parsed)."""
    import uvloop

    class Upstream(asyncio.Protocol):
        def __init__(self, client: asyncio.Transport) -> None:
            self.client = client

        def data_received(self, data: bytes) -> None:
            self.client.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            self.client.close()

    class Client(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport: asyncio.Transport = transport  # type: ignore[assignment]
            self.pending: list[bytes] = []  # what arrives before the upstream is connected
            self.upstream: asyncio.Transport | None = None
            asyncio.get_running_loop().create_task(self.connect())

        async def connect(self) -> None:
            loop = asyncio.get_running_loop()
            self.upstream, _ = await loop.create_connection(
                lambda: Upstream(self.transport), "127.0.0.1", upstream_port
            )
            self.upstream.writelines(self.pending)
            self.pending = []

        def data_received(self, data: bytes) -> None:
            if self.upstream is None:
                self.pending.append(data)
            else:
                self.upstream.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            if self.upstream is not None:
                self.upstream.close()

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Client, "127.0.0.1", port)
        await server.serve_forever()

    uvloop.run(main())


def start_relay(triton_port: int) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, __file__, "--relay", str(port), str(triton_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process, port
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("the relay did not start")


LARGE_TARGET = 1.3  # the front end's CPU per request, at most this times the minimal hop's


def large_body(
    seconds: float, rounds: int, work: Path, before: Path | None = None
) -> dict[str, Any]:
    from deploy.packaging import package_repository

    repository, store = work / "large-repo", work / "large-store"
    for name, answer in LARGE_ANSWERS.items():
        (repository / name / "1").mkdir(parents=True)
        (repository / name / "config.pbtxt").write_text(LARGE_CONFIG.format(name=name))
        (repository / name / "1" / "model.py").write_text(LARGE_MODEL.format(answer=answer))
    manifest = package_repository(repository, store).manifest
    process, port = start_endpoint(store, work / "serve-large.log")
    old: tuple[subprocess.Popen[bytes], int] | None = None
    try:
        if before is not None:
            old = start_endpoint(store, work / "serve-large-before.log", before)
        x = np.random.default_rng(0).random(LARGE_FLOATS, dtype=np.float32)
        body, content_type = binary_body({"X": x})
        results: dict[str, Any] = {"request_bytes": len(body)}
        if before is not None:
            results["before"] = {"checkout": str(before), "commit": git_commit(before)}
        for name in LARGE_ANSWERS:
            target = manifest.models[name].target_model
            headers = {"Content-Type": content_type, "X-Amzn-SageMaker-Target-Model": target}
            for endpoint_port in (port, *([old[1]] if old else [])):
                status, _ = post(endpoint_port, "/endpoints/local/invocations", headers, body)
                assert status == 200, status
            listing = json.loads(get(port, "/models")[1])
            hashed = next(m["hash"] for m in listing["loaded"] if m["target_model"] == target)
            triton_port = listing["triton_port"]
            results[name] = large_body_paths(
                process, port, triton_port, hashed, headers, body, seconds, rounds, old
            )
        return results
    finally:
        for endpoint in (process, *([old[0]] if old else [])):
            endpoint.send_signal(2)
            endpoint.wait(30)


def large_body_paths(
    endpoint: subprocess.Popen[bytes],
    port: int,
    triton_port: int,
    hashed: str,
    headers: dict[str, str],
    body: bytes,
    seconds: float,
    rounds: int,
    before: tuple[subprocess.Popen[bytes], int] | None,
) -> dict[str, Any]:
    triton_tree = [pid for pid in process_tree(endpoint.pid) if pid != endpoint.pid]
    via_front = http_request("/endpoints/local/invocations", headers, body)
    direct = http_request(f"/models/{hashed}/invoke", headers, body)
    hop, hop_port = start_relay(triton_port)
    try:
        paths = {
            "direct": (triton_port, direct, endpoint.pid),
            "minimal_hop": (hop_port, direct, hop.pid),
            "front_end": (port, via_front, endpoint.pid),
        }
        if before is not None:
            paths["front_end_before"] = (before[1], via_front, before[0].pid)
        hops = [name for name in paths if name != "direct"]
        out: dict[str, Any] = {}
        for concurrency in (1, 4):
            for where, request, _ in paths.values():
                load(where, request, concurrency, 0.5)  # warm every path
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in paths}
            for _ in range(rounds):
                for name, (where, request, pid) in paths.items():
                    runs[name].append(
                        measured(where, request, concurrency, seconds, pid, triton_tree)
                    )
            out[f"c{concurrency}"] = large_body_cell(runs, hops)
        return out
    finally:
        hop.terminate()
        hop.wait(10)


def large_body_cell(runs: dict[str, list[dict[str, Any]]], hops: list[str]) -> dict[str, Any]:
    """One cell: its rounds; each hop's CPU per request and added p50 per round;
    the front end against the minimal hop per round (median, worst); the target."""

    def hop_cpu_ms(run: dict[str, Any]) -> float:
        # measured() files the measured process's CPU under "front_end" for every hop
        return float(run["cpu_us_per_request"]["front_end"]) / 1000

    best = {name: min(r, key=lambda run: run["p50_ms"]) for name, r in runs.items()}
    cpu = {name: [hop_cpu_ms(run) for run in runs[name]] for name in hops}
    per_round = {
        name: [
            {
                "cpu_ms_per_request": round(spent, 3),
                "added_p50_ms": round(run["p50_ms"] - plain["p50_ms"], 3),
            }
            for spent, run, plain in zip(cpu[name], runs[name], runs["direct"], strict=True)
        ]
        for name in hops
    }
    ratios = {
        name: [
            round(mine / relay, 3)
            for mine, relay in zip(cpu[name], cpu["minimal_hop"], strict=True)
        ]
        for name in hops
        if name != "minimal_hop"
    }
    least = {name: round(min(cpu[name]), 3) for name in hops}
    added = {name: round(best[name]["p50_ms"] - best["direct"]["p50_ms"], 3) for name in hops}
    median = round(float(np.median(ratios["front_end"])), 3)
    worst = max(ratios["front_end"])
    cell: dict[str, Any] = {
        **best,
        "rounds": runs,
        "hop_per_round": per_round,
        "hop_cpu_ms_per_request": least,  # the least over the rounds
        "hop_added_p50_ms": added,  # the hop's best p50 minus direct's best p50
        "front_end_vs_minimal_hop_cpu": round(least["front_end"] / least["minimal_hop"], 3),
        "front_end_vs_minimal_hop_cpu_per_round": ratios["front_end"],
        "front_end_vs_minimal_hop_cpu_median_round": median,
        "front_end_vs_minimal_hop_cpu_worst_round": worst,
        "front_end_vs_minimal_hop_added_p50": round(added["front_end"] / added["minimal_hop"], 2)
        if added["minimal_hop"] > 0
        else None,
        "target": {
            "front_end_vs_minimal_hop_cpu_at_most": LARGE_TARGET,
            "met_by_median_round": median <= LARGE_TARGET,
            "met_in_every_round": worst <= LARGE_TARGET,
        },
    }
    if "front_end_before" in ratios:
        cell["front_end_before_vs_minimal_hop_cpu_per_round"] = ratios["front_end_before"]
        cell["front_end_before_vs_minimal_hop_cpu_median_round"] = round(
            float(np.median(ratios["front_end_before"])), 3
        )
    return cell


def git_commit(checkout: Path) -> str | None:
    """The checkout's commit, with "-dirty" when its tracked files have changes."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit + ("-dirty" if dirty else "")


def machine() -> dict[str, Any]:
    """Cores, CPU model and load: the numbers depend on all three."""
    model = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model or platform.processor() or None,
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--naive-proxy":
        naive_proxy(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
        return
    if len(sys.argv) == 4 and sys.argv[1] == "--relay":
        relay(int(sys.argv[2]), int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs, a 100 MB model")
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--model-mb", type=int, default=None)
    parser.add_argument(
        "--parts", default="throughput,cold_load,large_body", help="comma list of parts to run"
    )
    parser.add_argument(
        "--before",
        type=Path,
        default=None,
        help="large_body: also measure the front end of this checkout, in the same rounds",
    )
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    seconds = args.seconds or (1.0 if args.quick else 3.0)
    rounds = args.rounds or (1 if args.quick else 2)
    megabytes = args.model_mb or (100 if args.quick else 500)

    from deploy.packaging import package_repository

    with tempfile.TemporaryDirectory(prefix="bench-local-") as tmp:
        work = Path(tmp)
        store = work / "store"
        package_repository(ROOT / "model_packages" / "examples", store)
        manifest = json.loads((store / "manifest.json").read_text())
        target = manifest["models"]["addsub"]["target_model"]
        report: dict[str, Any] = {
            "benchmark": "local_endpoint",
            "machine": machine(),
            "commit": git_commit(ROOT),
            "quick": args.quick,
            "seconds_per_run": seconds,
            "rounds": rounds,
        }
        targets: dict[str, Any] = {}
        if "throughput" in parts:
            report["throughput"] = throughput(store, target, seconds, rounds, work)
            c1, c8 = report["throughput"]["c1"], report["throughput"]["c8"]
            targets["c8_front_end_vs_direct>=0.8"] = c8["front_end_vs_direct_throughput"] >= 0.8
            targets["c1_added_p50_ms<=0.4"] = c1["added_p50_ms"] <= 0.4
        if "cold_load" in parts:
            report["cold_load"] = cold_load(store, megabytes, work)
            targets["cold_vs_extract<=1.5"] = {
                variant: result["cold_vs_extract"] <= 1.5
                for variant, result in report["cold_load"].items()
            }
        if "large_body" in parts:
            report["large_body"] = large_body(seconds, rounds, work, args.before)
            targets[f"large_body_front_end_vs_minimal_hop_cpu<={LARGE_TARGET}"] = {
                f"{model}_{level}": {
                    "median_round": result["front_end_vs_minimal_hop_cpu_median_round"],
                    "worst_round": result["front_end_vs_minimal_hop_cpu_worst_round"],
                    "met": result["target"]["met_by_median_round"],
                    "met_in_every_round": result["target"]["met_in_every_round"],
                }
                for model in LARGE_ANSWERS
                for level, result in report["large_body"][model].items()
            }
        report["targets"] = targets
        report["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
