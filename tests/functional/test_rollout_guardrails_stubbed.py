"""`deploy up` follows a canary shift and reports SageMaker's rollback: STUBBED AWS.

LABEL: SageMaker's side here is a botocore Stubber, not SageMaker. moto has no
UpdateEndpoint traffic shifting, so the DescribeEndpoint and CloudFormation
answers below are written by hand to the shapes of botocore's SageMaker and
CloudFormation service models (the Stubber refuses any answer that does not
fit them). They play one canary update that an alarm rolls back, in the order
AWS documents it: the new fleet activates canary traffic, bakes, the alarm
fires and the endpoint rolls back (RollingBack, then InService on the old
config with a FailureReason) while CloudFormation settles in
UPDATE_ROLLBACK_COMPLETE. What is under test is ours: the real clients
(`deploy.aws`), the rollout's wait loop, the line reporter and the error; the
test never reads back as a result what it wrote as SageMaker's behaviour, only
what our code made of it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

import boto3
import pytest
from botocore.stub import Stubber

from deploy.aws.cloudformation import Stacks
from deploy.aws.sagemaker import SageMaker
from deploy.aws.session import AwsSession
from deploy.config import load_settings
from deploy.errors import DeployError
from deploy.hosting import mode_for
from deploy.lifecycle.aws_clients import AwsClients
from deploy.lifecycle.aws_stage import AwsStage
from deploy.lifecycle.progress import LineReporter
from deploy.lifecycle.rollout import Rollout, RolloutFailedError

ENDPOINT = "shop"
STACK = "shop-prod-endpoint"
STACK_ID = f"arn:aws:cloudformation:us-east-1:123456789012:stack/{STACK}/1"
ALARM = "shop-ModelLatencyP99"
CONFIG_ARN = "arn:aws:sagemaker:us-east-1:1:endpoint-config"
ROLLBACK_REASON = (
    f"Deployment rolled back: CloudWatch alarm {ALARM} went into ALARM state during the "
    "canary traffic shift"
)
NOW = datetime.now(UTC)
CANARY = {
    "BlueGreenUpdatePolicy": {
        "TrafficRoutingConfiguration": {
            "Type": "CANARY",
            "WaitIntervalInSeconds": 600,
            "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 20},
        },
        "TerminationWaitInSeconds": 300,
        "MaximumExecutionTimeoutInSeconds": 3600,
    },
    "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": ALARM}]},
}


class StubbedSession(AwsSession):
    """An AwsSession whose clients are the stubbed botocore clients handed in."""

    def __init__(self, clients: dict[str, Any]) -> None:
        super().__init__("us-east-1")
        self.stubbed = clients

    def client(self, service: str, *, max_attempts: int = 5) -> Any:
        return self.stubbed[service]


def botocore_client(service: str) -> Any:
    session = boto3.Session(
        aws_access_key_id="stub", aws_secret_access_key="stub", region_name="us-east-1"
    )
    return session.client(service)


class Script:
    """The stubbed answers, queued per service in the order our code asks."""

    def __init__(self) -> None:
        self.cfn = botocore_client("cloudformation")
        self.sm = botocore_client("sagemaker")
        self.cfn_stub = Stubber(self.cfn)
        self.sm_stub = Stubber(self.sm)
        self.events: list[dict[str, Any]] = []

    def stack(self, status: str) -> None:
        self.cfn_stub.add_response(
            "describe_stacks",
            {
                "Stacks": [
                    {
                        "StackName": STACK,
                        "StackId": STACK_ID,
                        "CreationTime": NOW - timedelta(days=1),
                        "StackStatus": status,
                    }
                ]
            },
            {"StackName": STACK},
        )

    def stack_events(self, *new: tuple[str, str, str]) -> None:
        for index, (logical, status, reason) in enumerate(new):
            self.events.insert(
                0,
                {
                    "StackId": STACK_ID,
                    "EventId": f"{logical}-{status}-{len(self.events)}-{index}",
                    "StackName": STACK,
                    "LogicalResourceId": logical,
                    "ResourceType": "AWS::SageMaker::Endpoint",
                    "Timestamp": NOW + timedelta(seconds=len(self.events)),
                    "ResourceStatus": status,
                    **({"ResourceStatusReason": reason} if reason else {}),
                },
            )
        self.cfn_stub.add_response(
            "describe_stack_events", {"StackEvents": list(self.events)}, {"StackName": STACK}
        )

    def endpoint(self, status: str, **extra: Any) -> None:
        """What `AwsStage.endpoint_state` asks: the stack, its endpoint, its config."""
        self.stack("UPDATE_IN_PROGRESS" if status != "InService" else "UPDATE_ROLLBACK_COMPLETE")
        self.cfn_stub.add_response(
            "list_stack_resources",
            {
                "StackResourceSummaries": [
                    {
                        "LogicalResourceId": "Endpoint",
                        "PhysicalResourceId": f"arn:aws:sagemaker:us-east-1:1:endpoint/{ENDPOINT}",
                        "ResourceType": "AWS::SageMaker::Endpoint",
                        "LastUpdatedTimestamp": NOW,
                        "ResourceStatus": "UPDATE_IN_PROGRESS",
                    }
                ]
            },
            {"StackName": STACK},
        )
        self.sm_stub.add_response(
            "describe_endpoint",
            {
                "EndpointName": ENDPOINT,
                "EndpointArn": f"arn:aws:sagemaker:us-east-1:1:endpoint/{ENDPOINT}",
                "EndpointConfigName": "shop-config-old",
                "ProductionVariants": [
                    {
                        "VariantName": "AllTraffic",
                        "CurrentInstanceCount": 5,
                        "DesiredInstanceCount": 5,
                    }
                ],
                "EndpointStatus": status,
                "CreationTime": NOW - timedelta(days=1),
                "LastModifiedTime": NOW,
                "LastDeploymentConfig": CANARY,
                **extra,
            },
            {"EndpointName": ENDPOINT},
        )
        self.sm_stub.add_response(
            "describe_endpoint_config",
            {
                "EndpointConfigName": "shop-config-old",
                "EndpointConfigArn": f"{CONFIG_ARN}/shop-config-old",
                "ProductionVariants": [
                    {
                        "VariantName": "AllTraffic",
                        "InstanceType": "ml.g5.xlarge",
                        "InitialInstanceCount": 5,
                    }
                ],
                "CreationTime": NOW - timedelta(days=1),
            },
            {"EndpointConfigName": "shop-config-old"},
        )

    def poll(self, stack_status: str, endpoint_status: str, **extra: Any) -> None:
        self.stack(stack_status)
        self.stack_events()
        self.endpoint(endpoint_status, **extra)


def pending(*steps: tuple[str, str]) -> dict[str, Any]:
    return {
        "PendingDeploymentSummary": {
            "EndpointConfigName": "shop-config-new",
            "ProductionVariants": [
                {
                    "VariantName": "AllTraffic",
                    "CurrentInstanceCount": 1,
                    "DesiredInstanceCount": 5,
                    "VariantStatus": [
                        {"Status": status, "StatusMessage": message, "StartTime": NOW}
                        for status, message in steps
                    ],
                }
            ],
        }
    }


def test_a_canary_that_trips_an_alarm_is_followed_then_reported_with_sagemakers_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a canary update in flight that the latency alarm rolls back (stubbed AWS)
    script = Script()
    script.poll(
        "UPDATE_IN_PROGRESS",
        "Updating",
        **pending(("ActivatingTraffic", "shifting 20% of capacity to the new fleet")),
    )
    script.poll("UPDATE_IN_PROGRESS", "Updating", **pending(("Baking", "")))
    baking = pending(("Baking", ""))
    script.poll("UPDATE_IN_PROGRESS", "RollingBack", FailureReason=ROLLBACK_REASON, **baking)
    script.stack("UPDATE_ROLLBACK_COMPLETE")
    script.stack_events(
        ("Endpoint", "UPDATE_FAILED", "Resource handler returned message: endpoint update failed"),
        (STACK, "UPDATE_ROLLBACK_COMPLETE", ""),
    )
    script.endpoint("InService", FailureReason=ROLLBACK_REASON)
    script.endpoint("InService", FailureReason=ROLLBACK_REASON)  # what still serves
    settings = load_settings(stage="prod", endpoint_name=ENDPOINT, instance_type="ml.g5.xlarge")
    session = StubbedSession({"cloudformation": script.cfn, "sagemaker": script.sm})
    clients = AwsClients(
        session=session,
        stacks=Stacks(session, sleep=lambda _s: None),
        sagemaker=SageMaker(session),
        autoscaling=cast(Any, None),
        cloudwatch=cast(Any, None),
        quotas=cast(Any, None),
        store=lambda bucket: pytest.fail(f"no store expected, got {bucket}"),
        parameter=lambda name: pytest.fail(f"no parameter expected, got {name}"),
        lookup_context=lambda account: {},
    )
    rollout = Rollout(
        AwsStage(settings, clients, mode_for(settings)),
        publish_assets=lambda name: None,
        poll_s=0.0,
        sleep=lambda _s: None,
    )
    reporter = LineReporter()

    # WHEN deploy up's wait loop follows the stack
    with script.cfn_stub, script.sm_stub, pytest.raises(RolloutFailedError) as caught:
        rollout.wait_stack(STACK, reporter, since=NOW.timestamp() - 60, before=None)
    script.cfn_stub.assert_no_pending_responses()
    script.sm_stub.assert_no_pending_responses()

    # THEN each step of the shift was shown as it happened
    shown = [update[2] for update in reporter.rollout_updates]
    assert shown[:3] == [
        "Updating: canary 20% to shop-config-new: AllTraffic 1/5 instance(s): "
        "ActivatingTraffic (shifting 20% of capacity to the new fleet)",
        "Updating: canary 20% to shop-config-new: AllTraffic 1/5 instance(s): Baking",
        f"RollingBack: rolling back ({ROLLBACK_REASON}); canary 20% to shop-config-new: "
        "AllTraffic 1/5 instance(s): Baking",
    ]
    stderr = capsys.readouterr().err
    assert f"rollout: {STACK} UPDATE_IN_PROGRESS, endpoint Updating: canary 20%" in stderr
    assert f"endpoint RollingBack: rolling back ({ROLLBACK_REASON})" in stderr
    assert "UPDATE_ROLLBACK_COMPLETE" in stderr
    # AND the failure says SageMaker rolled back, why, and what still serves: exit code 1
    error = caught.value
    assert isinstance(error, DeployError)
    text = str(error)
    assert f"SageMaker rolled the endpoint update back: {ROLLBACK_REASON}" in text
    assert "endpoint shop still serves endpoint config shop-config-old (ml.g5.xlarge x5)" in text
    assert "the manifest was not switched" in text
    assert "rollback alarm" in (error.fix or "")


def test_an_old_failure_reason_is_not_taken_for_this_rollback() -> None:
    from deploy.aws.sagemaker import EndpointState
    from deploy.lifecycle.rollout import rolled_back_reason

    before = EndpointState(ENDPOINT, "InService", "old", "an earlier rollback", ())
    now = EndpointState(ENDPOINT, "InService", "old", "an earlier rollback", ())
    assert rolled_back_reason(now, before) == ""
    assert rolled_back_reason(now, None) == "an earlier rollback"
    failed = EndpointState(ENDPOINT, "Failed", "old", "no capacity", ())
    assert rolled_back_reason(failed, None) == ""
