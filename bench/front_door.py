"""The HTTP API's Lambda front door: what a 1 MB request adds to an invocation, and its cold start.

Prints one JSON document. In this same run:

- `cases`: whole invocations, from the API Gateway event as the Lambda
  runtime receives it (JSON bytes, parsed with the standard library as the
  Python runtime does) through `FrontDoor.handle` to the response the runtime
  writes back, against the same invocation with a handler that does no work
  (it returns the same response, built beforehand). The endpoint is a stand-in
  that answers at once with 1 MB of FP32 output in Triton's binary protocol;
  the manifest is parsed by the handler's own `ManifestCache`, as in Lambda.
  - `binary`: a request in Triton's binary protocol (a JSON header and 1 MB of
    FP32, as the SDK and tritonclient build it), base64 in the event as API
    Gateway sends a binary body; the answer goes back the same way.
  - `json`: the same tensor as KServe v2 JSON (262,144 values, 5.3 MB of text),
    answered as v2 JSON.
  Each round runs both handlers `--calls` times, interleaved, and keeps the
  medians of CPU time (`time.process_time`) and wall time. What a request adds
  is the CPU time over the no-op handler's, scaled to the function's memory:
  Lambda gives one vCPU per 1,769 MB and a share of one below that (512 MB:
  about 0.29), so the handler's single thread takes CPU ms × max(1, 1769 / memory).
  The target holds when the worst round is within it. The benchmark runs
  under the function's glibc malloc settings (`MALLOC_ENVIRONMENT` in
  deploy_infra/lambda_bundle.py), starting itself again with them if needed.
- `json_libraries`: the standard library, orjson and msgspec parsing the 5.3 MB
  request and writing the 5.1 MB answer (CPU ms, median), the measurement
  behind the handler's choice (`fast_json.LIBRARY`).
- `json_stages`: where the `json` case's added time goes, stage by stage, as
  the handler runs them (CPU ms, median): parsing the request, packing it into
  Triton's binary protocol, unpacking the answer into Python numbers, writing
  the answer's JSON and making it the response body's text.
- `cold_start`: CPU ms of fresh interpreters importing `deploy_handlers.front_door.app`
  (with this environment's msgspec and pybase64), the same import from the
  synthesized Lambda asset in a CPython 3.12 if one is given or found
  (`--lambda-python`), and the first call's set-up (`import boto3` and its three
  clients, no network), against an empty interpreter start and `import boto3`
  alone. Lambda adds its own runtime start on top.
- `asset`: the Lambda asset's size, unzipped and zipped (deploy_infra/lambda_bundle.py).

`--quick` (4,096 values, 2 rounds of 2 calls, one fresh interpreter each)
finishes in seconds: the test suite runs it (tests/functional/test_bench_quick.py)
so that the benchmark keeps working.

    python bench/front_door.py [--quick] [--rounds N] [--calls N] [--lambda-python PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import orjson
import pybase64

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deploy.client import decode, encode  # noqa: E402
from deploy.client.codec import encode_input, encode_response  # noqa: E402
from deploy_handlers.front_door import fast_json  # noqa: E402
from deploy_handlers.front_door.app import FrontDoor  # noqa: E402
from deploy_handlers.front_door.binary import decode_response, encode_request  # noqa: E402
from deploy_handlers.front_door.manifest import ManifestCache  # noqa: E402
from deploy_handlers.front_door.request import parse_body  # noqa: E402
from deploy_infra.lambda_bundle import (  # noqa: E402
    ARCHITECTURE,
    MALLOC_ENVIRONMENT,
    MEMORY_MB,
    PYTHON,
    VCPU_MB,
    front_door_asset,
)

VALUES = 262_144  # 1 MB of FP32
QUICK_VALUES = 4_096
TARGET_ADDED_MS = {"binary": 5.0, "json": 40.0}  # at the function's memory, worst round
SCALE = max(1.0, VCPU_MB / MEMORY_MB)
MANIFEST = {
    "format": 1,
    "hosting": "multi-model",
    "models": {
        "m": {
            "target_model": "m-0.tar.gz",
            "max_batch_size": 0,
            "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, -1]}],
            "outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [1, -1]}],
        }
    },
}


class _Runtime:
    """sagemaker-runtime stand-in: the endpoint answers at once (its time is not the door's)."""

    def __init__(self, body: bytes, content_type: str) -> None:
        self.body, self.content_type = body, content_type

    def invoke_endpoint(self, **_: Any) -> dict[str, Any]:
        return {"Body": io.BytesIO(self.body), "ContentType": self.content_type}


class _Store:
    """s3 stand-in holding the model store's manifest.json (read once, then cached)."""

    def get_object(self, **_: Any) -> dict[str, Any]:
        return {"Body": io.BytesIO(json.dumps(MANIFEST).encode())}


class _Sink(io.TextIOBase):
    """Where the handler's log lines go while measured: formatted and written, then dropped."""

    def write(self, text: str) -> int:
        return len(text)


@dataclass
class Case:
    name: str
    payload: bytes  # the invocation event as the Lambda runtime receives it
    handler: Callable[[dict[str, Any], Any], dict[str, Any]]
    noop_response: dict[str, Any]
    request_body_bytes: int  # the HTTP body the caller sent
    answer_body_bytes: int  # the HTTP body the caller gets


def invoke(handler: Callable[[dict[str, Any], Any], dict[str, Any]], payload: bytes) -> bytes:
    """What the Lambda runtime does around a handler: parse the event, call, write the result."""
    return json.dumps(handler(json.loads(payload), None)).encode()


def _door(answer: Any) -> FrontDoor:
    return FrontDoor(
        runtime=_Runtime(answer.body, answer.content_type),
        sagemaker=None,
        manifest=ManifestCache(_Store(), "bench-store", "manifest.json"),
        endpoint_name="bench",
    )


def _event(body: str, content_type: str, *, base64: bool) -> bytes:
    event = {
        "version": "2.0",
        "routeKey": "POST /v2/models/{model}/infer",
        "rawPath": "/v2/models/m/infer",
        "headers": {"content-type": content_type},
        "pathParameters": {"model": "m"},
        "requestContext": {"requestId": "bench"},
        "body": body,
        "isBase64Encoded": base64,
    }
    return json.dumps(event).encode()


def cases(count: int) -> list[Case]:
    values = np.random.default_rng(0).random(count, dtype=np.float32).reshape(1, count)
    answer = encode_response([encode_input("OUTPUT0", values)])
    door = _door(answer)

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return door.handle(event)

    # Triton's binary protocol: a JSON header, then the raw tensor.
    request = encode({"INPUT0": values}, ["OUTPUT0"])
    raw = request.body
    binary_payload = _event(pybase64.b64encode_as_string(raw), request.content_type, base64=True)
    binary_response = _checked_binary(invoke(handler, binary_payload), values)

    text = json.dumps(
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "FP32",
                    "shape": [1, count],
                    "data": values.ravel().tolist(),
                }
            ]
        }
    )
    json_payload = _event(text, "application/json", base64=False)
    json_response = _checked_json(invoke(handler, json_payload), values)
    return [
        Case(
            "binary",
            binary_payload,
            handler,
            binary_response,
            len(raw),
            len(pybase64.b64decode(binary_response["body"])),
        ),
        Case(
            "json",
            json_payload,
            handler,
            json_response,
            len(text),
            len(json_response["body"]),
        ),
    ]


