"""The SDK's client CPU per call against an unsigned raw HTTP request with the same body.

Prints one JSON document. A no-op SageMaker runtime in its own process
(`bench/load_generator.py`'s: one fixed small Triton answer, nothing
parsed) is called one request at a time, with bodies of about 0.6 MB and
4.8 MB (FP32) and a small one, by, in this same run:

- `raw_http` (the baseline): `http.client` on a keep-alive connection, the
  body encoded once beforehand, no signature;
- `sdk`: `deploy.client.Endpoint.infer` with the numpy array (manifest
  lookup, validation, encode, the direct transport: the request built by the
  SDK and sent over its deadline-bounded keep-alive connections, decode),
  unsigned as against the local endpoint;
- `sdk_transport`: the same transport alone, the body encoded once
  beforehand (what `raw_http` does, plus the SDK's headers, deadline, error
  mapping and retry book-keeping);
- `sdk_sigv4`, `sdk_transport_sigv4`: the same with credentials, so each
  request is signed with botocore's SigV4 signer (SigV4 hashes the body:
  InvokeEndpoint's service model does not allow an unsigned payload);
- `raw_http_sigv4`: `raw_http` plus botocore's SigV4 signer per call, the
  floor of a signed call;
- `sdk_boto3`, `sdk_boto3_sigv4`: `Endpoint(..., transport="boto3")`, the
  previous default (botocore's request pipeline, the deadline transport);
- `boto3`: a bare sagemaker-runtime client's `invoke_endpoint` with the body
  encoded once beforehand, unsigned, over botocore's own transport.

The paths take turns in rounds (at least 5 calls, about `--seconds` each),
and each reports the least CPU per call over its rounds (this process's user
+ system time): other load on a shared machine only ever adds to it. Every
round is kept (`rounds_ms`), and each ratio is also given round by round
(`round_ratios`: the two paths of one round ran back to back, under the same
load) with its median and worst round. Targets, on the least CPU per call:
`sdk` (and `sdk_transport`) within 1.5x of `raw_http`; `sdk` no slower than
`sdk_boto3` nor than `boto3`; signed, `sdk_sigv4` no slower than
`sdk_boto3_sigv4`. `targets` says met or missed for each body size, and
whether it held in every round. The report names the machine (cores, CPU
model) and the git commit it ran from.

`--quick` (one round of at least 5 calls per path) finishes in seconds and
checks only that the benchmark runs (tests/functional/test_bench_quick.py).

    python bench/client.py [--quick] [--seconds S] [--rounds N]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from load_generator import manifest_file, start_noop  # noqa: E402

from deploy.client import Endpoint, encode  # noqa: E402

SIZES = {"small": 4, "0.6MB": 150_000, "4.8MB": 1_200_000}  # FP32 values per request


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def per_call_ms(call: Callable[[], Any], seconds: float) -> float:
    """CPU milliseconds per call over about `seconds` of calls (at least 5)."""
    import time

    call()
    count, started, spent = 0, time.monotonic(), cpu()
    while count < 5 or time.monotonic() - started < seconds:
        call()
        count += 1
    return (cpu() - spent) / count * 1000


def unsigned_environment() -> None:
    """No credentials anywhere botocore looks: the SDK sends unsigned (local endpoint)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        os.environ.pop(name, None)
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    os.environ["AWS_CONFIG_FILE"] = os.devnull
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"


def paths(url: str, port: int, manifest: Path, values: int) -> dict[str, Callable[[], Any]]:
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config

    array = np.random.default_rng(0).random((1, values), dtype=np.float32)
    inputs = {"INPUT0": array}
    request = encode(inputs)
    headers = {
        "Content-Type": request.content_type,
        "X-Amzn-SageMaker-Target-Model": "noop-0.tar.gz",
    }
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def raw_http() -> None:
        connection.request("POST", "/endpoints/noop/invocations", request.body, headers)
        connection.getresponse().read()

    signing = boto3.Session(
        aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name="us-east-1"
    )

    def endpoint(transport: str, session: Any = None) -> Endpoint:
        return Endpoint(
            "noop",
            endpoint_url=url,
            manifest=manifest,
            retries=1,
            session=session,
            transport=transport,  # type: ignore[arg-type]
        )

    sdk, signed = endpoint("direct"), endpoint("direct", signing)
    sdk_boto3, signed_boto3 = endpoint("boto3"), endpoint("boto3", signing)
    prepared = sdk._prepare("noop", inputs, None, None, None, None)
    assert prepared.request.body == request.body
    bare = boto3.Session(region_name="us-east-1").client(
        "sagemaker-runtime",
        endpoint_url=url,
        config=Config(signature_version=UNSIGNED, retries={"total_max_attempts": 1}),
    )

    def boto3_invoke() -> None:
        answer = bare.invoke_endpoint(
            EndpointName="noop",
            TargetModel="noop-0.tar.gz",
            Body=request.body,
            ContentType=request.content_type,
        )
        answer["Body"].read()

    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    credentials = signing.get_credentials()
    signed_url = f"{url}/endpoints/noop/invocations"

    def raw_http_sigv4() -> None:
        signable = AWSRequest(method="POST", url=signed_url, data=request.body, headers=headers)
        SigV4Auth(credentials.get_frozen_credentials(), "sagemaker", "us-east-1").add_auth(signable)
        connection.request(
            "POST", "/endpoints/noop/invocations", request.body, dict(signable.headers.items())
        )
        connection.getresponse().read()

    return {
        "raw_http": raw_http,
        "sdk": lambda: sdk.infer("noop", inputs),
        "sdk_transport": lambda: sdk._invoke(prepared, 60.0),
        "sdk_boto3": lambda: sdk_boto3.infer("noop", inputs),
        "boto3": boto3_invoke,
        "raw_http_sigv4": raw_http_sigv4,
        "sdk_sigv4": lambda: signed.infer("noop", inputs),
        "sdk_transport_sigv4": lambda: signed._invoke(prepared, 60.0),
        "sdk_boto3_sigv4": lambda: signed_boto3.infer("noop", inputs),
    }


