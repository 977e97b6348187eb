"""Structured JSON log lines on stdout (CloudWatch Logs Insights reads the fields).

Written with msgspec (packaged with the Lambda: fast_json.py): an inference
request's line carries its embedded-metric record, and the standard library's
encoder took about 30 µs for it, msgspec under 10. Values of other types are
written as `str()` gives them, as `json.dumps(default=str)` did.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import msgspec

_RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
_ENCODER = msgspec.json.Encoder(enc_hook=str)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "level": record.levelname,
            "message": record.getMessage(),
            "logger": record.name,
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _RESERVED})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return _ENCODER.encode(entry).decode("utf-8")


class _StdoutHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stdout` is at emit time (the runtime may swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stdout
        super().emit(record)


def get_logger(name: str = "front_door") -> logging.Logger:
    logger = logging.getLogger(name)
    if not logger.handlers:
        handler = _StdoutHandler()
        handler.setFormatter(JsonFormatter())
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        # The Lambda runtime's root handler would print every line a second time.
        logger.propagate = False
    return logger
