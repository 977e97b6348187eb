"""The HTTP API front door: API Gateway v2 (IAM auth) → Lambda speaking KServe v2 JSON.

The function gets 1,769 MB, the size at which Lambda gives one full vCPU
(512 MB gets about 0.29). Its work is CPU-bound: a 1 MB tensor in v2 JSON is
5.3 MB of text to parse and about as much to write back. A CPU-bound request
costs the same GB-seconds at either size and answers about 3.5 times sooner
at this one; the time the function waits on the endpoint costs 3.5 times as
much per millisecond. `bench/front_door.py` states what a request adds at
this size (docs/measurements/front_door.json).
"""

from __future__ import annotations

import jsii
from aws_cdk import Duration
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from deploy_infra.constructs.log_key import LogKey
from deploy_infra.constructs.sagemaker_endpoint import endpoint_arn
from deploy_infra.lambda_bundle import (
    HANDLERS_DIR,
    MALLOC_ENVIRONMENT,
    MEMORY_MB,
    front_door_asset,
)
from deploy_infra.nag import suppress

__all__ = ["HANDLER", "HANDLERS_DIR", "MEMORY_MB", "FrontDoor"]

HANDLER = "front_door.app.handler"
ROUTES: tuple[tuple[str, apigwv2.HttpMethod], ...] = (
    ("/v2/models/{model}/infer", apigwv2.HttpMethod.POST),
    ("/v2/models/{model}", apigwv2.HttpMethod.GET),
    ("/v2/health/ready", apigwv2.HttpMethod.GET),
)


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogSettings:
    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return apigw.AccessLogFormat.json_with_standard_fields(
            caller=True,
            http_method=True,
            ip=True,
            protocol=True,
            request_time=True,
            resource_path=True,
            response_length=True,
            status=True,
            user=True,
        )


class FrontDoor(Construct):
    """Lambda (python3.12, `deploy_handlers/front_door`) behind an IAM-authorised HTTP API.

    The function may invoke and describe this one endpoint and read the
    manifest at `manifest_key`; nothing else. Attributes: `function`, `api`, `url`.
    """

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
        this_endpoint = endpoint_arn(self, endpoint_name=endpoint_name)
        log_key = LogKey(
            self, "LogKey", names=("front-door-function", "front-door-access"), purpose="front door"
        )
        function_logs = log_key.log_group(self, "FunctionLogs", name="front-door-function")
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"KServe v2 front door for endpoint {endpoint_name}",
            inline_policies={
                "front-door": iam.PolicyDocument(
                    statements=[
                        iam.PolicyStatement(
                            sid="InvokeThisEndpoint",
                            actions=["sagemaker:InvokeEndpoint", "sagemaker:DescribeEndpoint"],
                            resources=[this_endpoint],
                        ),
                        iam.PolicyStatement(
                            sid="ReadManifest",
                            actions=["s3:GetObject"],
                            resources=[bucket.arn_for_objects(manifest_key)],
                        ),
                        iam.PolicyStatement(
                            sid="DecryptManifest", actions=["kms:Decrypt"], resources=[key.key_arn]
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
            # Both as the wheels in the asset are built (deploy_infra/lambda_bundle.py).
            runtime=lambda_.Runtime.PYTHON_3_12,
            architecture=lambda_.Architecture.X86_64,
            handler=HANDLER,
            code=lambda_.Code.from_asset(
                str(front_door_asset()), exclude=["**/__pycache__", "**/*.pyc"]
            ),
            role=role,
            log_group=function_logs,
            memory_size=MEMORY_MB,
            # HTTP API integrations time out after 30 s; the function should not outlive them.
            timeout=Duration.seconds(29),
            environment={
                "ENDPOINT_NAME": endpoint_name,
                "MODEL_STORE_BUCKET": bucket.bucket_name,
                "MANIFEST_KEY": manifest_key,
                **MALLOC_ENVIRONMENT,  # large buffers stay in the heap (lambda_bundle.py)
            },
            description=f"KServe v2 JSON front door for SageMaker endpoint {endpoint_name}",
        )
        suppress(self.function, "L1", "python-runtime")

        self.api = apigwv2.HttpApi(
            self,
            "Api",
            description=f"KServe v2 HTTP API for SageMaker endpoint {endpoint_name}",
            create_default_stage=False,
            default_authorizer=authorizers.HttpIamAuthorizer(),
        )
        access_logs = log_key.log_group(self, "AccessLogs", name="front-door-access")
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.api,
            auto_deploy=True,
            access_log_settings=_AccessLogSettings(access_logs),
            throttle=apigwv2.ThrottleSettings(burst_limit=200, rate_limit=100),
        )
        integration = integrations.HttpLambdaIntegration("Integration", self.function)
        for path, method in ROUTES:
            self.api.add_routes(path=path, methods=[method], integration=integration)
        self.url = self.stage.url
