"""The S3 layout of an asynchronous endpoint and the limits SageMaker sets.

Clients upload a request under the input prefix, call InvokeEndpointAsync with
its location, and the endpoint writes the answer under the output prefix (or
an error under the failure prefix). A stage on AWS keeps the three prefixes in
its model-store bucket, beside (not under) the model prefix, so pruning models
never touches them and the execution role's model grants do not reach them:

    s3://<model bucket>/async/<endpoint name>/input/
    s3://<model bucket>/async/<endpoint name>/output/
    s3://<model bucket>/async/<endpoint name>/failure/

The published manifest names the three URLs (`manifest_section`), so a client
needs nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from deploy.errors import ConfigError

# docs.aws.amazon.com/sagemaker/latest/dg/async-inference.html: payloads up to
# 1 GB (deploy.hosting.limits), processing up to one hour; InvocationTimeoutSeconds
# defaults to 900.
MAX_INVOCATION_TIMEOUT_S = 3600
DEFAULT_INVOCATION_TIMEOUT_S = 900
MIN_REQUEST_TTL_S = 60
MAX_REQUEST_TTL_S = 21600
DEFAULT_REQUEST_TTL_S = 21600
ASYNC_ROOT = "async/"


@dataclass(frozen=True)
class AsyncLocations:
    """s3:// URLs (each ending in `/`) of the three prefixes."""

    input_prefix: str
    output_prefix: str
    failure_prefix: str

    @classmethod
    def under(cls, root: str, *, where: str = "--async-output") -> AsyncLocations:
        """`root` + input/, output/, failure/ (root: an s3://bucket/prefix/ URL)."""
        bucket, _, prefix = root.removeprefix("s3://").partition("/")
        if not root.startswith("s3://") or not bucket:
            raise ConfigError(
                f"{root!r} is not an s3://BUCKET/PREFIX/ URL",
                where=where,
                fix="name the S3 prefix the endpoint reads requests from and writes "
                "results to, e.g. s3://my-bucket/async/",
            )
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        base = f"s3://{bucket}/{prefix}"
        return cls(base + "input/", base + "output/", base + "failure/")

    def bucket_and_prefix(self, url: str) -> tuple[str, str]:
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        return bucket, prefix


def stage_root(endpoint_name: str) -> str:
    """The key prefix holding a stage's input/, output/ and failure/ prefixes."""
    return f"{ASYNC_ROOT}{endpoint_name}/"


def stage_locations(bucket: str, endpoint_name: str) -> AsyncLocations:
    """The prefixes of a stage on AWS (see the module docstring)."""
    return AsyncLocations.under(f"s3://{bucket}/{stage_root(endpoint_name)}")


def output_key(prefix: str, name: str) -> str:
    """Where the answer to request `name` goes (SageMaker: `<id>.out`)."""
    return f"{prefix}{name}.out"


def failure_key(prefix: str, name: str) -> str:
    """Where the error of request `name` goes (SageMaker: `<id>-error.out`)."""
    return f"{prefix}{name}-error.out"


def manifest_section(locations: AsyncLocations) -> dict[str, str]:
    """What a manifest says about an asynchronous endpoint's S3 locations."""
    return {
        "input_prefix": locations.input_prefix,
        "output_prefix": locations.output_prefix,
        "failure_prefix": locations.failure_prefix,
    }
