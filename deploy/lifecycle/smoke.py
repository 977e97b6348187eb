"""Smoke tests: call every changed model through the SDK before the manifest switches.

Inputs are generated from the manifest's tensor specs (variable dimensions
become 1, a batch of one is prepended when the model batches). The request
names the new TargetModel explicitly, so it reaches the new archive while
clients still resolve names through the old manifest. Hosting components: the
request names the model's InferenceComponentName instead (the manifest about to
be published names it), whose component was just created or updated to serve
the new archive.

A failure is the model's when SageMaker (or the local endpoint) answered it
with one of SageMaker Runtime's error codes; an answer without one (an HTML
page, a body that is no inference response) or no answer at all means the
smoke test never reached a SageMaker data plane, as when the control plane is
an emulator (moto) and no `--smoke-endpoint-url` names a data plane. The two
get different fixes.

Golden cases (`<model>/golden/`, see `deploy.repository.golden`) replace the
generated inputs: each case is sent to the new TargetModel and its outputs are
compared with the expected ones; a mismatch fails the model like an error does
(failure "golden"), so nothing is published.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from deploy.client.dtypes import FIXED_DTYPES
from deploy.client.manifest import Manifest, ModelInfo
from deploy.errors import DeployError
from deploy.lifecycle.plan import ModelChange
from deploy.lifecycle.provider import DataPlane
from deploy.repository.golden import GoldenCase, Mismatch, compare


class SmokeTestFailedError(DeployError):
    """At least one changed model failed its smoke test; the manifest was not switched."""


# The error codes SageMaker Runtime's InvokeEndpoint answers with (its API reference),
# which the local endpoint answers with too.
SAGEMAKER_ERROR_CODES = frozenset(
    {
        "ValidationError",
        "ModelError",
        "ModelNotReadyException",
        "InternalFailure",
        "InternalDependencyException",
        "InternalStreamFailure",
        "ServiceUnavailable",
        "ThrottlingException",
        "AccessDeniedException",
        "UnrecognizedClientException",
    }
)
MODEL_FAILURE = "model"
ENDPOINT_FAILURE = "endpoint"  # the answer did not come from a SageMaker data plane
GOLDEN_FAILURE = "golden"  # answered, but not what a golden case expects


@dataclass(frozen=True)
class SmokeResult:
    name: str
    target_model: str
    ok: bool
    seconds: float
    outputs: tuple[str, ...]
    error: str
    failure: str | None = None  # MODEL_FAILURE | ENDPOINT_FAILURE | GOLDEN_FAILURE when not ok
    golden: tuple[str, ...] = ()  # the golden cases sent
    mismatches: tuple[tuple[str, Mismatch], ...] = ()  # (case, mismatch)
    inference_component: str | None = None  # hosting components: the component called

    def to_dict(self) -> dict[str, Any]:
        return {
            "golden": list(self.golden),
            "mismatches": [{"case": case, **m.as_dict()} for case, m in self.mismatches],
            "name": self.name,
            "target_model": self.target_model,
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "outputs": list(self.outputs),
            "error": self.error,
            "failure": self.failure,
            "inference_component": self.inference_component,
        }


def generated_inputs(model: ModelInfo | Mapping[str, Any], *, seed: int = 0) -> dict[str, Any]:
    """Deterministic inputs matching a manifest model's `inputs` specs (a parsed
    `ModelInfo`, or a model entry as decoded)."""
    rng = np.random.default_rng(seed)
    if isinstance(model, ModelInfo):
        name, batched = model.name, model.max_batch_size > 0
        specs = [(t.name, t.datatype, t.shape) for t in model.inputs]
    else:
        name, batched = str(model.get("name")), int(model.get("max_batch_size", 0)) > 0
        specs = [(s["name"], str(s["datatype"]), s["shape"]) for s in model.get("inputs", [])]
    batch = [1] if batched else []
    inputs: dict[str, Any] = {}
    for input_name, datatype, dims in specs:
        shape = batch + [dim if int(dim) > 0 else 1 for dim in dims]
        if datatype == "BYTES":
            inputs[input_name] = np.full(shape, b"smoke", dtype=np.object_)
        elif datatype == "BOOL":
            inputs[input_name] = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif datatype == "BF16":  # float32, rounded to bfloat16 by the SDK
            inputs[input_name] = rng.random(size=shape).astype(np.float32)
        elif datatype.startswith("FP"):
            inputs[input_name] = rng.random(size=shape).astype(FIXED_DTYPES[datatype])
        elif datatype in FIXED_DTYPES:
            inputs[input_name] = rng.integers(0, 8, size=shape).astype(FIXED_DTYPES[datatype])
        else:
            raise SmokeTestFailedError(
                f"cannot generate input {input_name!r} of datatype {datatype}",
                where=f"model {name}",
                fix="add a warmup sample or pass --skip-smoke",
            )
    return inputs


def smoke_test(
    changes: Sequence[ModelChange],
    manifest: Manifest,
    manifest_path: Path,
    target: DataPlane,
    *,
    timeout_s: float = 120.0,
    golden: Mapping[str, Sequence[GoldenCase]] | None = None,
) -> list[SmokeResult]:
    """Invoke each changed model once, or once per golden case (`golden`: model name ->
    its cases); returns one result per model (never raises for a failing model: the
    caller decides)."""
    import time

    from deploy.client import ClientError, Endpoint, EndpointError, ResponseFormatError

    results: list[SmokeResult] = []
    if not changes:
        return results
    models = manifest.models
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
            cases = tuple((golden or {}).get(change.name, ()))
            outputs: tuple[str, ...] = ()
            failure: str | None = None
            mismatches: list[tuple[str, Mismatch]] = []
            started = time.monotonic()
            try:
                if not cases:
                    result = endpoint.infer(
                        change.name, generated_inputs(model), target_model=change.target_model
                    )
                for case in cases:
                    result = endpoint.infer(
                        change.name, case.inputs, target_model=change.target_model
                    )
                    mismatches += [(case.name, m) for m in compare(case, dict(result.items()))]
            except (ClientError, SmokeTestFailedError) as exc:
                ok, error = False, str(exc)
                foreign = isinstance(exc, ResponseFormatError) or (
                    isinstance(exc, EndpointError) and exc.code not in SAGEMAKER_ERROR_CODES
                )
                failure = ENDPOINT_FAILURE if foreign else MODEL_FAILURE
            else:
                ok, outputs, error = True, tuple(sorted(result)), ""
                if mismatches:
                    ok, failure = False, GOLDEN_FAILURE
                    error = "golden outputs differ: " + "; ".join(
                        describe_mismatch(case, m) for case, m in mismatches
                    )
            results.append(
                SmokeResult(
                    change.name,
                    change.target_model,
                    ok=ok,
                    seconds=time.monotonic() - started,
                    outputs=outputs,
                    error=error,
                    failure=failure,
                    golden=tuple(case.name for case in cases),
                    mismatches=tuple(mismatches),
                    inference_component=model.inference_component,
                )
            )
    return results


def describe_mismatch(case: str, mismatch: Mismatch) -> str:
    """`case basic, OUTPUT0: 2 of 4 values differ ...; max abs diff 2, first at [0, 2]: ...`."""
    text = f"case {case}, {mismatch.output}: {mismatch.message}"
    if mismatch.max_abs_diff is not None:
        text += f"; max abs diff {mismatch.max_abs_diff:.6g}"
    if mismatch.first_index is not None:
        text += (
            f"; first at {list(mismatch.first_index)}: expected {mismatch.expected!r}, "
            f"got {mismatch.actual!r}"
        )
    return text


def raise_for_failures(
    results: Sequence[SmokeResult], *, endpoint: str, endpoint_url: str | None = None
) -> None:
    failed = [result for result in results if not result.ok]
    if not failed:
        return
    unchanged = "clients still use the previous manifest, and unchanged models keep serving"
    if all(result.failure == ENDPOINT_FAILURE for result in failed):
        where = endpoint_url or "the SageMaker runtime of the region (AWS_ENDPOINT_URL if set)"
        lines = "; ".join(f"{r.name}: {_brief(r.error)}" for r in failed)
        raise SmokeTestFailedError(
            f"the smoke test reached no SageMaker data plane at {where} (no answer, or one "
            f"that is not SageMaker's), so no model was tested: {lines}",
            where=f"endpoint {endpoint}",
            fix="point the smoke test at a SageMaker-compatible endpoint (--smoke-endpoint-url "
            "and --smoke-endpoint-name; against an emulated AWS, the ones `deploy emulate` "
            f"prints) or pass --skip-smoke; {unchanged}",
        )
    lines = "; ".join(f"{r.name} ({r.target_model}): {r.error}" for r in failed)
    golden = any(result.failure == GOLDEN_FAILURE for result in failed)
    raise SmokeTestFailedError(
        f"smoke test failed for {len(failed)} model(s): {lines}",
        where=f"endpoint {endpoint}",
        fix="fix the named model(s)"
        + (
            ", or record the new answers with `deploy invoke --record-golden NAME --force` "
            "if they are right,"
            if golden
            else ""
        )
        + f" and re-run `deploy up`; {unchanged}",
    )


def _brief(error: str, limit: int = 300) -> str:
    """One line of an error (an HTML page, say) for the summary."""
    text = " ".join(error.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
