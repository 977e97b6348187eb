"""Automatic rollback of a model's canary: an EventBridge rule and a small function.

`deploy` puts two CloudWatch alarms per canary (deploy.lifecycle.canary_alarms),
named with `alarm_prefix(endpoint)`. This rule matches their "CloudWatch Alarm
State Change" events into ALARM and runs the function
(deploy_handlers/canary_rollback), which removes the canary from the manifest
with a conditional write. Nothing runs between events: the release pipeline
may have ended long before an alarm fires.

The function may read and write the one manifest object (and use the model
store's key to do so), delete the endpoint's canary alarms (once a canary is
rolled back, nothing should watch it) and write its own log group; nothing
else.
"""

from __future__ import annotations

import re

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from cdk_nag import RegexAppliesTo
from constructs import Construct

from deploy.lifecycle.canary_alarms import KINDS, alarm_prefix
from deploy_infra.constructs.log_key import LogKey
from deploy_infra.lambda_bundle import HANDLERS_DIR
from deploy_infra.nag import suppress

HANDLER = "app.handler"  # the asset is deploy_handlers/canary_rollback/ alone
CODE_DIR = HANDLERS_DIR / "canary_rollback"
LOG_NAME = "canary-rollback-function"


class CanaryRollback(Construct):
    """Attributes: `function`, `rule`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        bucket: s3.IBucket,
        manifest_key: str,
        key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        log_key = LogKey(self, "LogKey", names=(LOG_NAME,), purpose="canary rollback")
        function_logs = log_key.log_group(self, "FunctionLogs", name=LOG_NAME)
        alarms = Stack.of(self).format_arn(
            service="cloudwatch",
            resource="alarm",
            resource_name=f"{alarm_prefix(endpoint_name)}*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Rolls back model canaries of endpoint {endpoint_name}",
            inline_policies={
                "canary-rollback": iam.PolicyDocument(
                    statements=[
                        iam.PolicyStatement(
                            sid="RewriteManifest",
                            actions=["s3:GetObject", "s3:PutObject"],
                            resources=[bucket.arn_for_objects(manifest_key)],
                        ),
                        iam.PolicyStatement(
                            sid="ManifestKey",
                            actions=["kms:Decrypt", "kms:GenerateDataKey"],
                            resources=[key.key_arn],
                        ),
                        iam.PolicyStatement(
                            sid="DeleteCanaryAlarms",
                            actions=["cloudwatch:DeleteAlarms"],
                            resources=[alarms],
                        ),
                        iam.PolicyStatement(
                            sid="WriteLogs",
                            actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                            resources=[function_logs.log_group_arn],
                        ),
                    ]
                )
            },
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=lambda_.Runtime.PYTHON_3_12,
            architecture=lambda_.Architecture.X86_64,
            handler=HANDLER,
            code=lambda_.Code.from_asset(str(CODE_DIR), exclude=["**/__pycache__", "**/*.pyc"]),
            role=role,
            log_group=function_logs,
            memory_size=256,
            timeout=Duration.seconds(60),
            environment={
                "ENDPOINT_NAME": endpoint_name,
                "MODEL_STORE_BUCKET": bucket.bucket_name,
                "MANIFEST_KEY": manifest_key,
                "CANARY_ALARM_KINDS": ",".join(KINDS),
            },
            description=f"Rolls back a model canary of endpoint {endpoint_name} on its alarm",
        )
        suppress(self.function, "L1", "python-runtime-rollback")
        suppress(
            role,
            "IAM5",
            "canary-alarms-prefix",
            applies_to=[
                RegexAppliesTo(
                    # Partition, region and account: tokens, or the stage's own values.
                    regex=r"/^Resource::arn:[^:]+:cloudwatch:[^:]+:[^:]+:alarm:"
                    rf"{re.escape(alarm_prefix(endpoint_name))}\*$/"
                )
            ],
        )
        self.rule = events.Rule(
            self,
            "AlarmRule",
            description=f"Canary alarms of endpoint {endpoint_name} entering ALARM",
            event_pattern=events.EventPattern(
                source=["aws.cloudwatch"],
                detail_type=["CloudWatch Alarm State Change"],
                detail={
                    "alarmName": events.Match.prefix(alarm_prefix(endpoint_name)),
                    "state": {"value": ["ALARM"]},
                },
            ),
        )
        # A failed run (it lost to other publishes each time) is retried by EventBridge.
        self.rule.add_target(
            targets.LambdaFunction(self.function, retry_attempts=4, max_event_age=Duration.hours(1))
        )
