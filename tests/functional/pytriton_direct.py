"""Calls a PyTriton script's bound callable directly, as PyTriton would: run as a script.

    python pytriton_direct.py STANDIN SCRIPT MODEL REQUESTS.npz OUT.npz

REQUESTS.npz holds one request (one array per input name; BYTES inputs as
object arrays of bytes, as Triton hands them over). The script runs under the
stand-in (no server), the model's first callable gets PyTriton's Triton
context and is called with `[Request(inputs)]`; OUT.npz gets the response.
A separate process: the stand-in must be the top-level `pytriton` there.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def main(standin: str, script: str, model: str, requests: str, out: str) -> None:
    sys.path.insert(0, standin)
    from pytriton._context import inject_triton_context, triton_model_config
    from pytriton._script import run_script
    from pytriton.proxy.types import Request

    recording = run_script(Path(script), [])
    binding = next(b for b in recording.bindings if b.model_name == model)
    func = binding.infer_funcs[0]
    inject_triton_context(binding, func, triton_model_config(binding))
    with np.load(requests, allow_pickle=True) as loaded:
        data = {name: loaded[name] for name in loaded.files}
    (response,) = func([Request(data=data)])
    np.savez(out, **response)


if __name__ == "__main__":
    main(*sys.argv[1:6])
