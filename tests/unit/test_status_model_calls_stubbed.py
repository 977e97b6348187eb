"""`deploy status` reads each model's calls from CloudWatch: STUBBED CloudWatch.

LABEL: CloudWatch here is a botocore Stubber, not CloudWatch. moto computes no
percentiles and turns no embedded-metric log line into metrics, so the
GetMetricData answer below is written by hand, to the shape of botocore's
CloudWatch service model (the Stubber refuses a request or an answer that does
not fit it, and checks the request against the one expected). The answer
plays what CloudWatch would have computed from the front door's EMF records;
the test never writes metrics, and what it checks is what our code asked for
and made of the answer: the queries, the rows, and the table `deploy status`
prints, the same table as `deploy status --local`.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from rich.console import Console
from typer.testing import CliRunner

from deploy.aws.cloudwatch import CloudWatch, parse_window
from deploy.cli.lifecycle import _print_calls
from deploy.lifecycle.render import render_status

ENDPOINT = "shop"
MODELS = {"resnet": "resnet-1f3c5a7e9b2d4c6a.tar.gz", "bert": "bert-0a1b2c3d4e5f6789.tar.gz"}
NOW = datetime(2026, 11, 26, 12, 34, 56, tzinfo=UTC)
END = datetime(2026, 11, 26, 12, 35, tzinfo=UTC)  # the next whole minute
KEYS = [
    ("calls", "Requests", "Sum"),
    ("p50", "Latency", "p50"),
    ("p99", "Latency", "p99"),
    ("client", "ClientErrors", "Sum"),
    ("model", "ModelErrors", "Sum"),
    ("throttled", "Throttles", "Sum"),
    ("sent", "RequestBytes", "Sum"),
    ("answered", "ResponseBytes", "Sum"),
]
# What CloudWatch would answer for the last hour (one period: one value per query);
# bert had no calls, so its queries come back empty.
ANSWERS = {
    "resnet": {
        "calls": 1200.0,
        "p50": 12.5,
        "p99": 87.25,
        "client": 3.0,
        "model": 1.0,
        "throttled": 0.0,
        "sent": 7.2e6,
        "answered": 4.8e5,
    },
    "bert": {},
}


class _Session:
    """Hands `CloudWatch` the stubbed client (AwsSession.client's signature)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def client(self, service: str, **_: Any) -> Any:
        assert service == "cloudwatch"
        return self._client


def _queries(window_s: int) -> list[dict[str, Any]]:
    queries = []
    for index, name in enumerate(sorted(MODELS)):
        for key, metric, stat in KEYS:
            queries.append(
                {
                    "Id": f"m{index}_{key}",
                    "MetricStat": {
                        "Metric": {
                            "Namespace": "Deploy/Models",
                            "MetricName": metric,
                            "Dimensions": [
                                {"Name": "Endpoint", "Value": ENDPOINT},
                                {"Name": "Model", "Value": name},
                            ],
                        },
                        "Period": window_s,
                        "Stat": stat,
                    },
                    "ReturnData": True,
                }
            )
    return queries


def _answer(window_s: int) -> dict[str, Any]:
    results = []
    for index, name in enumerate(sorted(MODELS)):
        for key, metric, stat in KEYS:
            value = ANSWERS[name].get(key)
            results.append(
                {
                    "Id": f"m{index}_{key}",
                    "Label": f"{metric} {stat}",
                    "Timestamps": [] if value is None else [END - timedelta(seconds=window_s)],
                    "Values": [] if value is None else [value],
                    "StatusCode": "Complete",
                }
            )
    return {"MetricDataResults": results, "Messages": []}


def stubbed_rows(window_s: int) -> list[dict[str, Any]]:
    client = boto3.client(
        "cloudwatch",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    with Stubber(client) as stub:
        stub.add_response(
            "get_metric_data",
            _answer(window_s),
            {
                "StartTime": END - timedelta(seconds=window_s),
                "EndTime": END,
                "MetricDataQueries": _queries(window_s),
            },
        )
        rows = CloudWatch(_Session(client)).model_calls(  # type: ignore[arg-type]
            ENDPOINT, MODELS, window_s=window_s, now=NOW
        )
        stub.assert_no_pending_responses()
    return rows


def test_each_models_calls_percentiles_and_errors_over_the_window() -> None:
    rows = stubbed_rows(parse_window("1h"))
    assert rows == [
        {
            "model": "bert",
            "target_model": MODELS["bert"],
            "calls": 0,
            "errors": {"client": 0, "model": 0, "throttled": 0},
            "request_bytes": 0,
            "response_bytes": 0,
            "p50_seconds": None,
            "p99_seconds": None,
        },
        {
            "model": "resnet",
            "target_model": MODELS["resnet"],
            "calls": 1200,
            "errors": {"client": 3, "model": 1, "throttled": 0},
            "request_bytes": 7_200_000,
            "response_bytes": 480_000,
            "p50_seconds": pytest.approx(0.0125),
            "p99_seconds": pytest.approx(0.08725),
        },
    ]


def _printed(render: Any) -> list[str]:
    buffer = io.StringIO()
    render(Console(file=buffer, width=100, color_system=None))
    return buffer.getvalue().splitlines()


def test_the_aws_table_is_the_local_table_over_a_window() -> None:
    rows = stubbed_rows(parse_window("30m"))
    document = {
        "stage": "prod",
        "region": "us-east-1",
        "stacks": {},
        "models": MODELS,
        "calls_window_s": 1800,
        "calls": rows,
    }
    aws = _printed(lambda out: render_status(document, out))
    title = aws.index(next(line for line in aws if "calls, last 30m" in line))
    table = aws[title + 1 :]
    resnet = next(line for line in table if "resnet" in line)
    cells = [cell.strip() for cell in resnet.split("│")[1:-1]]
    assert cells == ["resnet", "1200", "12.5", "87.2", "3 client, 1 model"]
    bert = [cell.strip() for cell in next(line for line in table if "bert" in line).split("│")]
    assert bert[1:-1] == ["bert", "0", "-", "-", "0"]
    # `deploy status --local` prints its rows (deploy.local.http.metrics.per_model) the same way.
    local = _printed(lambda out: _print_calls(rows, out))
    header = next(line for line in table if "model" in line and "p99 ms" in line)
    assert header in local
    assert [line for line in local if "resnet" in line] == [resnet]


def test_a_window_is_minutes_hours_or_days() -> None:
    assert [parse_window(text) for text in ("1m", "30m", "1h", "2d", "15d")] == [
        60,
        1800,
        3600,
        172800,
        1296000,
    ]
    for wrong in ("0m", "90s", "1w", "16d", "soon"):
        with pytest.raises(ValueError, match="such as 30m, 1h or 2d"):
            parse_window(wrong)


def test_the_window_flag_is_checked_before_any_aws_call() -> None:
    from deploy.cli import app

    runner = CliRunner()
    wrong = runner.invoke(app, ["status", "--window", "soon"])
    assert wrong.exit_code == 2 and "--window" in wrong.output
    local = runner.invoke(app, ["status", "--local", "--window", "1h"])
    assert local.exit_code == 2 and "--window does not apply to --local" in local.output
