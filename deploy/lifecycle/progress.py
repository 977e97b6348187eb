"""What `deploy up` shows while it works, on stderr (stdout keeps the result).

- `SilentReporter` (`--json`, tests): records, prints nothing;
- `LineReporter` (a log, CI): one line as each stage starts;
- `RichReporter` (a terminal): the stage lines, plus a byte bar for packaging
  and uploads and a live table while stacks roll out and the endpoint starts.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any


class SilentReporter:
    """For --json output and tests: records, prints nothing."""

    def __init__(self) -> None:
        self.bytes_uploaded = 0
        self.rollout_updates: list[tuple[str, str, str]] = []
        self.stages: list[tuple[str, str]] = []

    @property
    def package_progress(self) -> bool:
        return False

    def stage(self, name: str, detail: str = "") -> None:
        self.stages.append((name, detail))

    def upload_started(self, files: int, total_bytes: int) -> None:
        self.bytes_uploaded = 0

    def uploaded(self, nbytes: int) -> None:
        self.bytes_uploaded += nbytes

    def upload_finished(self) -> None:
        return None

    def rollout(self, stack: str, status: str, endpoint_status: str, events: Sequence[str]) -> None:
        self.rollout_updates.append((stack, status, endpoint_status))

    def rollout_finished(self) -> None:
        return None


def _stage_line(name: str, detail: str, seconds: float) -> str:
    return f"[{seconds:4.0f}s] {name}" + (f": {detail}" if detail else "")


class LineReporter(SilentReporter):
    """One plain line per stage on stderr (logs, CI, a pipe)."""

    def __init__(self) -> None:
        super().__init__()
        self._started = time.monotonic()

    def stage(self, name: str, detail: str = "") -> None:
        super().stage(name, detail)
        sys.stderr.write(_stage_line(name, detail, time.monotonic() - self._started) + "\n")
        sys.stderr.flush()

    def rollout(self, stack: str, status: str, endpoint_status: str, events: Sequence[str]) -> None:
        # One line each time the stack or the endpoint (a traffic shift's step) moves on.
        changed = not self.rollout_updates or self.rollout_updates[-1] != (
            stack,
            status,
            endpoint_status,
        )
        super().rollout(stack, status, endpoint_status, events)
        if changed:
            endpoint = f", endpoint {endpoint_status}" if endpoint_status else ""
            line = _stage_line("rollout", f"{stack} {status}{endpoint}", self._elapsed())
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def _elapsed(self) -> float:
        return time.monotonic() - self._started


class RichReporter(SilentReporter):
    """Stage lines, byte progress bars and a live rollout table (stderr, a terminal)."""

    def __init__(self) -> None:
        super().__init__()
        from rich.console import Console

        self._console = Console(stderr=True)
        self._progress: Any = None
        self._task: Any = None
        self._live: Any = None
        self._started = time.monotonic()

    @property
    def package_progress(self) -> bool:
        return True

    def stage(self, name: str, detail: str = "") -> None:
        super().stage(name, detail)
        from rich.text import Text

        line = _stage_line(name, detail, time.monotonic() - self._started)
        self._console.print(Text(line, style="bold"), highlight=False)

    def upload_started(self, files: int, total_bytes: int) -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        super().upload_started(files, total_bytes)
        self._progress = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=self._console,
        )
        self._progress.start()
        self._task = self._progress.add_task(f"uploading {files} archive(s)", total=total_bytes)

    def uploaded(self, nbytes: int) -> None:
        super().uploaded(nbytes)
        if self._progress is not None:
            self._progress.update(self._task, advance=nbytes)

    def upload_finished(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def rollout(self, stack: str, status: str, endpoint_status: str, events: Sequence[str]) -> None:
        from rich.live import Live
        from rich.table import Table

        super().rollout(stack, status, endpoint_status, events)
        table = Table(title=f"rollout ({time.monotonic() - self._started:.0f} s)", expand=False)
        table.add_column("stack")
        table.add_column("status")
        table.add_column("endpoint")
        table.add_row(stack, status, endpoint_status or "-")
        for line in list(events)[:6]:
            table.add_row("", f"[dim]{line}[/dim]", "")
        if self._live is None:
            self._live = Live(table, console=self._console, refresh_per_second=4, transient=False)
            self._live.start()
        else:
            self._live.update(table)

    def rollout_finished(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


def reporter(*, interactive: bool, lines: bool = True) -> SilentReporter:
    """Rich views on a terminal, else stage lines (`lines`), else silence."""
    if interactive:
        return RichReporter()
    return LineReporter() if lines else SilentReporter()
