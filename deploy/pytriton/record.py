"""Runs a PyTriton script in its own process with the stand-in and reads what it bound.

The script is repository code: it runs in the box (`deploy.box`), in a
separate Python (this one's interpreter, so it imports what the user
installed), from a fresh copy of its folder, with no stdin, bounded by a
timeout. The stand-in (`standin/pytriton`)
is first on its `sys.path`, so `from pytriton.triton import Triton` gets the
recorder and no server starts. The process writes a JSON description
(`standin/pytriton/_record.py`); nothing of the script is imported here.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deploy import box
from deploy.box.copies import fresh_copy
from deploy.errors import BindError

STANDIN_ROOT = Path(__file__).resolve().parent / "standin"
RECORD_TIMEOUT_S = 300.0
_OUTPUT_TAIL = 2000  # characters of the script's stderr quoted in an error

# sys.path: the stand-in, then the script's folder (as `python SCRIPT` would have it).
_BOOT = (
    "import sys; sys.path[0:1] = [sys.argv[1]]; "
    "from pytriton._record import main; main(sys.argv[2], sys.argv[3])"
)


def record(
    script: Path,
    argv: list[str],
    *,
    timeout: float = RECORD_TIMEOUT_S,
    ignore: Callable[[str, list[str]], set[str]] | None = None,
) -> dict[str, Any]:
    """Run `script` with `argv` under the stand-in; its bindings and serve/run calls.

    The script runs in the box (`deploy.box`) from a fresh copy of its folder
    (less what `ignore` leaves out). Returns the description `_record.py`
    writes: {"bindings": [...], "calls": [...]} or {"error": {...}} when the
    script raised, with the copy's paths given back as the script's own.
    Raises `BindError` when the process hangs past `timeout` or dies without
    reporting.
    """
    if box.skip_reason() is not None:
        raise box.refused(str(script), "deploy bind", fix="write the model repository by hand")
    box.announce(script, "deploy bind records the models it binds")
    with box.scratch(prefix="deploy-bind-") as scratch:
        work = scratch.work
        copy = work / "script" / script.parent.name
        linked = fresh_copy(script.parent, copy, skip=ignore)
        request, result = work / "request.json", work / "result.json"
        request.write_text(
            json.dumps({"script": str(copy / script.name), "argv": argv}), encoding="utf-8"
        )
        stderr_path = work / "stderr.txt"
        with stderr_path.open("wb") as stderr:
            outcome = box.run(
                [sys.executable, "-B", "-c", _BOOT, str(STANDIN_ROOT), str(request), str(result)],
                box=scratch,
                writable=[copy],
                readable=[STANDIN_ROOT, *linked],
                limits=_limits(timeout),
                timeout=timeout,
                stderr=stderr,
                env={"PWD": str(copy)},
            )
        if outcome.timed_out:
            raise BindError(
                f"the script did not finish within {timeout:g} s",
                where=str(script),
                fix="make the script return after Triton.serve() (deploy bind runs it "
                "with serve() returning at once), or raise --timeout for slow model loading",
            )
        output = stderr_path.read_text(encoding="utf-8", errors="replace").strip()
        try:
            document = json.loads(result.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            document = None
    if not isinstance(document, dict):
        code = outcome.returncode
        reason = (
            f"was killed by signal {-code}"
            if code < 0
            else f"exited with status {code} before reporting"
        )
        tail = output[-_OUTPUT_TAIL:]
        raise BindError(
            f"the process running the script {reason}"
            + (f"; its last output: {tail}" if tail else ""),
            where=str(script),
            fix="run the script with python to see why it stops",
        )
    unmoved: dict[str, Any] = _unmoved(document, str(copy), str(script.parent))
    return unmoved


def _limits(timeout: float) -> box.Limits:
    """CPU for `timeout` s on every core, this machine's memory, 4 GiB files."""
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    cpu = int(timeout * (os.cpu_count() or 1)) + 1
    return box.Limits(cpu_s=cpu, data_bytes=memory, file_bytes=4 << 30, open_files=4096)


def _unmoved(value: Any, copy: str, folder: str) -> Any:
    """`value` with paths inside the copy given back as paths inside the script's folder."""
    if isinstance(value, str):
        return folder + value[len(copy) :] if value.startswith(copy) else value
    if isinstance(value, list):
        return [_unmoved(item, copy, folder) for item in value]
    if isinstance(value, dict):
        return {key: _unmoved(item, copy, folder) for key, item in value.items()}
    return value
