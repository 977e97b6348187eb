"""Whether torch reaches the GPU from inside deploy's box (run on a GPU machine).

Runs `torch.cuda.init()` in a child: without the box, in the box the
python-backend stub gets (deploy.local.triton.install.STUB_LIMITS, scope off), and in
that box less the write right on /proc/self, which the CUDA driver needs (on an
H100 machine: cudaGetDeviceCount error 304 without it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from deploy import box
from deploy.box.environment import scrubbed_environment
from deploy.local.triton.install import STUB_LIMITS

CODE = (
    "import torch\n"
    "try:\n"
    "    torch.cuda.init(); print('cuda ok, devices:', torch.cuda.device_count())\n"
    "except Exception as exc:\n"
    "    print('cuda FAILED:', repr(exc)[:200])\n"
)


def main() -> None:
    command = [sys.executable, "-c", CODE]
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch)
        env = scrubbed_environment(home=home, tmp=home)
        readable = [Path(p) for p in sys.path if p and Path(p).is_dir()]
        stub = {**box._spec([home], readable, STUB_LIMITS, keeper=True), "scope": False}
        variants = {
            "stub's box": stub,
            "without /proc/self": {
                **stub,
                "write": [place for place in stub["write"] if place != "/proc/self"],
            },
        }
        out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        print(f"{'no box':>20}: {out.stdout.strip()}", flush=True)
        for name, spec in variants.items():
            boxed = [sys.executable, "-I", "-B", str(box.ENTER_SCRIPT), json.dumps(spec), "--"]
            out = subprocess.run(
                [*boxed, *command], capture_output=True, text=True, env=env, timeout=120, cwd=home
            )
            print(f"{name:>20}: {out.stdout.strip()} {out.stderr.strip()[-300:]}", flush=True)


if __name__ == "__main__":
    main()