def _checked_binary(written: bytes, values: np.ndarray) -> dict[str, Any]:
    response: dict[str, Any] = json.loads(written)
    if response["statusCode"] != 200 or not response["isBase64Encoded"]:
        sys.exit(f"the front door answered {response['statusCode']}: {response['body'][:300]}")
    result = decode(pybase64.b64decode(response["body"]), response["headers"]["content-type"])
    if not np.array_equal(result.outputs["OUTPUT0"], values):
        sys.exit("the front door's binary answer does not hold the endpoint's output")
    if result.model_name != "m":
        sys.exit("the front door's binary answer does not name the model it was asked for")
    return response


def _checked_json(written: bytes, values: np.ndarray) -> dict[str, Any]:
    response: dict[str, Any] = json.loads(written)
    if response["statusCode"] != 200:
        sys.exit(f"the front door answered {response['statusCode']}: {response['body'][:300]}")
    if json.loads(response["body"])["outputs"][0]["data"] != values.ravel().tolist():
        sys.exit("the front door's JSON answer does not hold the endpoint's output")
    return response


def _timed(call: Callable[[], Any]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return (time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000


def measure(case: Case, rounds: int, calls: int) -> dict[str, Any]:
    def real() -> bytes:
        return invoke(case.handler, case.payload)

    def noop() -> bytes:
        return invoke(lambda event, context: case.noop_response, case.payload)

    real(), noop()
    per_round = []
    for _ in range(rounds):
        samples: dict[str, list[tuple[float, float]]] = {"real": [], "noop": []}
        for _ in range(calls):
            samples["real"].append(_timed(real))
            samples["noop"].append(_timed(noop))
        cpu = {k: statistics.median(s[0] for s in v) for k, v in samples.items()}
        wall = {k: statistics.median(s[1] for s in v) for k, v in samples.items()}
        added = cpu["real"] - cpu["noop"]
        per_round.append(
            {
                "handler_cpu_ms": round(cpu["real"], 3),
                "noop_handler_cpu_ms": round(cpu["noop"], 3),
                "handler_wall_ms": round(wall["real"], 3),
                "noop_handler_wall_ms": round(wall["noop"], 3),
                "added_cpu_ms": round(added, 3),
                "added_ms_at_memory": round(added * SCALE, 3),
                "added_ms_at_512_mb": round(added * VCPU_MB / 512, 3),
            }
        )
    added_at_memory = [r["added_ms_at_memory"] for r in per_round]
    target = TARGET_ADDED_MS[case.name]
    return {
        "request_body_bytes": case.request_body_bytes,
        "answer_body_bytes": case.answer_body_bytes,
        "event_bytes": len(case.payload),
        "rounds": per_round,
        "median_added_ms_at_memory": round(statistics.median(added_at_memory), 3),
        "worst_added_ms_at_memory": max(added_at_memory),
        "target_added_ms": target,
        "met": max(added_at_memory) <= target,
    }


def json_libraries(count: int, repeat: int) -> dict[str, Any]:
    values = np.random.default_rng(1).random(count, dtype=np.float32)
    request = json.dumps(
        {"inputs": [{"name": "I", "datatype": "FP32", "shape": [count], "data": values.tolist()}]}
    ).encode()
    answer = {
        "outputs": [{"name": "O", "datatype": "FP32", "shape": [count], "data": values.tolist()}]
    }
    decoder, encoder = msgspec.json.Decoder(), msgspec.json.Encoder()
    libraries: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        "stdlib json": (
            lambda: json.loads(request),
            lambda: json.dumps(answer, separators=(",", ":")),
        ),
        f"orjson {orjson.__version__}": (
            lambda: orjson.loads(request),
            lambda: orjson.dumps(answer),
        ),
        f"msgspec {msgspec.__version__}": (
            lambda: decoder.decode(request),
            lambda: encoder.encode(answer),
        ),
    }
    report: dict[str, Any] = {"request_bytes": len(request)}
    for name, (parse, write) in libraries.items():
        parse_ms = _median_cpu_ms(parse, repeat)
        write_ms = _median_cpu_ms(write, repeat)
        report[name] = {"parse_cpu_ms": parse_ms, "write_cpu_ms": write_ms}
    report["handler_uses"] = fast_json.LIBRARY
    return report


def json_stages(count: int, repeat: int) -> dict[str, float]:
    """CPU ms of each stage of a v2 JSON request's path through the handler."""
    values = np.random.default_rng(1).random(count, dtype=np.float32).reshape(1, count)
    text = json.dumps(
        {
            "inputs": [
                {
                    "name": "I",
                    "datatype": "FP32",
                    "shape": [1, count],
                    "data": values.ravel().tolist(),
                }
            ]
        }
    )
    document = parse_body(text)
    answer = encode_response([encode_input("O", values)])
    response = decode_response(answer.body, answer.content_type)
    written = fast_json.dumps(response)
    stages: dict[str, Callable[[], Any]] = {
        "parse_request": lambda: parse_body(text),
        "pack_binary": lambda: encode_request(document),
        "unpack_answer": lambda: decode_response(answer.body, answer.content_type),
        "write_answer": lambda: fast_json.dumps(response),
        "answer_text": lambda: written.decode("utf-8"),
    }
    report = {name: _median_cpu_ms(call, repeat) for name, call in stages.items()}
    report["sum"] = round(sum(report.values()), 3)
    return report


def _median_cpu_ms(call: Callable[[], Any], repeat: int) -> float:
    call()
    return round(statistics.median(_timed(call)[0] for _ in range(repeat)), 3)


def _fresh(code: str, repeat: int, env: dict[str, str], python: str = sys.executable) -> float:
    """Median CPU ms a fresh interpreter spends on `code` (measured inside it).

    CPU time, not wall time: what Lambda's vCPU share runs, and what a busy
    machine does not inflate."""
    script = (
        "import time; started = time.process_time()\n"
        + code
        + "\nprint(time.process_time() - started)"
    )
    samples = []
    for _ in range(repeat):
        done = subprocess.run(
            [python, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT, env=env
        )
        samples.append(float(done.stdout.strip().splitlines()[-1]))
    return round(statistics.median(samples) * 1000, 2)


def _interpreter_ms(repeat: int, env: dict[str, str]) -> float:
    """Median CPU ms of `python -c pass` (the child's user + system time)."""
    samples = []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        samples.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return round(statistics.median(samples) * 1000, 2)


def _lambda_python(given: str | None) -> str | None:
    """A CPython of the Lambda's version, to import the asset's wheels with (None: none found)."""
    for candidate in [given] if given else [shutil.which(f"python{PYTHON}")]:
        if not candidate:
            continue
        done = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode == 0 and done.stdout.strip() == PYTHON:
            return candidate
        if given:
            sys.exit(f"--lambda-python {given} is not a CPython {PYTHON}")
    return None


def cold_start(repeat: int, asset: Path | None, lambda_python: str | None) -> dict[str, Any]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    clients = "import boto3\n[boto3.client(s) for s in ('sagemaker-runtime', 'sagemaker', 's3')]"
    report: dict[str, Any] = {
        "interpreter_start_cpu_ms": _interpreter_ms(repeat, env),
        "import_handler_module_cpu_ms": _fresh(
            "import deploy_handlers.front_door.app", repeat, env
        ),
        "first_call_setup_cpu_ms": _fresh(clients, repeat, env),
        "baseline_import_boto3_cpu_ms": _fresh("import boto3", repeat, env),
    }
    if asset is not None and lambda_python is not None:
        # The asset as Lambda lays it out (/var/task on sys.path), in the Lambda's CPython.
        # /var/task is read-only there: no bytecode cache, so none written here either.
        isolated = {**env, "PYTHONPATH": str(asset), "PYTHONDONTWRITEBYTECODE": "1"}
        report["import_handler_module_from_asset_cpu_ms"] = _fresh(
            "import front_door.app", repeat, isolated, lambda_python
        )
        report["asset_python"] = lambda_python
    else:
        why = "no asset" if asset is None else f"no CPython {PYTHON} (--lambda-python)"
        report["import_handler_module_from_asset_cpu_ms"] = None
        report["asset_python"] = why
    return report


def asset_report() -> tuple[Path | None, dict[str, Any]]:
    try:
        folder = front_door_asset()
    except Exception as exc:  # e.g. no index and no DEPLOY_LAMBDA_WHEELS on this machine
        return None, {"measured": False, "why": str(exc).splitlines()[0]}
    files = [p for p in folder.rglob("*") if p.is_file()]
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, path.relative_to(folder).as_posix())
    return folder, {
        "measured": True,
        "files": len(files),
        "unzipped_bytes": sum(p.stat().st_size for p in files),
        "zipped_bytes": len(packed.getvalue()),
        "of_which_wheels_unzipped_bytes": sum(
            p.stat().st_size for p in files if p.relative_to(folder).parts[0] != "front_door"
        ),
    }


def machine() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cores": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def commit(given: str | None) -> dict[str, Any]:
    if given:  # a copy of the tree without .git (another machine)
        return {"sha": given, "dirty": None}

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, check=False)
        return done.stdout.strip()

    return {"sha": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain"))}


def _as_in_lambda() -> None:
    """Run again under the function's malloc settings (glibc reads them at start)."""
    if all(os.environ.get(name) == value for name, value in MALLOC_ENVIRONMENT.items()):
        return
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **MALLOC_ENVIRONMENT})


