"""SageMaker's request limits per hosting mode, as `deploy` uses them.

The request limits are defined once, in the manifest contract
(`deploy.client.manifest`), which publishes them in every manifest so that the
SDK and the front door read them from there (the Lambda carries a
byte-for-byte copy of that module); this module hands them, under the same
names, to the rest of `deploy`, and each mode carries its own as `HostingMode.max_payload`.

- InvokeEndpoint (real-time: multi-model and single-model endpoints) takes at
  most 6 MB of request body;
- serverless endpoints take at most 4 MB per request and per response;
- InvokeEndpointAsync takes request bodies of up to 1 GB, through S3
  (docs.aws.amazon.com/sagemaker/latest/dg/async-inference.html);
- the TargetModel header of a multi-model endpoint is 1 to 1024 characters.
"""

from __future__ import annotations

from deploy.client.manifest import (
    ASYNC_MAX_REQUEST as ASYNC_MAX_REQUEST,
)
from deploy.client.manifest import (
    MIB as MIB,
)
from deploy.client.manifest import (
    REALTIME_MAX_REQUEST as REALTIME_MAX_REQUEST,
)
from deploy.client.manifest import (
    SERVERLESS_MAX_REQUEST as SERVERLESS_MAX_REQUEST,
)

MAX_TARGET_MODEL = 1024
