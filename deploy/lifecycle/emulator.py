"""An emulated AWS for `deploy up` without an AWS account: moto's server and a local endpoint.

`deploy up` talks to two planes. The control plane (S3, CloudFormation,
SageMaker's control API, SSM, STS, Application Auto Scaling, CloudWatch) is
played by moto's server on a loopback port, reached through
`AWS_ENDPOINT_URL` with dummy credentials. moto has no data plane: its
`InvokeEndpoint` answers an HTML 500 page. So the data plane is a local
SageMaker endpoint (the real tritonserver) that serves the stage's model
store from moto's S3, as SageMaker would, and smoke tests are sent there
(`DEPLOY_SMOKE_ENDPOINT_URL`); `deploy invoke --endpoint-url` reaches it too.

Before `deploy up` can run, the control plane gets what `cdk bootstrap`
leaves in an account (the bootstrap version parameter, the assets bucket),
and each service whose resources CloudFormation creates is called once:
moto's server loads a service's models on its first request, and only then
can its CloudFormation create that service's resources. The front door
(API Gateway and Lambda) is left out: moto runs no Lambda code.

`emulated_aws` starts both planes and yields the variables to export;
`deploy emulate` runs it in the foreground and prints them.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from deploy.errors import AwsError

REGION = "us-east-1"
BUCKET = "deploy-emulated-model-store"
DATA_PLANE_NAME = "emulated"
_BOOTSTRAP_QUALIFIER = "hnb659fds"  # the CDK's default
_BOOTSTRAP_VERSION = "30"
# The environment an emulated session must not carry over from the user's shell.
UNSET = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


@dataclass(frozen=True)
class EmulatedAws:
    """Where the two planes listen, and the environment that points `deploy` at them."""

    control_url: str  # moto's server
    data_url: str  # the local endpoint serving s3://BUCKET/PREFIX
    region: str
    bucket: str
    prefix: str

    def environment(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.control_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
            "DEPLOY_INFRA__MODEL_BUCKET_NAME": self.bucket,
            "DEPLOY_INFRA__MODEL_PREFIX": self.prefix,
            "DEPLOY_INFRA__API": "false",
            "DEPLOY_SMOKE_ENDPOINT_URL": self.data_url,
            "DEPLOY_SMOKE_ENDPOINT_NAME": DATA_PLANE_NAME,
        }

    def shell(self) -> str:
        """`export` lines for a POSIX shell (`eval "$(...)"` or pasted)."""
        lines = [f"unset {' '.join(UNSET)}"]
        lines += [f"export {key}={value}" for key, value in self.environment().items()]
        return "\n".join(lines) + "\n"

    def dotenv(self) -> str:
        """KEY=VALUE lines (`set -a; . FILE`, or a CI system's environment file)."""
        return "".join(f"{key}={value}\n" for key, value in self.environment().items())


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def control_plane(host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """moto's server on `host:port` (0: a free port); its URL while the block runs."""
    import logging

    from moto.server import ThreadedMotoServer

    # A line per request otherwise, and a traceback for each call moto does not emulate
    # (Service Quotas for SageMaker, ...), which answers 500; deploy reports those itself.
    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    port = port or free_port(host)
    server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    try:
        server.start()
    except OSError as exc:
        raise AwsError(
            f"cannot start the emulated AWS on {host}:{port}: {exc}",
            where="deploy emulate",
            fix="pick another --port",
        ) from exc
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def prepare_control_plane(url: str, region: str = REGION) -> None:
    """What `cdk bootstrap` leaves in an account, and each service's models loaded."""
    import boto3

    session = boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name=region
    )

    def client(service: str) -> Any:
        return session.client(service, endpoint_url=url)  # type: ignore[call-overload]

    client("ssm").put_parameter(
        Name=f"/cdk-bootstrap/{_BOOTSTRAP_QUALIFIER}/version",
        Value=_BOOTSTRAP_VERSION,
        Type="String",
        Overwrite=True,
    )
    account = client("sts").get_caller_identity()["Account"]
    assets = f"cdk-{_BOOTSTRAP_QUALIFIER}-assets-{account}-{region}"
    if region == "us-east-1":
        client("s3").create_bucket(Bucket=assets)
    else:
        client("s3").create_bucket(
            Bucket=assets, CreateBucketConfiguration={"LocationConstraint": region}
        )
    client("application-autoscaling").describe_scalable_targets(ServiceNamespace="sagemaker")
    client("cloudwatch").describe_alarms()
    client("sns").list_topics()
    client("sagemaker").list_endpoints()


@contextlib.contextmanager
def emulated_aws(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    data_port: int = 0,
    region: str = REGION,
    bucket: str = BUCKET,
    prefix: str = "models/",
) -> Iterator[EmulatedAws]:
    """Both planes, started; the variables are also set in this process (the data
    plane reads its store from moto's S3 through them)."""
    from deploy.local.modes.endpoint import EndpointOptions, LocalEndpoint

    with control_plane(host, port) as url:
        prepare_control_plane(url, region)
        emulated = EmulatedAws(url, "", region, bucket, prefix)
        previous = {key: os.environ.get(key) for key in (*emulated.environment(), *UNSET)}
        for key in UNSET:
            os.environ.pop(key, None)
        os.environ.update({k: v for k, v in emulated.environment().items() if k.startswith("AWS_")})
        endpoint = LocalEndpoint(
            f"s3://{bucket}/{prefix}",
            options=EndpointOptions(endpoint_name=DATA_PLANE_NAME, host=host, port=data_port),
        )
        try:
            endpoint.start()
            yield EmulatedAws(url, endpoint.url, region, bucket, prefix)
        finally:
            endpoint.stop()
            for key, value in previous.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
