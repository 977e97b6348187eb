"""Ending a model's canary on AWS (the moto server): promote, rollback, conditional
manifest writes, canary-aware prune and the canary's rollback alarms.

The model store is a bucket named by a CloudFormation stack's outputs, as the
model-store stack leaves it; the manifests are written to the format 1.2 contract.
Checked here: moto 5.2.5's S3 enforces `If-Match` and `If-None-Match` on PutObject
(412 PreconditionFailed), so the races below run against it, not a stub.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.client import manifest as contract
from deploy.config import DeploySettings, load_settings
from deploy.lifecycle import release
from deploy.lifecycle.aws_provider import AwsProvider
from deploy.lifecycle.canary_alarms import CanaryAlarms, CanaryThresholds, alarm_prefix
from deploy.lifecycle.manifest_writes import CONFLICT, ManifestConflictError
from deploy.lifecycle.release import ReleaseError, end_canary
from tests.functional.test_lifecycle_aws import aws_environment

pytestmark = [pytest.mark.moto]

OLD = "alpha-" + "1" * 16 + ".tar.gz"
NEW = "alpha-" + "2" * 16 + ".tar.gz"
OLDER = "alpha-" + "0" * 16 + ".tar.gz"
BETA = "beta-" + "3" * 16 + ".tar.gz"


@pytest.fixture(scope="module")
def moto_env(moto_server: str) -> Iterator[str]:
    with aws_environment(moto_server):
        yield moto_server


def _model(name: str, target: str, canary: dict[str, Any] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name,
        "target_model": target,
        "sha256": target[-23:-7] * 4,
        "bytes": 100,
        "source_digest": "src-" + target[-23:-7],
        "kind": "model",
        "backend": "python",
        "max_batch_size": 0,
        "inputs": [{"name": "X", "datatype": "FP32", "shape": [2]}],
        "outputs": [{"name": "Y", "datatype": "FP32", "shape": [2]}],
        "contains": [],
    }
    if canary is not None:
        entry["canary"] = canary
    return entry


def canary_manifest(*, percent: float = 10.0) -> dict[str, Any]:
    canary = {
        "target_model": NEW,
        "percent": percent,
        "sha256": "2" * 64,
        "bytes": 200,
        "source_digest": "src-new",
    }
    return {
        "format": 1,
        "format_minor": 2,
        "hosting": "multi-model",
        "invoke": {"addressing": "target-model-header", "max_request_bytes": 6291456},
        "models": {"alpha": _model("alpha", OLD, canary), "beta": _model("beta", BETA)},
        "team_owner": "kept as it is",  # a key this version does not know
    }


def make_stage(tmp: Path, stage: str, **rollout: Any) -> DeploySettings:
    """A stage whose model-store stack (on moto) names a fresh bucket and the prefix."""
    settings = load_settings(
        stage=stage,
        instance_type="ml.m5.xlarge",
        repository=tmp,
        package_dir=tmp / "package",
        endpoint_name=f"ep-{stage}",
        rollout=rollout or None,
    )
    template = {
        "Resources": {"Bucket": {"Type": "AWS::S3::Bucket"}},
        "Outputs": {
            "ModelBucket": {"Value": {"Ref": "Bucket"}},
            "ModelPrefix": {"Value": "models/"},
        },
    }
    boto3.client("cloudformation").create_stack(
        StackName=settings.stack_name("model-store"), TemplateBody=json.dumps(template)
    )
    return settings


def bucket_of(settings: DeploySettings) -> str:
    stack = boto3.client("cloudformation").describe_stacks(
        StackName=settings.stack_name("model-store")
    )["Stacks"][0]
    return next(o["OutputValue"] for o in stack["Outputs"] if o["OutputKey"] == "ModelBucket")


def put_manifest(settings: DeploySettings, document: dict[str, Any]) -> str:
    response = boto3.client("s3").put_object(
        Bucket=bucket_of(settings), Key="models/manifest.json", Body=json.dumps(document).encode()
    )
    return str(response["ETag"])


def read_manifest(settings: DeploySettings) -> tuple[dict[str, Any], str]:
    response = boto3.client("s3").get_object(Bucket=bucket_of(settings), Key="models/manifest.json")
    return json.loads(response["Body"].read()), str(response["ETag"])


def alarm_event(endpoint: str, alarm: str | None = None) -> dict[str, Any]:
    """AWS's sample "CloudWatch Alarm State Change" event (entering ALARM) for a canary
    alarm of `endpoint` (named `alarm`, if given)."""
    path = Path(__file__).parents[1] / "events" / "canary_alarm.json"
    event: dict[str, Any] = json.loads(path.read_text())
    if alarm is not None:
        event["detail"]["alarmName"] = alarm
    for metric in event["detail"]["configuration"]["metrics"]:
        if "metricStat" in metric:
            metric["metricStat"]["metric"]["dimensions"]["Endpoint"] = endpoint
    return event


def canary_alarms(endpoint: str) -> list[dict[str, Any]]:
    response = boto3.client("cloudwatch").describe_alarms(AlarmNamePrefix=alarm_prefix(endpoint))
    return list(response["MetricAlarms"])


def test_promote_makes_the_canary_live_and_rollback_keeps_the_live_version(
    moto_env: str, tmp_path: Path
) -> None:
    promote_stage = make_stage(tmp_path, "promote")
    rollback_stage = make_stage(tmp_path, "rollback")
    for settings in (promote_stage, rollback_stage):
        # GIVEN a published canary (published through deploy: its alarms come with it)
        provider = AwsProvider(settings)
        provider.published_manifest()
        provider.publish_manifest(contract.dump(contract.parse(canary_manifest(), "test")))
        assert len(canary_alarms(settings.endpoint_name)) == 2

    # WHEN alpha is promoted
    outcome = end_canary(AwsProvider(promote_stage), "alpha", "promote", where="test")
    # THEN every call goes to the canary's TargetModel, with its archive's digest and size
    published, _etag = read_manifest(promote_stage)
    alpha = published["models"]["alpha"]
    assert "canary" not in alpha
    assert (alpha["target_model"], alpha["sha256"], alpha["bytes"]) == (NEW, "2" * 64, 200)
    assert alpha["source_digest"] == "src-new"
    assert published["models"]["beta"] == canary_manifest()["models"]["beta"]
    assert published["team_owner"] == "kept as it is"
    assert (outcome.live, outcome.dropped, outcome.percent) == (NEW, OLD, 10.0)
    # and the canary's rollback alarms are gone
    assert canary_alarms(promote_stage.endpoint_name) == []

    # WHEN alpha is rolled back THEN the canary is gone and the live version stays
    outcome = end_canary(AwsProvider(rollback_stage), "alpha", "rollback", where="test")
    published, _etag = read_manifest(rollback_stage)
    expected = canary_manifest()["models"]["alpha"]
    del expected["canary"]
    assert published["models"]["alpha"] == expected
    assert (outcome.live, outcome.dropped) == (OLD, NEW)
    assert canary_alarms(rollback_stage.endpoint_name) == []
    # The result is the contract's (an SDK reads it), and names no canary.
    assert contract.parse(published, "test").models["alpha"].canary is None


def test_promote_or_rollback_without_a_canary_or_model_says_so_and_publishes_nothing(
    moto_env: str, tmp_path: Path
) -> None:
    settings = make_stage(tmp_path, "nocanary")
    etag = put_manifest(settings, canary_manifest())
    with pytest.raises(ReleaseError) as no_canary:
        end_canary(AwsProvider(settings), "beta", "rollback", where="stage nocanary")
    assert "model 'beta' has no canary: every call goes to " + BETA in str(no_canary.value)
    assert "deploy up --canary" in str(no_canary.value)
    with pytest.raises(ReleaseError) as unknown:
        end_canary(AwsProvider(settings), "gamma", "promote", where="stage nocanary")
    assert "model 'gamma' is not in the published manifest (its models: alpha, beta)" in str(
        unknown.value
    )
    assert read_manifest(settings)[1] == etag  # nothing published


def test_cli_rollback_and_promote_report_and_fail_cleanly(moto_env: str, tmp_path: Path) -> None:
    config = tmp_path / "deploy.toml"
    config.write_text(
        '[stages.cli]\nendpoint_name = "ep-cli"\ninstance_type = "ml.m5.xlarge"\n', encoding="utf-8"
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEPLOY_CONFIG", str(config))
        settings = make_stage(tmp_path, "cli")
        put_manifest(settings, canary_manifest(percent=25))
        runner = CliRunner()
        done = runner.invoke(app, ["rollback", "alpha", "--stage", "cli"])
        assert done.exit_code == 0, done.output
        assert f"alpha: canary rolled back; every call goes to {OLD} (was 25% to the canary)" in (
            " ".join(done.output.split())
        )
        assert "canary" not in read_manifest(settings)[0]["models"]["alpha"]
        # Again: nothing to roll back, exit 1, the reason and no traceback.
        again = runner.invoke(app, ["promote", "alpha", "--stage", "cli"])
        assert again.exit_code == 1
        assert "model 'alpha' has no canary" in " ".join(again.output.split())
        assert "Traceback" not in again.output


def test_a_publish_based_on_a_stale_read_loses_with_a_clear_error(
    moto_env: str, tmp_path: Path
) -> None:
    settings = make_stage(tmp_path, "race")
    put_manifest(settings, canary_manifest())
    # GIVEN two pipelines: the first reads the manifest and computes a rollback
    first, second = AwsProvider(settings), AwsProvider(settings)
    document = first.published_manifest()
    rolled_back = contract.dump(release.rolled_back(contract.parse(document, "t"), "alpha", "t"))
    # WHEN the second publishes meanwhile (promoting alpha), THEN the first's publish loses
    end_canary(second, "alpha", "promote", where="second")
    winner = read_manifest(settings)
    assert winner[0]["models"]["alpha"]["target_model"] == NEW
    with pytest.raises(ManifestConflictError) as lost:
        first.publish_manifest(rolled_back)
    assert lost.value.message == CONFLICT
    assert "s3://" in str(lost.value) and "models/manifest.json" in str(lost.value)
    assert read_manifest(settings) == winner  # nothing overwritten, nothing half-written
    # Re-run, as the error says: the rollback now finds no canary (it was promoted).
    with pytest.raises(ReleaseError, match="has no canary"):
        end_canary(AwsProvider(settings), "alpha", "rollback", where="re-run")

    # A manifest published by another pipeline since this one found none: If-None-Match.
    fresh = make_stage(tmp_path, "race-create")
    creator, late = AwsProvider(fresh), AwsProvider(fresh)
    assert creator.published_manifest() is None and late.published_manifest() is None
    creator.publish_manifest(contract.dump(contract.parse(canary_manifest(), "test")))
    created = read_manifest(fresh)
    with pytest.raises(ManifestConflictError):
        late.publish_manifest(contract.dump(contract.parse(canary_manifest(percent=50), "t")))
    assert read_manifest(fresh) == created
    # The winner may publish again: its basis is what it wrote.
    creator.publish_manifest(contract.dump(contract.parse(canary_manifest(percent=20), "t")))
    assert read_manifest(fresh)[0]["models"]["alpha"]["canary"]["percent"] == 20


def test_prune_never_deletes_an_archive_a_canary_names(moto_env: str, tmp_path: Path) -> None:
    settings = make_stage(tmp_path, "prune")
    s3 = boto3.client("s3")
    bucket = bucket_of(settings)
    # Upload order is age order: OLDER, OLD (live), NEW (the canary), BETA.
    for key in (OLDER, OLD, NEW, BETA):
        s3.put_object(Bucket=bucket, Key="models/" + key, Body=b"archive " + key.encode())
    put_manifest(settings, canary_manifest())
    pruned = AwsProvider(settings).prune(keep=0)
    assert pruned["deleted"] == [OLDER]
    assert NEW in pruned["kept_referenced"]
    left = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert left == {f"models/{k}" for k in (OLD, NEW, BETA, "manifest.json")}


def test_canary_alarms_watch_error_rate_and_p99_over_the_window(
    moto_env: str, tmp_path: Path
) -> None:
    settings = make_stage(
        tmp_path,
        "alarms",
        canary_max_error_rate=0.02,
        canary_max_p99_ms=250,
        canary_window_s=600,
    )
    alarms = CanaryAlarms(AwsProvider(settings).session, "ep-alarms")
    manifest = contract.parse(canary_manifest(), "test")
    alarms.sync(manifest, CanaryThresholds.of(settings.rollout))
    found = {a["AlarmName"]: a for a in canary_alarms("ep-alarms")}
    rate = found[f"deploy-canary-ep-alarms/alpha/{NEW}/error-rate"]
    p99 = found[f"deploy-canary-ep-alarms/alpha/{NEW}/p99-latency"]
    assert len(found) == 2
    dimensions = [
        {"Name": "Endpoint", "Value": "ep-alarms"},
        {"Name": "Model", "Value": "alpha"},
        {"Name": "TargetModel", "Value": NEW},
    ]
    queries = {m["Id"]: m for m in rate["Metrics"]}
    assert queries["error_rate"]["Expression"] == "FILL(errors, 0) / requests"
    assert queries["error_rate"]["ReturnData"] is True
    for query_id, metric in (("errors", "ModelErrors"), ("requests", "Requests")):
        stat = queries[query_id]["MetricStat"]
        assert stat["Metric"] == {
            "Namespace": "Deploy/Models",
            "MetricName": metric,
            "Dimensions": dimensions,
        }
        assert (stat["Period"], stat["Stat"]) == (600, "Sum")
    assert (rate["Threshold"], rate["ComparisonOperator"]) == (0.02, "GreaterThanThreshold")
    assert (rate["EvaluationPeriods"], rate["TreatMissingData"]) == (1, "notBreaching")
    assert (p99["Namespace"], p99["MetricName"], p99["ExtendedStatistic"]) == (
        "Deploy/Models",
        "Latency",
        "p99",
    )
    assert (p99["Period"], p99["Threshold"], p99["Dimensions"]) == (600, 250.0, dimensions)
    # An alarm of another endpoint is not this one's to delete.
    CanaryAlarms(AwsProvider(settings).session, "ep-alarms-2").sync(
        manifest, CanaryThresholds(0.1, 100, 60)
    )
    # WHEN the canary is gone THEN its alarms go; the other endpoint's stay
    done = alarms.sync(
        contract.parse({**canary_manifest(), "models": {}}, "t"), CanaryThresholds(0.1, 1, 60)
    )
    assert sorted(done["deleted"]) == sorted(found)
    assert canary_alarms("ep-alarms") == []
    assert len(canary_alarms("ep-alarms-2")) == 2


def test_watch_shows_the_split_and_alarms_until_the_function_rolls_the_canary_back(
    moto_env: str, tmp_path: Path
) -> None:
    from deploy.lifecycle.canary_watch import watch
    from deploy_handlers.canary_rollback import app as rollback_function

    settings = make_stage(tmp_path, "watch")
    provider = AwsProvider(settings)
    provider.published_manifest()
    provider.publish_manifest(contract.dump(contract.parse(canary_manifest(), "test")))
    error_rate = f"deploy-canary-ep-watch/alpha/{NEW}/error-rate"
    event = alarm_event("ep-watch")
    polls: list[Any] = []

    def sleep(seconds: float) -> None:
        if len(polls) == 1:  # the canary's error rate crosses its threshold
            boto3.client("cloudwatch").set_alarm_state(
                AlarmName=error_rate, StateValue="ALARM", StateReason="test: 12.5% errors"
            )
        elif len(polls) == 2:  # EventBridge runs the function (moto runs no Lambda)
            done = rollback_function.roll_back(
                event,
                boto3.client("s3"),
                bucket=bucket_of(settings),
                key="models/manifest.json",
                endpoint="ep-watch",
            )
            assert done["action"] == "rolled-back"

    outcome = watch(
        AwsProvider(settings).published_manifest,
        CanaryAlarms(provider.session, "ep-watch"),
        timeout_s=60,
        interval_s=0,
        show=polls.append,
        sleep=sleep,
    )
    assert [[(v.model, v.percent, v.canary, v.live) for v in views] for views in polls] == [
        [("alpha", 10.0, NEW, OLD)],
        [("alpha", 10.0, NEW, OLD)],
        [],
    ]
    assert polls[1][0].alarms["error-rate"] == "ALARM"
    assert polls[0][0].alarms["error-rate"] != "ALARM"
    assert outcome.ended == {"alpha": "rolled back"} and outcome.rolled_back == ["alpha"]


def test_watch_reports_a_promotion_and_stops_at_its_timeout(moto_env: str, tmp_path: Path) -> None:
    from deploy.lifecycle.canary_watch import watch

    settings = make_stage(tmp_path, "watch-promote")
    provider = AwsProvider(settings)
    provider.published_manifest()
    provider.publish_manifest(contract.dump(contract.parse(canary_manifest(), "test")))
    alarms = CanaryAlarms(provider.session, settings.endpoint_name)
    now = [0.0]

    def later(seconds: float) -> None:
        now[0] += 30

    # Nobody ends it: the watch stops at its timeout, the canary still running.
    timed_out = watch(
        provider.published_manifest,
        alarms,
        timeout_s=60,
        show=lambda v: None,
        sleep=later,
        clock=lambda: now[0],
    )
    assert timed_out.ended == {} and [v.model for v in timed_out.running] == ["alpha"]
    promoted = watch(
        provider.published_manifest,
        alarms,
        timeout_s=60,
        show=lambda v: None,
        sleep=lambda s: end_canary(AwsProvider(settings), "alpha", "promote", where="t"),
    )
    assert promoted.ended == {"alpha": "promoted"} and promoted.rolled_back == []


def test_up_watch_prints_the_split_and_exits_1_when_the_canary_is_rolled_back(
    moto_env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import threading

    import typer

    from deploy.cli.release import watch_canaries

    config = tmp_path / "deploy.toml"
    config.write_text(
        '[stages.cliwatch]\nendpoint_name = "ep-cliwatch"\ninstance_type = "ml.m5.xlarge"\n',
        encoding="utf-8",
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEPLOY_CONFIG", str(config))
        patch.setenv("COLUMNS", "200")
        settings = make_stage(tmp_path, "cliwatch")
        provider = AwsProvider(settings)
        provider.published_manifest()
        provider.publish_manifest(contract.dump(contract.parse(canary_manifest(), "test")))
        later = threading.Timer(
            1.0,
            lambda: end_canary(AwsProvider(settings), "alpha", "rollback", where="pipeline 2"),
        )
        later.start()
        try:
            with pytest.raises(typer.Exit) as stopped:
                watch_canaries("cliwatch", None, None, None, 30, as_json=False, interval_s=0.2)
        finally:
            later.join()
    assert stopped.value.exit_code == 1
    shown = " ".join(capsys.readouterr().out.split())
    assert f"alpha: 10% to {NEW}, the rest to {OLD}; alarms error-rate" in shown
    assert "alpha: canary rolled back" in shown
    assert "rolled back: alpha (a canary alarm fired, or `deploy rollback` ran)" in shown


def test_status_lists_the_canary_alarms_and_which_canaries_ended(
    moto_env: str, tmp_path: Path
) -> None:
    """`deploy status` shows each canary alarm's state; once the canary is out of the
    manifest, alarms still there (here the function runs without its CloudWatch
    client, as when deleting them failed) are marked as left over."""
    from deploy_handlers.canary_rollback import app as rollback_function

    config = tmp_path / "deploy.toml"
    config.write_text(
        '[stages.seen]\nendpoint_name = "ep-seen"\ninstance_type = "ml.m5.xlarge"\n',
        encoding="utf-8",
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEPLOY_CONFIG", str(config))
        settings = make_stage(tmp_path, "seen")
        provider = AwsProvider(settings)
        provider.published_manifest()
        manifest = contract.parse(canary_manifest(), "test")
        provider.publish_manifest(contract.dump(manifest))
        CanaryAlarms(provider.session, "ep-seen").sync(manifest, CanaryThresholds(0.1, 100, 60))
        error_rate = f"deploy-canary-ep-seen/alpha/{NEW}/error-rate"
        boto3.client("cloudwatch").set_alarm_state(
            AlarmName=error_rate, StateValue="ALARM", StateReason="test: 12.5% errors"
        )
        runner = CliRunner()

        def status() -> dict[str, Any]:
            result = runner.invoke(app, ["status", "--stage", "seen", "--json"])
            assert result.exit_code == 0, result.output
            document: dict[str, Any] = json.loads(result.stdout)
            return document

        alarms = {a["alarm"]: a for a in status()["canary_alarms"]}
        assert sorted(alarms) == [f"alpha/{NEW}/error-rate", f"alpha/{NEW}/p99-latency"]
        assert alarms[f"alpha/{NEW}/error-rate"]["state"] == "ALARM"
        assert not any(a["canary_ended"] for a in alarms.values())

        # WHEN the rollback function takes the canary out (EventBridge would run it)
        done = rollback_function.roll_back(
            alarm_event("ep-seen", error_rate),
            boto3.client("s3"),
            bucket=bucket_of(settings),
            key="models/manifest.json",
            endpoint="ep-seen",
        )
        assert done["action"] == "rolled-back"

        # THEN status marks both alarms as left over from an ended canary
        assert all(a["canary_ended"] for a in status()["canary_alarms"])
        text = runner.invoke(app, ["status", "--stage", "seen"], env={"COLUMNS": "200"})
        assert text.exit_code == 0, text.output
        assert "canary ended; the next deploy up, promote or rollback deletes it" in text.output
        assert f"alpha/{NEW}/error-rate" in text.output