RATIOS = {
    "sdk_vs_raw_http": ("sdk", "raw_http"),
    "sdk_transport_vs_raw_http": ("sdk_transport", "raw_http"),
    "sdk_vs_sdk_boto3": ("sdk", "sdk_boto3"),
    "sdk_vs_boto3": ("sdk", "boto3"),
    "sdk_sigv4_vs_raw_http": ("sdk_sigv4", "raw_http"),
    "sdk_sigv4_vs_raw_http_sigv4": ("sdk_sigv4", "raw_http_sigv4"),
    "sdk_transport_sigv4_vs_raw_http_sigv4": ("sdk_transport_sigv4", "raw_http_sigv4"),
    "sdk_sigv4_vs_sdk_boto3_sigv4": ("sdk_sigv4", "sdk_boto3_sigv4"),
}
LIMITS = {
    "sdk_vs_raw_http": 1.5,
    "sdk_transport_vs_raw_http": 1.5,
    "sdk_vs_sdk_boto3": 1.0,
    "sdk_vs_boto3": 1.0,
    "sdk_sigv4_vs_sdk_boto3_sigv4": 1.0,
}


def ratios(best: dict[str, float]) -> dict[str, float]:
    return {name: round(best[a] / best[b], 2) for name, (a, b) in RATIOS.items()}


def round_ratios(spent: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    """Each ratio round by round, with its median and worst (largest) round."""
    out: dict[str, dict[str, Any]] = {}
    for name, (a, b) in RATIOS.items():
        each = [round(x / y, 2) for x, y in zip(spent[a], spent[b], strict=True)]
        out[name] = {"rounds": each, "median": statistics.median(each), "worst": max(each)}
    return out


def targets(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Met or missed for each target: on the least CPU per call, and in every round."""
    return {
        f"{name}<={limit}": {
            "ratio": body["ratios"][name],
            "met": body["ratios"][name] <= limit,
            "worst_round": body["round_ratios"][name]["worst"],
            "met_in_every_round": body["round_ratios"][name]["worst"] <= limit,
        }
        for name, limit in LIMITS.items()
    }


def machine() -> dict[str, Any]:
    """Cores, CPU model and Python of the machine the numbers come from."""
    model = platform.processor() or None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = None
    return {
        "cpus": os.cpu_count(),
        "cpus_usable": usable,
        "cpu_model": model,
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def commit() -> dict[str, Any]:
    """The git commit the benchmark ran from, and whether the tree had changes."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": None if status is None else bool(status)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one short round (a smoke run)")
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    seconds = args.seconds or (0.02 if args.quick else 1.0)
    rounds = args.rounds or (1 if args.quick else 5)
    unsigned_environment()
    process, port = start_noop()
    url = f"http://127.0.0.1:{port}"
    report: dict[str, Any] = {
        "benchmark": "client",
        "machine": machine(),
        "git": commit(),
        "quick": args.quick,
        "seconds_per_round": seconds,
        "rounds": rounds,
        "bodies": {},
    }
    try:
        with tempfile.TemporaryDirectory(prefix="bench-client-") as tmp:
            for label, values in SIZES.items():
                manifest = manifest_file(Path(tmp), (1, values))
                calls = paths(url, port, manifest, values)
                spent: dict[str, list[float]] = {name: [] for name in calls}
                for _ in range(rounds):
                    for name, call in calls.items():
                        spent[name].append(per_call_ms(call, seconds))
                best = {name: round(min(values), 4) for name, values in spent.items()}
                body: dict[str, Any] = {
                    "request_bytes": len(
                        encode({"INPUT0": np.zeros((1, values), np.float32)}).body
                    ),
                    "cpu_ms_per_call": best,
                    "worst_round_ms": {name: round(max(vs), 4) for name, vs in spent.items()},
                    "rounds_ms": {k: [round(v, 4) for v in vs] for k, vs in spent.items()},
                    "ratios": ratios(best),
                    "round_ratios": round_ratios(spent),
                }
                body["targets"] = targets(body)
                report["bodies"][label] = body
    finally:
        process.terminate()
        process.wait(10)
    report["targets"] = {
        f"{label}_{name}": target["met"]
        for label, body in report["bodies"].items()
        for name, target in body["targets"].items()
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
