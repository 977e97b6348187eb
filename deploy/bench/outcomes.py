"""The outcome of one call, and SDK errors sorted into the classes a report counts.

The SDK's error tree says what a caller should do (retry, fix the inputs);
a load test wants to know what the endpoint did: throttled, still loading
the model, failed on the server, too slow, refused the request. The codes
and statuses below are SageMaker's (and the local endpoint's, which answers
the same way).
"""

from __future__ import annotations

from deploy.client import (
    ClientError,
    EndpointError,
    InferenceTimeoutError,
    InvalidInputError,
    ModelError,
    ModelNotFoundError,
    ResponseFormatError,
)

OK = "ok"
THROTTLING = "throttling"
MODEL_NOT_READY = "model_not_ready"
SERVER_5XX = "5xx"
TIMEOUT = "timeout"
CLIENT_4XX = "4xx"
CONNECTION = "connection"
BAD_RESPONSE = "bad_response"
OTHER = "other"

# Index = the code a worker records per call (one byte per sample).
OUTCOMES: tuple[str, ...] = (
    OK,
    THROTTLING,
    MODEL_NOT_READY,
    SERVER_5XX,
    TIMEOUT,
    CLIENT_4XX,
    CONNECTION,
    BAD_RESPONSE,
    OTHER,
)
CODE = {name: index for index, name in enumerate(OUTCOMES)}
ERROR_CLASSES: tuple[str, ...] = OUTCOMES[1:]

_THROTTLING_CODES = frozenset(
    {"ThrottlingException", "Throttling", "ThrottledException", "TooManyRequestsException"}
)
_NOT_READY_CODE = "ModelNotReadyException"


def classify(error: BaseException) -> str:
    """The report's class for an exception raised by `Endpoint.infer`."""
    if isinstance(error, InferenceTimeoutError):
        return TIMEOUT
    if isinstance(error, ResponseFormatError):
        return BAD_RESPONSE
    if isinstance(error, EndpointError):
        if error.code == _NOT_READY_CODE:
            return MODEL_NOT_READY
        if error.code in _THROTTLING_CODES or error.status == 429:
            return THROTTLING
        if error.status is None:
            return CONNECTION  # no HTTP answer: refused, reset, dropped
        return SERVER_5XX if error.status >= 500 else CLIENT_4XX
    if isinstance(error, ModelError):
        # Triton's own status when the platform passed it on (424 carries it).
        return SERVER_5XX if error.status is not None and error.status >= 500 else CLIENT_4XX
    if isinstance(error, (InvalidInputError, ModelNotFoundError)):
        return CLIENT_4XX
    if isinstance(error, ClientError):
        return OTHER
    return OTHER
