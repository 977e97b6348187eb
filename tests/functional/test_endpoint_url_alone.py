"""`--endpoint-url` alone reaches a local endpoint: its name comes from the endpoint itself.

`deploy serve` answers `GET /deploy/manifest.json` with its name in a header;
`bench`, `invoke` and the SDK read it when no endpoint name is given.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.client import Endpoint, EndpointError, endpoint_name_at
from deploy.local.http.wire import ENDPOINT_NAME_HEADER
from tests.conftest import LocalEndpointHandle

pytestmark = [pytest.mark.triton, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_sdk_and_the_local_endpoint_agree_on_the_header() -> None:
    from deploy.client._discovery import ENDPOINT_NAME_HEADER as SDK_HEADER

    assert SDK_HEADER == ENDPOINT_NAME_HEADER  # the SDK keeps its own copy


def test_the_endpoint_names_itself(local_endpoint: LocalEndpointHandle) -> None:
    assert endpoint_name_at(local_endpoint.url) == local_endpoint.endpoint_name
    assert endpoint_name_at(f"http://127.0.0.1:{_free_port()}") is None


def test_the_sdk_needs_only_the_url(local_endpoint: LocalEndpointHandle) -> None:
    ones = np.ones((1, 4), np.float32)
    with Endpoint(endpoint_url=local_endpoint.url) as endpoint:
        assert endpoint.name == local_endpoint.endpoint_name
        result = endpoint.infer("addsub", {"INPUT0": ones, "INPUT1": ones})
    assert result["OUTPUT0"].tolist() == [[2.0, 2.0, 2.0, 2.0]]
    with pytest.raises(EndpointError) as caught:
        Endpoint(endpoint_url=f"http://127.0.0.1:{_free_port()}")
    assert caught.value.fix and "Endpoint(name, endpoint_url=...)" in caught.value.fix


def test_invoke_and_bench_need_only_the_url(
    local_endpoint: LocalEndpointHandle, tmp_path: Path
) -> None:
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"INPUT0": [[1, 2, 3, 4]], "INPUT1": [[1, 1, 1, 1]]}))
    runner = CliRunner()
    called = runner.invoke(
        app, ["invoke", "addsub", "--input", str(inputs), "--endpoint-url", local_endpoint.url]
    )
    assert called.exit_code == 0, called.output
    assert "OUTPUT0" in called.output

    bench = runner.invoke(
        app,
        ["bench", "addsub", "--endpoint-url", local_endpoint.url, "-c", "1",
         "--duration", "0.5", "--warmup", "0", "--json"],
    )  # fmt: skip
    assert bench.exit_code == 0, bench.output
    report = json.loads(bench.stdout)
    assert report["failed"] is False and report["steps"][0]["ok"] > 0
