"""Codec benchmark: the SDK's encode + decode against tritonclient and one memcpy.

Prints one JSON document. For FP32 tensors of 1 KB … 64 MB and for BYTES
batches it times, in this same run:

- `sdk`: `deploy.client.encode` (request body) + `deploy.client.decode`
  (a binary response of the same tensor, arrays as views);
- `tritonclient`: `InferInput.set_data_from_numpy` + `generate_request_body`
  + `parse_response_body(...).as_numpy`, on the same bodies;
- `memcpy`: one copy of the payload (`ndarray.copy()`, allocation included).

Targets: sdk ≥ 3× tritonclient at ≥ 1 MB, and within 2× of memcpy.

With a local endpoint available (deploy.local and a packaged model store) it
also measures the per-call overhead of `Endpoint.infer` against a bare boto3
`invoke_endpoint` with a pre-built body; otherwise that part says why it was
not measured.

    python bench/codec.py [--quick] [--store DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.http as httpclient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deploy.client import decode, encode
from deploy.client.codec import encode_input, encode_response

KB = 1024
MB = 1024 * 1024
FP32_SIZES = [KB, 16 * KB, 256 * KB, MB, 4 * MB, 16 * MB, 64 * MB]
BYTES_BATCHES = [(100, 64), (1000, 64), (10000, 64), (1000, 4096)]


def timed(functions: dict[str, Callable[[], Any]], *, budget: float) -> dict[str, float]:
    """Median seconds per call of each function.

    The functions run round-robin (one call each per round, at least 7 rounds,
    about `budget` seconds in all) so that load from other processes on a
    shared machine falls on every contender alike.
    """
    for function in functions.values():
        function()  # warm up: imports, first-touch page faults
    samples: dict[str, list[float]] = {name: [] for name in functions}
    deadline = time.perf_counter() + budget
    rounds = 0
    while rounds < 7 or (time.perf_counter() < deadline and rounds < 1000):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            samples[name].append(time.perf_counter() - start)
        rounds += 1
    return {name: statistics.median(values) for name, values in samples.items()}


def codec_case(
    name: str, array: np.ndarray[Any, Any], datatype: str, budget: float
) -> dict[str, Any]:
    response = encode_response([encode_input("Y", array)])
    content_type = response.content_type
    payload = response.body[response.header_size :]
    payload_array = np.frombuffer(payload, dtype=np.uint8)

    def sdk_encode() -> None:
        encode({"X": array})

    def sdk_decode() -> None:
        out = decode(response.body, content_type).outputs["Y"]
        assert out.shape == array.shape

    def tritonclient_encode() -> None:
        tensor = httpclient.InferInput("X", list(array.shape), datatype)
        tensor.set_data_from_numpy(array, binary_data=True)
        httpclient.InferenceServerClient.generate_request_body([tensor])

    def tritonclient_decode() -> None:
        result = httpclient.InferenceServerClient.parse_response_body(
            response.body, header_length=response.header_size
        )
        out = result.as_numpy("Y")
        assert out.shape == array.shape

    def sdk() -> None:
        sdk_encode()
        sdk_decode()

    def tritonclient() -> None:
        tritonclient_encode()
        tritonclient_decode()

    def memcpy() -> None:
        payload_array.copy()

    contenders = {"sdk": sdk, "tritonclient": tritonclient, "memcpy": memcpy}
    seconds = timed(contenders, budget=budget)
    parts = timed(
        {
            "sdk_encode": sdk_encode,
            "sdk_decode": sdk_decode,
            "tritonclient_encode": tritonclient_encode,
            "tritonclient_decode": tritonclient_decode,
        },
        budget=budget / 2,
    )
    nbytes = len(payload)
    return {
        "case": name,
        "payload_bytes": nbytes,
        "seconds": {key: round(value, 9) for key, value in seconds.items()},
        "parts_seconds": {key: round(value, 9) for key, value in parts.items()},
        "throughput_mb_s": {key: round(nbytes / value / MB, 1) for key, value in seconds.items()},
        "speedup_vs_tritonclient": round(seconds["tritonclient"] / seconds["sdk"], 2),
        "ratio_to_memcpy": round(seconds["sdk"] / seconds["memcpy"], 2),
    }


def codec_results(quick: bool) -> list[dict[str, Any]]:
    budget = 0.5 if quick else 2.0
    rng = np.random.default_rng(0)
    results = []
    for size in FP32_SIZES[:5] if quick else FP32_SIZES:
        array = rng.standard_normal(size // 4).astype(np.float32)
        results.append(codec_case(f"FP32 {size // KB} KB", array, "FP32", budget))
    for count, length in BYTES_BATCHES[:2] if quick else BYTES_BATCHES:
        array = np.array(
            [bytes(rng.integers(0, 256, length, dtype=np.uint8)) for _ in range(count)],
            dtype=object,
        )
        results.append(codec_case(f"BYTES {count} x {length} B", array, "BYTES", budget))
    return results


def targets(results: list[dict[str, Any]]) -> dict[str, Any]:
    large = [r for r in results if r["case"].startswith("FP32") and r["payload_bytes"] >= MB]
    return {
        "fp32_ge_1mb_min_speedup_vs_tritonclient": min(r["speedup_vs_tritonclient"] for r in large),
        "fp32_ge_1mb_max_ratio_to_memcpy": max(r["ratio_to_memcpy"] for r in large),
        "speedup_target_3x_met": all(r["speedup_vs_tritonclient"] >= 3 for r in large),
        "memcpy_target_2x_met": all(r["ratio_to_memcpy"] <= 2 for r in large),
    }


# -- per-call overhead against the local endpoint --------------------------------------


def endpoint_overhead(store: str | None, calls: int) -> dict[str, Any]:
    try:
        from deploy.local.modes.endpoint import LocalEndpoint
    except ImportError as exc:
        return {"measured": False, "why": f"the local endpoint is not available: {exc}"}
    with tempfile.TemporaryDirectory(prefix="bench-codec-") as scratch:
        try:
            store_dir = Path(store) if store else package_examples(Path(scratch) / "store")
        except Exception as exc:  # the packaging step belongs to another component
            return {"measured": False, "why": f"could not package the examples: {exc!r}"}
        with LocalEndpoint(store_dir, work_dir=Path(scratch) / "work") as local:
            return measure_overhead(local.url, local.endpoint_name, store_dir, calls)


def package_examples(out: Path) -> Path:
    """Package the bundled examples with `deploy.packaging` (what `deploy package` runs)."""
    from deploy.packaging import package_repository

    package_repository(Path(__file__).resolve().parents[1] / "model_packages" / "examples", out)
    return out


def measure_overhead(url: str, name: str, store_dir: Path, calls: int) -> dict[str, Any]:
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config

    from deploy.client import Endpoint

    manifest = json.loads((store_dir / "manifest.json").read_text())
    target = manifest["models"]["addsub"]["target_model"]
    batch = manifest["models"]["addsub"].get("max_batch_size", 0)
    row = np.arange(4, dtype=np.float32)
    value = row[None, :] if batch else row
    inputs = {"INPUT0": value, "INPUT1": value}
    body = encode(inputs)
    runtime = boto3.Session().client(
        "sagemaker-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        config=Config(signature_version=UNSIGNED, retries={"total_max_attempts": 1}),
    )

    def bare() -> None:
        response = runtime.invoke_endpoint(
            EndpointName=name, TargetModel=target, Body=body.body, ContentType=body.content_type
        )
        response["Body"].read()

    with Endpoint(name, endpoint_url=url, manifest=store_dir / "manifest.json") as endpoint:

        def sdk() -> None:
            endpoint.infer("addsub", inputs)

        # Interleave so both see the same machine load.
        for _ in range(20):
            bare()
            sdk()
        bare_samples, sdk_samples = [], []
        for _ in range(calls):
            start = time.perf_counter()
            bare()
            bare_samples.append(time.perf_counter() - start)
            start = time.perf_counter()
            sdk()
            sdk_samples.append(time.perf_counter() - start)
    bare_median = statistics.median(bare_samples)
    sdk_median = statistics.median(sdk_samples)
    return {
        "measured": True,
        "model": "addsub",
        "calls": calls,
        "bare_boto3_invoke_endpoint_ms": round(bare_median * 1e3, 3),
        "endpoint_infer_ms": round(sdk_median * 1e3, 3),
        "overhead_ms": round((sdk_median - bare_median) * 1e3, 3),
        "overhead_ratio": round(sdk_median / bare_median, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes, shorter runs")
    parser.add_argument("--store", help="a packaged model store (default: package addsub)")
    parser.add_argument("--calls", type=int, default=300, help="endpoint calls per side")
    parser.add_argument("--skip-endpoint", action="store_true")
    args = parser.parse_args()
    results = codec_results(args.quick)
    document = {
        "benchmark": "codec",
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "cpus": os.cpu_count(),
        },
        "codec": results,
        "targets": targets(results),
        "endpoint_overhead": (
            {"measured": False, "why": "--skip-endpoint"}
            if args.skip_endpoint
            else endpoint_overhead(args.store, args.calls)
        ),
    }
    json.dump(document, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
