"""The SDK's per-model metrics, when asked for: one EMF record per `infer` call.

Off by default. `Endpoint(metrics=...)` (and `AsyncEndpoint`) turns it on:
`True` writes to standard output (what a Lambda function or a container with
the CloudWatch agent ships to CloudWatch Logs), a stream (anything with
`write`) gets one line per call, a `logging.Logger` one INFO record per call
whose message is the line. Left unset, the environment variable
`DEPLOY_MODEL_METRICS` decides: `stdout` (or `1`, `true`), `stderr`, or off
(`0`, `false`, empty). The records are `deploy.client.model_metrics`'s, the
front door's: the same names, dimensions and error classes, so an SDK caller's
calls and the front door's land in the same metrics.

A call is what `infer` did, retries included: its latency is the whole call
as the caller waited for it, its bytes the InvokeEndpoint request and answer
bodies (0 for an answer through S3), its error class that of the exception
it raised. Exceptions that are not the SDK's (`ClientError`) are programming
errors, not calls, and are not counted.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import Any, TextIO

from deploy.client import model_metrics
from deploy.client._errors import (
    ClientError,
    EndpointError,
    InferenceTimeoutError,
    ModelError,
    ResponseFormatError,
)
from deploy.client.manifest import ROUTER_PARAMETER

ENV = "DEPLOY_MODEL_METRICS"
_ON = frozenset({"1", "true", "yes", "on", "stdout"})
_OFF = frozenset({"", "0", "false", "no", "off"})

# What `metrics=` takes: True/False, a stream, a logger; None reads ENV.
MetricsOption = bool | TextIO | logging.Logger | None


class Call:
    """What one `infer` call did, filled in as it goes."""

    __slots__ = ("request_bytes", "response_bytes", "route", "started")

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.route: Any = None  # deploy.client._core.Route, once the name is resolved
        self.request_bytes = 0
        self.response_bytes = 0


class MetricsSink:
    """Writes each call's record to a stream (or stdout/stderr, looked up when written,
    as test runners and Lambda swap them) or a logger."""

    def __init__(self, target: TextIO | logging.Logger | str, endpoint: str) -> None:
        self._target = target
        self._endpoint = endpoint
        self._lock = threading.Lock()

    def emit(self, call: Call, error: BaseException | None) -> None:
        route = call.route
        info = getattr(route, "info", None)
        target = None
        if route is not None:
            target = route.target_model or route.parameters.get(ROUTER_PARAMETER)
        document = model_metrics.record(
            endpoint=self._endpoint,
            model=info.name if info is not None else None,
            target_model=target,
            latency_ms=(time.perf_counter() - call.started) * 1000,
            request_bytes=call.request_bytes,
            response_bytes=call.response_bytes,
            error=error_class(error) if error is not None else None,
        )
        text = model_metrics.line(document)
        target_stream = self._target
        if isinstance(target_stream, logging.Logger):
            target_stream.info(text)
            return
        stream = getattr(sys, target_stream) if isinstance(target_stream, str) else target_stream
        with self._lock:
            stream.write(text + "\n")
            stream.flush()


def error_class(exc: BaseException) -> str:
    """The error metric an SDK exception counts in (`model_metrics.error_class`'s)."""
    if isinstance(exc, ModelError):
        return model_metrics.MODEL_ERRORS
    if isinstance(exc, EndpointError):
        found = model_metrics.error_class(exc.status or 502, exc.code)
        return found or model_metrics.MODEL_ERRORS
    if isinstance(exc, InferenceTimeoutError | ResponseFormatError):
        return model_metrics.MODEL_ERRORS  # a 504 / 502 from where the caller stands
    # Invalid inputs, an unknown model, a manifest the caller points at: the caller's side.
    return model_metrics.CLIENT_ERRORS


def sink_for(option: MetricsOption, endpoint: str) -> MetricsSink | None:
    """The sink `metrics=option` asks for (None: off)."""
    if option is None:
        value = os.environ.get(ENV, "").strip().lower()
        if value in _OFF:
            return None
        if value in _ON:
            return MetricsSink("stdout", endpoint)
        if value == "stderr":
            return MetricsSink("stderr", endpoint)
        raise ValueError(
            f"{ENV}={os.environ[ENV]!r} is not a metrics destination: set it to stdout, "
            "stderr or 0 (off), or pass metrics= to the endpoint"
        )
    if option is False:
        return None
    if option is True:
        return MetricsSink("stdout", endpoint)
    if isinstance(option, logging.Logger) or callable(getattr(option, "write", None)):
        return MetricsSink(option, endpoint)
    raise TypeError(
        f"metrics= takes True, False, a stream (with write()) or a logging.Logger, "
        f"not {type(option).__name__}"
    )


def counted(exc: BaseException) -> bool:
    """Whether a call that raised `exc` is a call (the SDK's errors), not a bug."""
    return isinstance(exc, ClientError)
