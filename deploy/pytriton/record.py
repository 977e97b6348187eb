"""Runs a PyTriton script in its own process with the stand-in and reads what it bound.

The script is the user's code: it runs in a separate Python (this one's
interpreter, so it imports what the user installed), in its own process
group, with no stdin, bounded by a timeout. The stand-in (`standin/pytriton`)
is first on its `sys.path`, so `from pytriton.triton import Triton` gets the
recorder and no server starts. The process writes a JSON description
(`standin/pytriton/_record.py`); nothing of the script is imported here.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from deploy.errors import BindError

STANDIN_ROOT = Path(__file__).resolve().parent / "standin"
RECORD_TIMEOUT_S = 300.0
_OUTPUT_TAIL = 2000  # characters of the script's stderr quoted in an error

# sys.path: the stand-in, then the script's folder (as `python SCRIPT` would have it).
_BOOT = (
    "import sys; sys.path[0:1] = [sys.argv[1]]; "
    "from pytriton._record import main; main(sys.argv[2], sys.argv[3])"
)


def record(script: Path, argv: list[str], *, timeout: float = RECORD_TIMEOUT_S) -> dict[str, Any]:
    """Run `script` with `argv` under the stand-in; its bindings and serve/run calls.

    Returns the description `_record.py` writes: {"bindings": [...], "calls":
    [...]} or {"error": {...}} when the script raised. Raises `BindError` when
    the process hangs past `timeout` or dies without reporting.
    """
    with tempfile.TemporaryDirectory(prefix="deploy-bind-") as scratch:
        work = Path(scratch)
        request, result = work / "request.json", work / "result.json"
        request.write_text(json.dumps({"script": str(script), "argv": argv}), encoding="utf-8")
        stderr_path = work / "stderr.txt"
        with (work / "stdout.txt").open("wb") as stdout, stderr_path.open("wb") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-B", "-c", _BOOT, str(STANDIN_ROOT), str(request), str(result)],
                cwd=script.parent,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,  # its own process group, killed as a whole
            )
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                raise BindError(
                    f"the script did not finish within {timeout:g} s",
                    where=str(script),
                    fix="make the script return after Triton.serve() (deploy bind runs it "
                    "with serve() returning at once), or raise --timeout for slow model loading",
                ) from None
            finally:
                _kill_group(process)  # whatever the script left running
        output = stderr_path.read_text(encoding="utf-8", errors="replace").strip()
        try:
            document = json.loads(result.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            document = None
    if not isinstance(document, dict):
        code = process.returncode
        reason = (
            f"was killed by signal {-code}"
            if code is not None and code < 0
            else f"exited with status {code} before reporting"
        )
        tail = output[-_OUTPUT_TAIL:]
        raise BindError(
            f"the process running the script {reason}"
            + (f"; its last output: {tail}" if tail else ""),
            where=str(script),
            fix="run the script with python to see why it stops",
        )
    return document


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
