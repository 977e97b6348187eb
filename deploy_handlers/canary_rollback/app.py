"""Lambda entry point: roll a model's canary back when one of its alarms fires.

EventBridge sends the "CloudWatch Alarm State Change" event of an alarm whose
name starts with the endpoint's canary-alarm prefix (the endpoint stack's rule
matches it; deploy.lifecycle.canary_alarms creates the alarms). The alarm's
metrics carry the dimensions Endpoint, Model and TargetModel. In state ALARM,
the function reads the manifest and, if model Model still has a canary at that
TargetModel, removes the canary (the live version stays) and writes the
manifest back with `If-Match: <ETag read>`: a publish that happened meanwhile
is never overwritten. It then reads again and retries, up to `ATTEMPTS` times,
and fails (EventBridge's asynchronous invocation retries it) if it still loses.
Anything else (another state, another endpoint, a canary already promoted,
rolled back or replaced) is reported and left alone. Once the canary is
rolled back, its alarms (this one and its siblings: the same name but for the
kind after the last "/", kinds from CANARY_ALARM_KINDS) are deleted, since no
call reaches that version any more; if that fails the rollback stands and
the next publish deletes them.

Standard library and boto3 only. The manifest is edited as JSON, its other
keys kept as they are: the function only removes one key.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from typing import Any

DETAIL_TYPE = "CloudWatch Alarm State Change"
ALARM = "ALARM"
MANIFEST_FORMAT = 1  # the manifest's major (deploy/client/manifest.py): others are refused
ATTEMPTS = 3
CONFLICT_CODES = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409"})


class RollbackError(Exception):
    """The canary could not be rolled back; the message says why and what to do."""


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    import boto3

    kinds = tuple(kind for kind in os.environ.get("CANARY_ALARM_KINDS", "").split(",") if kind)
    outcome = roll_back(
        event,
        boto3.client("s3"),
        bucket=os.environ["MODEL_STORE_BUCKET"],
        key=os.environ["MANIFEST_KEY"],
        endpoint=os.environ["ENDPOINT_NAME"],
        cloudwatch=boto3.client("cloudwatch"),
        alarm_kinds=kinds,
    )
    print(json.dumps(outcome, sort_keys=True))  # one line in the function's log
    return outcome


def alarm_dimensions(detail: dict[str, Any]) -> dict[str, str]:
    """Endpoint, Model and TargetModel of the alarm's metrics (a metric math alarm lists
    several metrics, each with its dimensions; an expression has none)."""
    found: dict[str, str] = {}
    for metric in (detail.get("configuration") or {}).get("metrics") or []:
        stat = metric.get("metricStat") or {}
        dimensions = (stat.get("metric") or {}).get("dimensions") or {}
        for name in ("Endpoint", "Model", "TargetModel"):
            value = dimensions.get(name)
            if isinstance(value, str):
                found.setdefault(name, value)
    return found


def delete_alarms(cloudwatch: Any, alarm: str, kinds: tuple[str, ...]) -> dict[str, Any]:
    """Delete the rolled-back canary's alarms: `alarm` and its siblings of `kinds`."""
    stem, _, kind = alarm.rpartition("/")
    if not stem or kind not in kinds:
        return {"alarms_left": [alarm], "alarms_reason": "not named as a canary alarm"}
    names = [f"{stem}/{each}" for each in kinds]
    try:
        cloudwatch.delete_alarms(AlarmNames=names)
    except Exception as exc:  # the rollback stands; the next publish deletes them
        return {"alarms_left": names, "alarms_reason": str(exc)}
    return {"alarms_deleted": names}


def roll_back(
    event: dict[str, Any],
    s3: Any,
    *,
    bucket: str,
    key: str,
    endpoint: str,
    cloudwatch: Any = None,
    alarm_kinds: tuple[str, ...] = (),
) -> dict[str, Any]:
    """What the event asks, done: {"action": "rolled-back" | "ignored", ...}; with a
    CloudWatch client and the alarm kinds, a rolled-back canary's alarms are deleted."""
    detail = event.get("detail") or {}
    alarm = str(detail.get("alarmName", ""))
    base = {"alarm": alarm, "manifest": f"s3://{bucket}/{key}"}
    state = (detail.get("state") or {}).get("value")
    if event.get("detail-type") != DETAIL_TYPE or state != ALARM:
        return {**base, "action": "ignored", "reason": f"not an alarm entering ALARM ({state})"}
    dimensions = alarm_dimensions(detail)
    model, target = dimensions.get("Model"), dimensions.get("TargetModel")
    if dimensions.get("Endpoint") != endpoint or not model or not target:
        return {
            **base,
            "action": "ignored",
            "reason": f"not a canary alarm of endpoint {endpoint} (dimensions {dimensions})",
        }
    base |= {"model": model, "target_model": target}
    for attempt in range(1, ATTEMPTS + 1):
        response = s3.get_object(Bucket=bucket, Key=key)
        etag = str(response["ETag"])
        document = json.loads(response["Body"].read())
        if document.get("format") != MANIFEST_FORMAT:
            raise RollbackError(
                f"s3://{bucket}/{key}: manifest format {document.get('format')!r} is not "
                f"{MANIFEST_FORMAT}: deploy this function with the deploy that published it"
            )
        entry = (document.get("models") or {}).get(model)
        canary = entry.get("canary") if isinstance(entry, dict) else None
        if not isinstance(canary, dict) or canary.get("target_model") != target:
            return {
                **base,
                "action": "ignored",
                "reason": f"model {model} no longer has a canary at {target} "
                "(promoted, rolled back or replaced since the alarm fired)",
            }
        document["models"][model] = {
            name: value for name, value in entry.items() if name != "canary"
        }
        body = (json.dumps(document, indent=2) + "\n").encode("utf-8")
        try:
            s3.put_object(
                Bucket=bucket,
                Key=key,
                Body=body,
                ContentType="application/json",
                ChecksumSHA256=base64.b64encode(hashlib.sha256(body).digest()).decode("ascii"),
                Metadata={"sha256": hashlib.sha256(body).hexdigest()},
                IfMatch=etag,
            )
        except Exception as exc:
            code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
            if code not in CONFLICT_CODES:
                raise
            continue  # another publish won: read it and decide again
        done = {
            **base,
            "action": "rolled-back",
            "percent": canary.get("percent"),
            "live": entry.get("target_model"),
            "attempts": attempt,
        }
        if cloudwatch is not None and alarm_kinds:
            done |= delete_alarms(cloudwatch, alarm, alarm_kinds)
        return done
    raise RollbackError(
        f"s3://{bucket}/{key}: the manifest changed since it was read (another deploy "
        f"published it) on each of {ATTEMPTS} attempts; model {model}'s canary {target} "
        "is still named: the invocation is retried, or run `deploy rollback "
        f"{model}`"
    )
