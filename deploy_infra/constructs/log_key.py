"""Log groups encrypted with a customer-managed key that serves them and nothing else."""

from __future__ import annotations

from aws_cdk import ArnFormat, Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct


class LogKey(Construct):
    """A KMS key for the named log groups of one stack.

    CloudWatch Logs (`logs.<region>.amazonaws.com`) may use the key only with
    the encryption context of these log groups; their names are fixed at
    synth time (`/deploy/<stack name>/<name>`), so the key policy names their
    ARNs exactly without referring to the log groups (which refer to the key).
    Call `log_group(...)` for each name given here.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, names: tuple[str, ...], purpose: str
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self._names = {name: f"/deploy/{stack.stack_name}/{name}" for name in names}
        self.key = kms.Key(
            self,
            "Key",
            description=f"deploy: {purpose} logs of {stack.stack_name}",
            enable_key_rotation=True,
            # The log groups are deleted with the stack; their key follows them.
            removal_policy=RemovalPolicy.DESTROY,
            pending_window=Duration.days(7),
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchLogsForTheseGroups",
                principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                resources=["*"],
                conditions={
                    "ArnEquals": {
                        "kms:EncryptionContext:aws:logs:arn": [
                            stack.format_arn(
                                service="logs",
                                resource="log-group",
                                resource_name=group,
                                arn_format=ArnFormat.COLON_RESOURCE_NAME,
                            )
                            for group in self._names.values()
                        ]
                    }
                },
            )
        )

    def log_group(self, scope: Construct, construct_id: str, *, name: str) -> logs.LogGroup:
        """The log group `name` (one of the names given), encrypted with this key."""
        return logs.LogGroup(
            scope,
            construct_id,
            log_group_name=self._names[name],
            encryption_key=self.key,
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=RemovalPolicy.DESTROY,
        )
