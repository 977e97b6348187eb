"""Runs a TorchScript model once on a sample, for `deploy init-config`, in the box.

Run as a script by `deploy.repository.init_config` (never imported):

    python -E -s -B torchscript_stub.py MODEL_PT SAMPLE_NPZ RESULT_JSON

Loading a TorchScript file runs the code saved in it, so it happens here, not
in deploy's process. The result file gets {"arguments": [...], "outputs":
[{"dtype": ..., "shape": [...]}]}, or {"error": STEP, "message": ...} where
STEP is torch (not installed), load, run or result.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any


def _run(model_pt: str, sample: str) -> dict[str, Any]:
    import numpy as np

    try:
        import torch
    except ImportError as exc:
        return {"error": "torch", "message": str(exc)}
    with np.load(sample, allow_pickle=False) as loaded:
        arrays = [(key, loaded[key]) for key in loaded.files]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TorchScript is deprecated upstream
            module = torch.jit.load(model_pt, map_location="cpu")  # type: ignore[no-untyped-call]
        arguments = [a.name for a in module.forward.schema.arguments if a.name != "self"]
    except (RuntimeError, AttributeError, ValueError) as exc:
        return {"error": "load", "message": str(exc)}
    keys = [key for key, _ in arrays]
    ordered = (
        [dict(arrays)[key] for key in arguments]
        if sorted(keys) == sorted(arguments)
        else [array for _, array in arrays]
    )
    try:
        with torch.no_grad():
            result = module(*(torch.from_numpy(np.ascontiguousarray(a)) for a in ordered))
    except Exception as exc:  # whatever the model raises on this sample
        return {"error": "run", "message": f"{type(exc).__name__}: {exc}", "arguments": arguments}
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    if not outputs or not all(isinstance(o, torch.Tensor) for o in outputs):
        return {"error": "result", "message": type(result).__name__}
    described = []
    for output in outputs:
        if output.dtype == torch.bfloat16:
            dtype = "bfloat16"
        else:
            dtype = output.detach().cpu().numpy().dtype.str
        described.append({"dtype": dtype, "shape": list(output.shape)})
    return {"arguments": arguments, "outputs": described}


def main(argv: list[str]) -> int:
    model_pt, sample, result_path = argv
    try:
        result = _run(model_pt, sample)
    except BaseException as exc:  # the model's code may raise anything
        result = {"error": "run", "message": f"{type(exc).__name__}: {exc}"}
    Path(result_path).write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
