"""The HTTP API's Lambda front door: what it adds to a 1 MB request, and its cold start.

Prints one JSON document. In this same run:

- `request`: `FrontDoor.handle` on an API Gateway event whose v2 JSON
  body carries 1 MB of FP32 (262,144 values), with a runtime client that
  answers at once with a binary response of the same size: everything the
  handler does (JSON parse, checks, binary encode, binary decode, JSON
  answer). The model is looked up in a manifest the handler's own
  `ManifestCache` parsed, as in the Lambda. Baselines: `json.loads` of the
  request plus `json.dumps` of the answer (the least any JSON front door
  pays), and the SDK's binary encode + decode of the same tensor (what a
  client speaking binary pays).
- `cold_start`: fresh interpreters timing `import deploy_handlers.front_door.app`
  (the handler module, standard library only) and the handler's first-call
  set-up (`import boto3` and its three clients, no network), against an
  empty interpreter start and `import boto3` alone. Lambda adds its own
  runtime start on top.

Medians over the repetitions. `--quick` (4,096 values, 3 repetitions, one
fresh interpreter each) finishes in seconds: the test suite runs it
(tests/functional/test_bench_quick.py) so that the benchmark keeps working.

    python bench/front_door.py [--quick]
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deploy.client import decode, encode  # noqa: E402
from deploy.client._codec import encode_input, encode_response  # noqa: E402
from deploy_handlers.front_door.app import FrontDoor  # noqa: E402
from deploy_handlers.front_door.manifest import ManifestCache  # noqa: E402

VALUES = 262_144  # 1 MB of FP32
QUICK_VALUES = 4_096
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


def median_ms(call: Callable[[], Any], repeat: int) -> float:
    call()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return round(statistics.median(samples) * 1000, 3)


def request(count: int, repeat: int) -> dict[str, Any]:
    values = np.random.default_rng(0).random(count, dtype=np.float32)
    document = {
        "inputs": [
            {"name": "INPUT0", "datatype": "FP32", "shape": [1, count], "data": values.tolist()}
        ]
    }
    text = json.dumps(document)
    event = {
        "routeKey": "POST /v2/models/{model}/infer",
        "pathParameters": {"model": "m"},
        "body": text,
        "isBase64Encoded": False,
        "requestContext": {"requestId": "bench"},
    }
    answer = encode_response([encode_input("OUTPUT0", values.reshape(1, count))])
    door = FrontDoor(
        runtime=_Runtime(answer.body, answer.content_type),
        sagemaker=None,
        manifest=ManifestCache(_Store(), "bench-store", "manifest.json"),
        endpoint_name="bench",
    )
    reply = door.handle(event)
    if reply["statusCode"] != 200:
        sys.exit(f"the front door answered {reply['statusCode']}: {reply['body'][:300]}")
    answer_document = json.loads(reply["body"])
    if answer_document["outputs"][0]["data"] != values.tolist():
        sys.exit("the front door's answer does not hold the endpoint's output")

    def json_only() -> None:
        json.loads(text)
        json.dumps(answer_document, separators=(",", ":"))

    def binary_client() -> None:
        request = encode({"INPUT0": values.reshape(1, count)})
        decode(answer.body, answer.content_type)
        del request

    handle_ms = median_ms(lambda: door.handle(event), repeat)
    json_ms = median_ms(json_only, repeat)
    return {
        "fp32_values": count,
        "request_json_bytes": len(text),
        "answer_json_bytes": len(reply["body"]),
        "front_door_handle_ms": handle_ms,
        "baseline_json_parse_and_dump_ms": json_ms,
        "baseline_sdk_binary_encode_decode_ms": median_ms(binary_client, repeat),
        "front_door_vs_json_floor": round(handle_ms / json_ms, 2),
    }


def _fresh(code: str, repeat: int, env: dict[str, str]) -> float:
    """Median seconds a fresh interpreter reports for `code` (timed inside it)."""
    script = (
        "import time; started = time.perf_counter()\n"
        + code
        + "\nprint(time.perf_counter() - started)"
    )
    samples = []
    for _ in range(repeat):
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env=env,
        )
        samples.append(float(done.stdout.strip().splitlines()[-1]))
    return round(statistics.median(samples) * 1000, 2)


def _interpreter_ms(repeat: int, env: dict[str, str]) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
        samples.append(time.perf_counter() - started)
    return round(statistics.median(samples) * 1000, 2)


def cold_start(repeat: int) -> dict[str, Any]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    clients = "import boto3\n[boto3.client(s) for s in ('sagemaker-runtime', 'sagemaker', 's3')]"
    return {
        "interpreter_start_ms": _interpreter_ms(repeat, env),
        "import_handler_module_ms": _fresh("import deploy_handlers.front_door.app", repeat, env),
        "first_call_setup_ms": _fresh(clients, repeat, env),
        "baseline_import_boto3_ms": _fresh("import boto3", repeat, env),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 16 KB request, few repetitions")
    args = parser.parse_args()
    logging.getLogger("front_door").setLevel(logging.WARNING)  # one line per request otherwise
    report = {
        "benchmark": "front_door",
        "quick": args.quick,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "request": request(QUICK_VALUES, 3) if args.quick else request(VALUES, 21),
        "cold_start": cold_start(1 if args.quick else 7),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
