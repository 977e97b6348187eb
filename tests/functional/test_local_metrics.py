"""`/metrics` of the local endpoint and `deploy status --local` end to end.

GIVEN `deploy up --local` serving the example repository (real tritonserver)
WHEN boto3 calls two models, one of them always with inputs it does not take
THEN `/metrics` counts exactly those calls, errors and bytes under the logical
names, and `deploy status --local` (`--json` and the table) reports the same.
"""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from botocore.exceptions import ClientError
from typer.testing import CliRunner

from deploy.cli import app
from deploy.local.http import metrics
from tests.conftest import EXAMPLES
from tests.functional.local_models import decode, encode, runtime_client

pytestmark = [pytest.mark.triton, pytest.mark.slow]

GOOD = 5
BAD = 3


def scrape(url: str) -> tuple[str, dict[tuple[str, str], dict[str, Any]]]:
    host, _, port = url.removeprefix("http://").partition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        body = response.read().decode()
        assert response.status == 200, body
        assert response.getheader("Content-Type") == metrics.CONTENT_TYPE
    finally:
        connection.close()
    rows = metrics.per_model(metrics.parse(body))
    return body, {(str(r["model"]), str(r["target_model"])): r for r in rows}


def by_name(rows: dict[tuple[str, str], dict[str, Any]], name: str) -> dict[str, Any]:
    [row] = [row for (model, _), row in rows.items() if model == name]
    return row


def test_metrics_and_status_count_calls_under_logical_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEPLOY_LOCAL_PORT", "0")
    runner = CliRunner()
    up = runner.invoke(
        app,
        ["up", "--local", "--repository", str(EXAMPLES), "--package-dir", "build", "--json"],
    )
    try:
        assert up.exit_code == 0, up.output
        url = json.loads(up.output)["url"]
        manifest = json.loads((tmp_path / "build" / "manifest.json").read_text())["models"]
        targets = {name: entry["target_model"] for name, entry in manifest.items()}
        _, before = scrape(url)  # the smoke requests of `up` are counted too

        client = runtime_client(url)
        good_body, good_type = encode(
            {"INPUT0": np.ones((1, 4), np.float32), "INPUT1": np.ones((1, 4), np.float32)}
        )
        sent = 0
        for _ in range(GOOD):
            response = client.invoke_endpoint(
                EndpointName="local",
                TargetModel=targets["addsub"],
                Body=good_body,
                ContentType=good_type,
            )
            answer = response["Body"].read()
            sent += len(answer)
            assert decode(answer, response["ContentType"])["OUTPUT0"].tolist() == [[2.0] * 4]
        # bls_addsub takes A and B: INPUT0/INPUT1 are refused by the model (ModelError).
        for _ in range(BAD):
            with pytest.raises(ClientError) as refused:
                client.invoke_endpoint(
                    EndpointName="local",
                    TargetModel=targets["bls_addsub"],
                    Body=good_body,
                    ContentType=good_type,
                )
            assert refused.value.response["Error"]["Code"] == "ModelError"

        text, after = scrape(url)
        assert ("addsub", targets["addsub"]) in after
        assert ("bls_addsub", targets["bls_addsub"]) in after

        def delta(name: str) -> dict[str, Any]:
            now, then = by_name(after, name), by_name(before, name)
            return {
                "calls": now["calls"] - then["calls"],
                "errors": {k: v - then["errors"][k] for k, v in now["errors"].items()},
                "request_bytes": now["request_bytes"] - then["request_bytes"],
                "response_bytes": now["response_bytes"] - then["response_bytes"],
            }

        no_errors = dict.fromkeys(metrics.CLASSES, 0)
        assert delta("addsub") == {
            "calls": GOOD,
            "errors": no_errors,
            "request_bytes": GOOD * len(good_body),
            "response_bytes": sent,
        }
        bad = delta("bls_addsub")
        assert bad["calls"] == BAD
        assert bad["errors"] == {**no_errors, "model": BAD}
        assert bad["request_bytes"] == BAD * len(good_body)
        assert bad["response_bytes"] > 0  # the error documents
        # Every call of the histogram is in its count, and a quantile follows from it.
        samples = metrics.parse(text)
        label = {"model": "addsub", "target_model": targets["addsub"]}
        count = [
            v for n, lab, v in samples if n == "deploy_invocation_seconds_count" and lab == label
        ]
        inf = [
            v
            for n, lab, v in samples
            if n == "deploy_invocation_seconds_bucket" and lab == {**label, "le": "+Inf"}
        ]
        assert count == inf == [by_name(after, "addsub")["calls"]]
        assert (
            0 < by_name(after, "addsub")["p50_seconds"] <= by_name(after, "addsub")["p99_seconds"]
        )

        status = runner.invoke(app, ["status", "--local", "--json"])
        assert status.exit_code == 0, status.output
        calls = {(r["model"], r["target_model"]): r for r in json.loads(status.output)["calls"]}
        _, latest = scrape(url)  # nothing was invoked meanwhile: the same numbers
        assert calls == latest == after

        table = runner.invoke(app, ["status", "--local"], terminal_width=200)
        assert table.exit_code == 0, table.output
        shown = table.output.split("calls since start", 1)[1]
        [row] = [line for line in shown.splitlines() if " bls_addsub " in line]
        assert str(by_name(after, "bls_addsub")["calls"]) in row
        assert f"{BAD} model" in row
    finally:
        down = runner.invoke(app, ["down", "--local"])
    assert down.exit_code == 0, down.output
