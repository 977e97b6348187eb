"""GPU check of the adapter: concurrent calls of mixed sizes each get their own answer.

Run on a GPU machine (after `SETUP_ONLY=1 bash run_gpu.sh`, from the unpacked
tree): `python3 bench/device/adapter_gpu_check.py [--pipeline 0|1] [--out FILE]`.
On a machine without a GPU the model runs on the CPU (the pipeline then runs
only with --pipeline 1; tests/functional/test_local_adapter_pipeline.py covers it).

A small TorchScript net (a second output gives the rows of the model call
that computed each request) is served KIND_GPU with dynamic batching through
the local endpoint. 48 clients send 6 requests each: 1-4 images of 32x32 or
48x48 pixels (two shapes, so one `execute` may hold several calls), and a few
of 5x5 pixels, which the net cannot take (kernel larger than the image): each
of those must get an error and no other request may. A third of the
requests ask for one output only (the response sender drops the others
without the GIL: holding them until sent keeps the stub alive). Every
answer is compared with the same file run by torch on the same GPU. The JSON says how
many answers matched, the largest difference, the errors and the mean rows a
model call held (more than one request's rows: Triton batched them).
Exit status 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gpu_local_endpoint as bench  # noqa: E402

from deploy.client import decode, encode  # noqa: E402
from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint  # noqa: E402
from deploy.packaging import package_repository  # noqa: E402

CONFIG = """
name: "check"
platform: "pytorch_libtorch"
max_batch_size: 16
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3, -1, -1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1000 ] },
         { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_GPU count: 1 } ]
dynamic_batching { }
"""
CLIENTS = 48
CALLS = 6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pipeline", choices=("0", "1"), default="1")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import torch

    with tempfile.TemporaryDirectory(prefix="adapter-gpu-check-") as scratch:
        root = Path(scratch)
        folder = root / "repo" / "check"
        (folder / "1").mkdir(parents=True)
        bench.write_model(folder / "1" / "model.pt", "small")
        parameter = (
            'parameters { key: "DEPLOY_ADAPTER_PIPELINE" '
            f'value: {{ string_value: "{args.pipeline}" }} }}\n'
        )
        (folder / "config.pbtxt").write_text(CONFIG + parameter)
        package_repository(root / "repo", root / "store")
        target = json.loads((root / "store" / "manifest.json").read_text())["models"]["check"][
            "target_model"
        ]
        device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
        module = torch.jit.load(str(folder / "1" / "model.pt"), map_location=device).eval()
        lock = threading.Lock()
        report: dict = {
            "matched": 0,
            "mismatched": [],
            "errors_expected": 0,
            "errors": [],
            "rows": [],
            "max_abs_diff": 0.0,
        }

        with LocalEndpoint(
            root / "store", work_dir=root / "work", options=EndpointOptions(invoke_timeout=120)
        ) as endpoint:
            host, port = endpoint.url.removeprefix("http://").split(":")

            def client(index: int) -> None:
                rng = np.random.default_rng(index)
                connection = http.client.HTTPConnection(host, int(port), timeout=120)
                for call in range(CALLS):
                    bad = (index * CALLS + call) % 37 == 5
                    side = 5 if bad else (32 if (index + call) % 2 else 48)
                    images = rng.standard_normal(
                        (int(rng.integers(1, 5)), 3, side, side), dtype=np.float32
                    )
                    subset = (index + call) % 3 == 0  # some ask for one output only
                    request = encode(
                        {"INPUT__0": images}, outputs=["OUTPUT__0"] if subset else None
                    )
                    status, body, content_type = bench.invoke(connection, target, request)
                    with lock:
                        if bad:
                            if status == 200:
                                report["mismatched"].append(
                                    f"client {index} call {call}: a 5x5 image was answered"
                                )
                            else:
                                report["errors_expected"] += 1
                            continue
                        if status != 200:
                            report["errors"].append(f"{status}: {body[:300]!r}")
                            continue
                    outputs = decode(body, content_type).outputs
                    with torch.inference_mode():
                        expected = module(torch.from_numpy(images).to(device))[0].cpu().numpy()
                    served = np.asarray(outputs["OUTPUT__0"])
                    difference = float(np.max(np.abs(served - expected)))
                    with lock:
                        if subset and "OUTPUT__1" in outputs:
                            report["mismatched"].append(f"client {index}: unasked output")
                        if "OUTPUT__1" in outputs:
                            report["rows"].append(float(np.asarray(outputs["OUTPUT__1"])[0, 0]))
                        report["max_abs_diff"] = max(report["max_abs_diff"], difference)
                        if served.shape == expected.shape and np.allclose(
                            served, expected, rtol=1e-3, atol=1e-3
                        ):
                            report["matched"] += 1
                        else:
                            report["mismatched"].append(
                                f"client {index} call {call}: shape {served.shape}, "
                                f"difference {difference}"
                            )
                connection.close()

            threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            log = Path(endpoint.supervisor.log_path).read_text(errors="replace")

    rows = report.pop("rows")
    report["mean_rows_per_model_call"] = round(sum(rows) / max(1, len(rows)), 2)
    report["pipeline"] = args.pipeline
    report["adapter_log"] = [
        line.split("deploy adapter: ")[-1][:200]
        for line in log.splitlines()
        if "deploy adapter:" in line
    ][:4]
    report["ok"] = (
        not report["mismatched"]
        and not report["errors"]
        and report["errors_expected"] > 0
        and report["matched"] > 0
    )
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    sys.exit(0 if report["ok"] else 1)


if __name__ == "__main__":
    main()
