"""Boxed code may write its own process's files under /proc, and no other process's.

The CUDA driver writes files of its own process under /proc/self; where the
box refused that, `torch.cuda` failed inside tritonserver's python stub
(cudaGetDeviceCount: error 304) and a KIND_GPU TorchScript model ran on the
CPU without a word (seen on an H100 machine; `bench/device/box_gpu_check.py`
shows it there). Here, without a GPU: a boxed process renames itself through
/proc/self/comm, and cannot rename the process that started it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from deploy import box

CODE = """
import os, sys
results = []
for path in ("/proc/self/comm", f"/proc/{os.getppid()}/comm"):
    try:
        with open(path, "w") as f:
            f.write("boxed")
        results.append("w")
    except OSError:
        results.append("-")
print("".join(results))
"""


def test_boxed_code_writes_its_own_proc_files_only(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    with box.scratch() as scratch, out.open("wb") as stdout:
        outcome = box.run(
            [sys.executable, "-c", CODE],
            box=scratch,
            timeout=60,
            stdout=stdout,
            stderr=subprocess.STDOUT,
        )
    assert outcome.returncode == 0, out.read_text()
    assert out.read_text().strip() == "w-", out.read_text()
