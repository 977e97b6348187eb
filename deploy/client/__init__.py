"""Client SDK: call Triton models on a SageMaker endpoint with numpy arrays.

    from deploy.client import Endpoint

    with Endpoint("my-endpoint", manifest="build/models/manifest.json") as endpoint:
        result = endpoint.infer("addsub", {"INPUT0": a, "INPUT1": b})
        print(result["OUTPUT0"])

The same code runs against the local endpoint (`endpoint_url=`) and AWS. It
speaks Triton's v2 binary protocol over SageMaker `InvokeEndpoint`, resolves
logical model names to TargetModels through the model store's manifest,
validates inputs before sending, and retries transient failures. On an
asynchronous endpoint (and for large requests to a stage's async lane) the
same calls go through S3 and InvokeEndpointAsync. Only numpy,
botocore/boto3 and (for `AsyncEndpoint`) aiohttp are needed.
"""

from deploy.client._async import AsyncEndpoint
from deploy.client._async_inference import (
    AsyncInferenceOptions,
    AsyncPendingInference,
    PendingInference,
)
from deploy.client._core import DEFAULT_MAX_PAYLOAD
from deploy.client._discovery import endpoint_name_at
from deploy.client._errors import (
    ClientError,
    EndpointError,
    InferenceTimeoutError,
    InvalidInputError,
    ManifestError,
    ModelError,
    ModelNotFoundError,
    PayloadTooLargeError,
    ResponseFormatError,
    RetriesExhaustedError,
)
from deploy.client._manifest import AsyncLane, AsyncLocations, Manifest, ModelInfo, TensorSpec
from deploy.client._result import Classification, InferResult
from deploy.client._retry import RetryPolicy
from deploy.client._sync import Endpoint
from deploy.client.codec import DecodedResponse, EncodedRequest, Tensor, decode, encode
from deploy.client.dtypes import from_bfloat16, to_bfloat16

__all__ = [
    "DEFAULT_MAX_PAYLOAD",
    "AsyncEndpoint",
    "AsyncInferenceOptions",
    "AsyncLane",
    "AsyncLocations",
    "AsyncPendingInference",
    "Classification",
    "ClientError",
    "DecodedResponse",
    "EncodedRequest",
    "Endpoint",
    "EndpointError",
    "InferResult",
    "InferenceTimeoutError",
    "InvalidInputError",
    "Manifest",
    "ManifestError",
    "ModelError",
    "ModelInfo",
    "ModelNotFoundError",
    "PayloadTooLargeError",
    "PendingInference",
    "ResponseFormatError",
    "RetriesExhaustedError",
    "RetryPolicy",
    "Tensor",
    "TensorSpec",
    "decode",
    "encode",
    "endpoint_name_at",
    "from_bfloat16",
    "to_bfloat16",
]
