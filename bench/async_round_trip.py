"""Benchmark a 200 MB asynchronous round trip against S3 transfers of the same bytes; JSON.

Three processes, as on AWS the client, S3 and the endpoint are apart: the moto
server (S3), `deploy serve --hosting async` (the local asynchronous endpoint,
the real tritonserver behind it) and this client. In the same run, alternating
rounds of:

- `sdk_round_trip`: `Endpoint.infer("bytestats", {"DATA": 200 MB})` on the
  asynchronous endpoint: encode, upload the request to the input prefix
  (multipart), InvokeEndpointAsync, the endpoint streams it from S3 into
  Triton, the model runs, the answer is written to S3, the SDK polls, reads,
  decodes and deletes both objects;
- `s3_direct`: the same request bytes written to the same bucket with the same
  transfer settings and read back (the floor any S3-borne request pays twice:
  the client writes what the endpoint reads).

Also reported: the model's own time on the bytes (`reference()` in this
process) and the endpoint's time per request from its listing.

`--quick` is a smoke run that checks only that the benchmark works
(tests/functional/test_bench_quick.py runs it).

    python bench/async_round_trip.py [--megabytes 200] [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deploy.client import AsyncInferenceOptions, Endpoint  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "async_repo"
BUCKET = "bench-async"
ENDPOINT = "bench-async"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(condition: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit(f"{what} did not happen within {timeout}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="4 MB, one round (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.megabytes, args.rounds = 4, 1

    import boto3
    from boto3.s3.transfer import TransferConfig

    from deploy.local.state import read_state

    work = Path(tempfile.mkdtemp(prefix="bench-async-"))
    moto_port = free_port()
    environment = {
        **os.environ,
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{moto_port}",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
        "PYTHONPATH": str(ROOT),
    }
    os.environ.update({k: environment[k] for k in environment if k.startswith("AWS_")})
    processes: list[subprocess.Popen[bytes]] = []
    try:
        moto = subprocess.Popen(
            [str(Path(sys.executable).parent / "moto_server"), "-p", str(moto_port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        processes.append(moto)
        s3 = boto3.client("s3")
        wait_for(lambda: _listening(moto_port), 60, "the moto server starting")
        s3.create_bucket(Bucket=BUCKET)

        repository = work / "repository"
        shutil.copytree(FIXTURES / "bytestats", repository / "bytestats")
        serve = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "deploy",
                "serve",
                str(repository),
                "--hosting",
                "async",
                "--async-output",
                f"s3://{BUCKET}/async/",
                "--endpoint-name",
                ENDPOINT,
                "--port",
                "0",
                "--state-dir",
                str(work / "state"),
            ],
            env=environment,
            stdout=(work / "serve.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        processes.append(serve)
        state = wait_for(
            lambda: read_state(ENDPOINT, work / "state"), 180, "the asynchronous endpoint starting"
        )

        size = args.megabytes * 1000 * 1000
        data = np.random.default_rng(7).integers(0, 256, size, dtype=np.uint8)
        spec = importlib.util.spec_from_file_location(
            "bytestats", FIXTURES / "bytestats/1/model.py"
        )
        assert spec is not None and spec.loader is not None
        model = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(model)
        started = time.perf_counter()
        expected = model.reference(data)
        model_seconds = time.perf_counter() - started

        options = AsyncInferenceOptions(poll_interval=0.02, max_poll_interval=0.25)
        transfer = TransferConfig(
            multipart_threshold=options.multipart_threshold,
            multipart_chunksize=options.part_size,
            max_concurrency=options.max_concurrency,
        )
        from deploy.client.codec import encode

        body = encode({"DATA": data}, parameters={"target_model": "bytestats"}).body
        samples: dict[str, list[float]] = {"sdk_round_trip": [], "s3_direct": []}
        with Endpoint(ENDPOINT, endpoint_url=state.url, async_options=options) as endpoint:
            # The router loads the model on its first request: time that apart.
            started = time.perf_counter()
            endpoint.infer("bytestats", {"DATA": data[:1000]})
            first_call = time.perf_counter() - started
            for _ in range(args.rounds):
                started = time.perf_counter()
                result = endpoint.infer("bytestats", {"DATA": data})
                samples["sdk_round_trip"].append(time.perf_counter() - started)
                assert int(result["CRC32"][0]) == int(expected["CRC32"][0]), "wrong answer"

                started = time.perf_counter()
                s3.upload_fileobj(io.BytesIO(body), BUCKET, "direct/request", Config=transfer)
                read = s3.get_object(Bucket=BUCKET, Key="direct/request")["Body"].read()
                samples["s3_direct"].append(time.perf_counter() - started)
                assert len(read) == len(body)
                del read
                s3.delete_object(Bucket=BUCKET, Key="direct/request")
        leftovers = s3.list_objects_v2(Bucket=BUCKET).get("KeyCount", 0)
        listing = json.loads(_get(state.url + "/models"))
        medians = {name: statistics.median(values) for name, values in samples.items()}
        document = {
            "benchmark": "async_round_trip",
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
            "request_bytes": len(body),
            "rounds": args.rounds,
            "seconds": {name: [round(v, 3) for v in values] for name, values in samples.items()},
            "median_seconds": {name: round(value, 3) for name, value in medians.items()},
            "round_trip_over_s3_direct": round(medians["sdk_round_trip"] / medians["s3_direct"], 2),
            "model_seconds_in_process": round(model_seconds, 3),
            "first_call_seconds_1kb_with_model_load": round(first_call, 3),
            "endpoint": listing.get("async_inference"),
            "objects_left_in_the_bucket": leftovers,
            "notes": "S3 is the moto server on this machine (disk-backed objects, no network); "
            "client, moto, the front end and tritonserver share the CPUs. s3_direct writes "
            "the request and reads it back once; the round trip writes it, the endpoint "
            "reads it, and the answer (a few KB) travels back through S3.",
        }
        print(json.dumps(document, indent=2))
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
        shutil.rmtree(work, ignore_errors=True)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _get(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


if __name__ == "__main__":
    main()
