"""Smoke tests: call every changed model through the SDK before the manifest switches.

Inputs are generated from the manifest's tensor specs (variable dimensions
become 1, a batch of one is prepended when the model batches). The request
names the new TargetModel explicitly, so it reaches the new archive while
clients still resolve names through the old manifest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from deploy.client._dtypes import FIXED_DTYPES
from deploy.errors import DeployError
from deploy.lifecycle.plan import ModelChange
from deploy.lifecycle.provider import DataPlane


class SmokeTestFailedError(DeployError):
    """At least one changed model failed its smoke test; the manifest was not switched."""


@dataclass(frozen=True)
class SmokeResult:
    name: str
    target_model: str
    ok: bool
    seconds: float
    outputs: tuple[str, ...]
    error: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "target_model": self.target_model,
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "outputs": list(self.outputs),
            "error": self.error,
        }


def generated_inputs(model: Mapping[str, Any], *, seed: int = 0) -> dict[str, Any]:
    """Deterministic inputs matching a manifest model's `inputs` specs."""
    rng = np.random.default_rng(seed)
    batch = [1] if int(model.get("max_batch_size", 0)) > 0 else []
    inputs: dict[str, Any] = {}
    for spec in model.get("inputs", []):
        shape = batch + [dim if int(dim) > 0 else 1 for dim in spec["shape"]]
        datatype = str(spec["datatype"])
        if datatype == "BYTES":
            inputs[spec["name"]] = np.full(shape, b"smoke", dtype=np.object_)
        elif datatype == "BOOL":
            inputs[spec["name"]] = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif datatype == "BF16":  # float32, rounded to bfloat16 by the SDK
            inputs[spec["name"]] = rng.random(size=shape).astype(np.float32)
        elif datatype.startswith("FP"):
            inputs[spec["name"]] = rng.random(size=shape).astype(FIXED_DTYPES[datatype])
        elif datatype in FIXED_DTYPES:
            inputs[spec["name"]] = rng.integers(0, 8, size=shape).astype(FIXED_DTYPES[datatype])
        else:
            raise SmokeTestFailedError(
                f"cannot generate input {spec['name']!r} of datatype {datatype}",
                where=f"model {model.get('name')}",
                fix="add a warmup sample or pass --skip-smoke",
            )
    return inputs


def smoke_test(
    changes: Sequence[ModelChange],
    manifest: Mapping[str, Any],
    manifest_path: Path,
    target: DataPlane,
    *,
    timeout_s: float = 120.0,
) -> list[SmokeResult]:
    """Invoke each changed model once; returns one result per model (never raises
    for a failing model: the caller decides)."""
    import time

    from deploy.client import ClientError, Endpoint

    results: list[SmokeResult] = []
    if not changes:
        return results
    models = manifest["models"]
    with Endpoint(
        target.endpoint_name,
        region=target.region,
        endpoint_url=target.endpoint_url,
        manifest=manifest_path,
        timeout=timeout_s,
        retries=3,
    ) as endpoint:
        for change in changes:
            model = models[change.name]
            outputs: tuple[str, ...] = ()
            started = time.monotonic()
            try:
                result = endpoint.infer(
                    change.name, generated_inputs(model), target_model=change.target_model
                )
            except (ClientError, SmokeTestFailedError) as exc:
                ok, error = False, str(exc)
            else:
                ok, outputs, error = True, tuple(sorted(result)), ""
            results.append(
                SmokeResult(
                    change.name,
                    change.target_model,
                    ok=ok,
                    seconds=time.monotonic() - started,
                    outputs=outputs,
                    error=error,
                )
            )
    return results


def raise_for_failures(results: Sequence[SmokeResult], *, endpoint: str) -> None:
    failed = [result for result in results if not result.ok]
    if not failed:
        return
    lines = "; ".join(f"{r.name} ({r.target_model}): {r.error}" for r in failed)
    raise SmokeTestFailedError(
        f"smoke test failed for {len(failed)} model(s): {lines}",
        where=f"endpoint {endpoint}",
        fix="fix the named model(s) and re-run `deploy up`; clients still use the previous "
        "manifest, and unchanged models keep serving",
    )
