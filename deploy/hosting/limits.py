"""SageMaker's request limits per hosting mode: each defined here once.

Every module of `deploy` imports them from here (each mode carries its own
as `HostingMode.max_payload`). The SDK (`deploy.client._core`) and the Lambda
front door cannot import `deploy`: they keep their own copies.

- InvokeEndpoint (real-time: multi-model and single-model endpoints) takes at
  most 6 MB of request body;
- serverless endpoints take at most 4 MB per request and per response;
- InvokeEndpointAsync takes request bodies of up to 1 GB, through S3
  (docs.aws.amazon.com/sagemaker/latest/dg/async-inference.html);
- the TargetModel header of a multi-model endpoint is 1 to 1024 characters.
"""

from __future__ import annotations

MIB = 1024 * 1024
REAL_TIME_MAX_PAYLOAD = 6 * MIB
SERVERLESS_MAX_PAYLOAD = 4 * MIB
ASYNC_MAX_PAYLOAD = 1024**3
MAX_TARGET_MODEL = 1024
