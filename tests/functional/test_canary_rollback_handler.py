"""The canary-rollback function (deploy_handlers/canary_rollback) on the moto server's S3.

The event is AWS's published "CloudWatch Alarm State Change" sample for a
metric math alarm (tests/events/canary_alarm.json), with the dimensions a
canary alarm of deploy.lifecycle.canary_alarms has. Concurrent publishes are
real writes to the same object made between the function's read and its
write (`RacingS3` runs them there); moto enforces `If-Match`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from deploy.client import manifest as contract
from deploy_handlers.canary_rollback import app
from tests.functional.test_lifecycle_aws import aws_environment
from tests.functional.test_release_canary import NEW, OLD, canary_manifest

pytestmark = [pytest.mark.moto]

EVENT = json.loads(
    (Path(__file__).resolve().parents[1] / "events" / "canary_alarm.json").read_text()
)
KEY = "models/manifest.json"


@pytest.fixture
def bucket(moto_server: str, request: pytest.FixtureRequest) -> Iterator[str]:
    with aws_environment(moto_server), pytest.MonkeyPatch.context() as patch:
        name = "handler-" + request.node.name.replace("_", "-")[:40].lower().strip("-")
        boto3.client("s3").create_bucket(Bucket=name)
        patch.setenv("MODEL_STORE_BUCKET", name)
        patch.setenv("MANIFEST_KEY", KEY)
        patch.setenv("ENDPOINT_NAME", "ep-handler")
        yield name


def publish(bucket: str, document: dict[str, Any]) -> str:
    body = json.dumps(document).encode()
    return str(boto3.client("s3").put_object(Bucket=bucket, Key=KEY, Body=body)["ETag"])


def published(bucket: str) -> tuple[dict[str, Any], str]:
    response = boto3.client("s3").get_object(Bucket=bucket, Key=KEY)
    return json.loads(response["Body"].read()), str(response["ETag"])


class RacingS3:
    """A real S3 client that lets another publisher write right after each read."""

    def __init__(self, racer: Callable[[int], None]) -> None:
        self._client = boto3.client("s3")
        self._racer = racer
        self.reads = 0

    def get_object(self, **kwargs: Any) -> Any:
        response = self._client.get_object(**kwargs)
        self.reads += 1
        self._racer(self.reads)
        return response

    def put_object(self, **kwargs: Any) -> Any:
        return self._client.put_object(**kwargs)


def test_an_alarm_rolls_its_canary_back_keeping_everything_else(bucket: str) -> None:
    publish(bucket, canary_manifest())
    outcome = app.handler(copy.deepcopy(EVENT), None)
    assert outcome["action"] == "rolled-back"
    assert (outcome["model"], outcome["target_model"], outcome["live"]) == ("alpha", NEW, OLD)
    document, _etag = published(bucket)
    expected = canary_manifest()
    del expected["models"]["alpha"]["canary"]
    assert document == expected  # the unknown key, beta and alpha's live version kept
    assert contract.parse(document, "t").models["alpha"].canary is None


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda e: e["detail"]["state"].update(value="OK"), id="ok-state"),
        pytest.param(
            lambda e: e["detail"]["state"].update(value="INSUFFICIENT_DATA"), id="no-data"
        ),
        pytest.param(
            lambda e: [
                m["metricStat"]["metric"]["dimensions"].update(TargetModel="alpha-9.tar.gz")
                for m in e["detail"]["configuration"]["metrics"]
                if "metricStat" in m
            ],
            id="another-target-model",
        ),
        pytest.param(
            lambda e: [
                m["metricStat"]["metric"]["dimensions"].update(Endpoint="ep-other")
                for m in e["detail"]["configuration"]["metrics"]
                if "metricStat" in m
            ],
            id="another-endpoint",
        ),
    ],
)
def test_other_alarms_and_states_change_nothing(
    bucket: str, change: Callable[[dict[str, Any]], Any]
) -> None:
    etag = publish(bucket, canary_manifest())
    event = copy.deepcopy(EVENT)
    change(event)
    outcome = app.handler(event, None)
    assert outcome["action"] == "ignored", outcome
    assert published(bucket)[1] == etag


def test_a_publish_between_read_and_write_is_kept_and_the_rollback_retried(bucket: str) -> None:
    publish(bucket, canary_manifest())
    other = canary_manifest(percent=30)
    other["models"]["beta"]["target_model"] = "beta-" + "4" * 16 + ".tar.gz"

    def racer(read: int) -> None:
        if read == 1:  # another deploy publishes right after the function's first read
            publish(bucket, other)

    s3 = RacingS3(racer)
    outcome = app.roll_back(EVENT, s3, bucket=bucket, key=KEY, endpoint="ep-handler")
    assert (outcome["action"], outcome["attempts"], outcome["percent"]) == ("rolled-back", 2, 30)
    document, _etag = published(bucket)
    assert document["models"]["beta"] == other["models"]["beta"]  # not overwritten
    assert "canary" not in document["models"]["alpha"]


def test_a_canary_promoted_meanwhile_is_left_alone(bucket: str) -> None:
    publish(bucket, canary_manifest())
    promoted = canary_manifest()
    promoted["models"]["alpha"]["target_model"] = NEW
    del promoted["models"]["alpha"]["canary"]
    s3 = RacingS3(lambda read: publish(bucket, promoted) if read == 1 else None)
    outcome = app.roll_back(EVENT, s3, bucket=bucket, key=KEY, endpoint="ep-handler")
    assert outcome["action"] == "ignored" and "no longer has a canary" in outcome["reason"]
    assert published(bucket)[0] == promoted


def test_losing_every_attempt_fails_with_the_reason_and_writes_nothing(bucket: str) -> None:
    publish(bucket, canary_manifest())
    latest: list[str] = []

    def racer(read: int) -> None:
        document = canary_manifest(percent=10 + read)
        publish(bucket, document)
        latest.append(json.dumps(document, sort_keys=True))

    s3 = RacingS3(racer)
    with pytest.raises(app.RollbackError) as failed:
        app.roll_back(EVENT, s3, bucket=bucket, key=KEY, endpoint="ep-handler")
    assert s3.reads == app.ATTEMPTS
    assert "the manifest changed since it was read (another deploy published it)" in str(
        failed.value
    )
    assert "deploy rollback alpha" in str(failed.value)
    assert json.dumps(published(bucket)[0], sort_keys=True) == latest[-1]


def test_a_manifest_of_another_major_is_refused(bucket: str) -> None:
    etag = publish(bucket, {**canary_manifest(), "format": 2})
    with pytest.raises(app.RollbackError, match="manifest format 2 is not 1"):
        app.handler(copy.deepcopy(EVENT), None)
    assert published(bucket)[1] == etag


def test_the_p99_alarm_a_single_metric_alarm_rolls_back_too(bucket: str) -> None:
    publish(bucket, canary_manifest())
    event = copy.deepcopy(EVENT)
    dimensions = event["detail"]["configuration"]["metrics"][1]["metricStat"]["metric"][
        "dimensions"
    ]
    event["detail"]["alarmName"] = f"deploy-canary-ep-handler/alpha/{NEW}/p99-latency"
    # AWS's single metric alarm sample: one metric, its statistic, no expression.
    event["detail"]["configuration"]["metrics"] = [
        {
            "id": "30b6c6b2-a864-43a2-4877-c09a1afc3b87",
            "metricStat": {
                "metric": {
                    "dimensions": dimensions,
                    "name": "Latency",
                    "namespace": "Deploy/Models",
                },
                "period": 300,
                "stat": "p99",
            },
            "returnData": True,
        }
    ]
    assert app.handler(event, None)["action"] == "rolled-back"
    assert "canary" not in published(bucket)[0]["models"]["alpha"]


def test_a_rolled_back_canarys_alarms_are_deleted_and_no_others(
    bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With CANARY_ALARM_KINDS (the endpoint stack sets it), the function deletes the
    alarms of the canary it rolled back, both kinds; another canary's alarms stay."""
    from deploy.lifecycle.canary_alarms import (
        KINDS,
        CanaryThresholds,
        alarm_definitions,
        alarm_name,
    )

    monkeypatch.setenv("CANARY_ALARM_KINDS", ",".join(KINDS))
    cloudwatch = boto3.client("cloudwatch")
    other = "beta-" + "5" * 16 + ".tar.gz"
    thresholds = CanaryThresholds(0.1, 100, 60)
    for model, target in (("alpha", NEW), ("beta", other)):
        for request in alarm_definitions("ep-handler", model, target, thresholds):
            cloudwatch.put_metric_alarm(**request)
    publish(bucket, canary_manifest())
    assert EVENT["detail"]["alarmName"] == alarm_name("ep-handler", "alpha", NEW, KINDS[0])

    outcome = app.handler(copy.deepcopy(EVENT), None)

    assert outcome["action"] == "rolled-back", outcome
    ours = sorted(alarm_name("ep-handler", "alpha", NEW, kind) for kind in KINDS)
    assert sorted(outcome["alarms_deleted"]) == ours
    left = cloudwatch.describe_alarms(AlarmNamePrefix="deploy-canary-ep-handler/")
    assert sorted(a["AlarmName"] for a in left["MetricAlarms"]) == sorted(
        alarm_name("ep-handler", "beta", other, kind) for kind in KINDS
    )


def test_alarms_that_cannot_be_deleted_leave_the_rollback_standing(bucket: str) -> None:
    publish(bucket, canary_manifest())
    outcome = app.roll_back(
        copy.deepcopy(EVENT),
        boto3.client("s3"),
        bucket=bucket,
        key=KEY,
        endpoint="ep-handler",
        cloudwatch=boto3.client("cloudwatch", endpoint_url="http://127.0.0.1:9"),  # refused
        alarm_kinds=("error-rate", "p99-latency"),
    )
    assert outcome["action"] == "rolled-back", outcome
    assert len(outcome["alarms_left"]) == 2 and outcome["alarms_reason"], outcome
    assert "canary" not in published(bucket)[0]["models"]["alpha"]
