"""`make demo`: the examples on a local SageMaker multi-model endpoint.

Packages `model_packages/examples` into `build/models` (what the README's
first run serves), starts the local endpoint on a free port (the real
tritonserver behind the SageMaker front end), calls every example model
through the client SDK (`deploy.client.Endpoint`, over boto3's
sagemaker-runtime client), prints what came back, stops, and says what to
run next.

    python -m deploy.demo [--repository DIR] [--store DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from deploy.errors import DeployError

EXAMPLES = Path(__file__).resolve().parent.parent / "model_packages" / "examples"
_IMAGE = np.random.default_rng(0).integers(0, 256, size=(1, 32, 32, 3)).astype(np.uint8)

# Inputs a reader can follow; any other model gets generated inputs.
DEMO_INPUTS: dict[str, dict[str, Any]] = {
    "addsub": {
        "INPUT0": np.array([[1, 2, 3, 4]], np.float32),
        "INPUT1": np.array([[10, 20, 30, 40]], np.float32),
    },
    "bls_addsub": {
        "A": np.array([[1, 2, 3, 4]], np.float32),
        "B": np.array([[1, 1, 1, 1]], np.float32),
    },
    "strings": {"TEXT": np.array([b"hello", b"sagemaker", b"triton"], dtype=object)},
    "preprocess": {"IMAGE": _IMAGE},
    "image_pipeline": {"IMAGE": _IMAGE},
}


def generated_inputs(model: dict[str, Any]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    inputs = {}
    for tensor in model["inputs"]:
        shape = [d if d > 0 else 2 for d in tensor["shape"]]
        if model.get("max_batch_size", 0) > 0:
            shape = [1, *shape]
        if tensor["datatype"] == "BYTES":
            inputs[tensor["name"]] = np.array([b"demo"] * int(np.prod(shape)), dtype=object)
        elif tensor["datatype"].startswith(("UINT", "INT")):
            inputs[tensor["name"]] = rng.integers(0, 100, size=shape).astype(
                np.dtype(tensor["datatype"].lower())
            )
        else:
            inputs[tensor["name"]] = rng.normal(size=shape).astype(np.float32)
    return inputs


def describe(value: np.ndarray) -> str:
    flat = value.ravel()
    if value.dtype == object:
        items = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in flat]
        return f"{list(value.shape)} {items[:4]}"
    shown = np.array2string(flat[:4], precision=3, separator=", ")
    return f"{list(value.shape)} {value.dtype} {shown}{' …' if flat.size > 4 else ''}"


def run(repository: Path, store: Path) -> list[dict[str, Any]]:
    from deploy.client import Endpoint
    from deploy.client.manifest import MANIFEST_NAME
    from deploy.local.modes.endpoint import LocalEndpoint
    from deploy.packaging import package_repository, read_manifest

    package_repository(repository, store)
    manifest = read_manifest(store)
    rows = []
    with (
        LocalEndpoint(store) as local,
        Endpoint("local", endpoint_url=local.url, manifest=store / MANIFEST_NAME) as endpoint,
    ):
        for name, entry in sorted(manifest.models.items()):
            model = {
                "inputs": [
                    {"name": t.name, "datatype": t.datatype, "shape": list(t.shape)}
                    for t in entry.inputs
                ],
                "max_batch_size": entry.max_batch_size,
            }
            inputs = DEMO_INPUTS.get(name) or generated_inputs(model)
            timings = []
            for _ in range(2):  # the first call loads the model (lazily, as SageMaker does)
                started = time.perf_counter()
                result = endpoint.infer(name, inputs)
                timings.append(time.perf_counter() - started)
            rows.append(
                {
                    "model": name,
                    "kind": entry.kind,
                    "target_model": entry.target_model,
                    "inputs": {k: describe(v) for k, v in inputs.items()},
                    "outputs": {k: describe(result[k]) for k in result},
                    "first_call_s": timings[0],
                    "second_call_ms": timings[1] * 1000,
                }
            )
        loaded = local.listing()["loaded"]
    adapted = {m["target_model"]: m["adapted"] for m in loaded}
    for row in rows:
        row["adapted"] = adapted.get(row["target_model"], {})
    return rows


def render(rows: list[dict[str, Any]], seconds: float) -> None:
    from rich.console import Console
    from rich.table import Table

    # Three columns so the table reads at 80 columns; TargetModels are in the manifest.
    table = Table(title="local SageMaker multi-model endpoint: every example model")
    table.add_column("model", overflow="fold", max_width=22)
    table.add_column("inputs → outputs", overflow="fold")
    table.add_column("1st / 2nd call", justify="right", no_wrap=True)
    for row in rows:
        notes = ", ".join(f"{m} via {p} adapter" for m, p in row["adapted"].items())
        table.add_row(
            f"{row['model']}\n[dim]{row['kind']}{' · ' + notes if notes else ''}[/]",
            "\n".join(f"{k} {v}" for k, v in row["inputs"].items())
            + "\n→ "
            + "\n→ ".join(f"{k} {v}" for k, v in row["outputs"].items()),
            f"{row['first_call_s']:.2f} s\n{row['second_call_ms']:.1f} ms",
        )
    console = Console()
    console.print(table)
    console.print(f"{len(rows)} models answered in {seconds:.1f} s; the endpoint is stopped.")


def next_steps(store: Path) -> str:
    """What to run after the demo: the README's first run, shortened."""
    from deploy.config import load_settings

    lines = []
    if sys.prefix != sys.base_prefix and os.environ.get("VIRTUAL_ENV") != sys.prefix:
        activate = Path(sys.prefix) / "bin" / "activate"
        if activate.is_relative_to(Path.cwd()):
            activate = activate.relative_to(Path.cwd())
        lines.append(f"source {activate}")
    port = load_settings().local_port
    lines += [
        f"deploy serve {store}        # a second terminal: port {port}, until Ctrl-C",
        "deploy invoke addsub --input in.npz --local",
        "deploy status --local",
    ]
    body = "\n".join(f"  {line}" for line in lines)
    return f"next (README.md, First run; in.npz is made there):\n{body}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repository", type=Path, default=EXAMPLES)
    parser.add_argument(
        "--store", type=Path, default=Path("build/models"), help="package here (kept)"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        rows = run(args.repository, args.store)
    except DeployError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    render(rows, time.perf_counter() - started)
    print(f"\nthe packaged models stay in {args.store}")
    print(next_steps(args.store))
    return 0


if __name__ == "__main__":
    sys.exit(main())
