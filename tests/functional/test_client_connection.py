"""A connection the endpoint refuses is a connection failure, never a timeout."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from deploy.client import Endpoint, InferenceTimeoutError, RetriesExhaustedError


def test_a_refused_connection_is_an_endpoint_error_not_a_timeout() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])  # nothing listens there once closed
    url = f"http://127.0.0.1:{port}"
    with (
        Endpoint("e", endpoint_url=url, retries=1, timeout=30) as client,
        pytest.raises(RetriesExhaustedError) as caught,
    ):
        client.infer("m.tar.gz", {"X": np.zeros(1, np.float32)})
    assert not isinstance(caught.value, InferenceTimeoutError)
    assert caught.value.status is None
    assert "connection failed" in caught.value.message