def main() -> None:
    _as_in_lambda()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 16 KB tensor, 2 rounds of 2")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=9, help="invocations per round and handler")
    parser.add_argument("--lambda-python", help=f"a CPython {PYTHON} to import the asset with")
    parser.add_argument("--commit", help="the commit measured, where the tree has no .git")
    args = parser.parse_args()
    count, rounds, calls = (QUICK_VALUES, 2, 2) if args.quick else (VALUES, args.rounds, args.calls)
    logging.getLogger("front_door").setLevel(logging.INFO)  # one line per request, as in Lambda
    asset, asset_size = asset_report()
    with contextlib.redirect_stdout(_Sink()):
        measured = {case.name: measure(case, rounds, calls) for case in cases(count)}
    report = {
        "benchmark": "front_door",
        "quick": args.quick,
        "machine": machine(),
        "commit": commit(args.commit),
        "lambda": {
            "memory_mb": MEMORY_MB,
            "vcpu": round(min(1.0, MEMORY_MB / VCPU_MB), 3),
            "cpu_ms_scale": round(SCALE, 3),
            "runtime": f"python{PYTHON}",
            "architecture": ARCHITECTURE,
            "environment": MALLOC_ENVIRONMENT,
        },
        "fp32_values": count,
        "rounds": rounds,
        "calls_per_round": calls,
        "cases": measured,
        "targets": {
            f"{name}_1mb_added_ms_le_{TARGET_ADDED_MS[name]:g}": case["met"]
            for name, case in measured.items()
        },
        "json_libraries": json_libraries(count, 3 if args.quick else 9),
        "json_stages": json_stages(count, 3 if args.quick else 9),
        "cold_start": cold_start(1 if args.quick else 7, asset, _lambda_python(args.lambda_python)),
        "asset": asset_size,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
