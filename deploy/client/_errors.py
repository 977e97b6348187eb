"""The SDK's own error tree, separate from the CLI's `deploy.errors`.

Applications catch `ClientError` for everything the SDK raises on purpose;
the subclasses say what went wrong and carry the details as attributes.

    ClientError
    ├── InvalidInputError          inputs do not match the model (raised before sending)
    │   └── PayloadTooLargeError   the encoded request exceeds the endpoint's limit
    ├── ManifestError              manifest.json cannot be read, found or understood
    ├── ModelNotFoundError         a model name resolves to no TargetModel
    ├── ResponseFormatError        the response body is malformed (never a wrong array)
    ├── ModelError                 the model or Triton rejected the request (not retried)
    ├── EndpointError              the endpoint or the service failed the call
    │   └── RetriesExhaustedError  a transient failure outlived the retry policy
    └── InferenceTimeoutError      a call, the whole retry sequence or an asynchronous
                                   request's wait for its answer ran out of time
"""

from __future__ import annotations


class ClientError(Exception):
    """Base class of every error the SDK raises on purpose.

    `where` names the endpoint, model or tensor; `fix` says what to do.
    """

    def __init__(self, message: str, *, where: str | None = None, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where
        self.fix = fix

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.fix:
            text = f"{text} ({self.fix})"
        return text


class InvalidInputError(ClientError):
    """An input tensor does not match the model's metadata, or cannot be encoded."""


class PayloadTooLargeError(InvalidInputError):
    """The encoded request is larger than the endpoint accepts.

    `hosting` names the endpoint's hosting mode when known; `alternative` the
    mode that takes a request of this size (None: none does), up to
    `alternative_limit` bytes.
    """

    def __init__(
        self,
        size: int,
        limit: int,
        *,
        where: str | None = None,
        hosting: str | None = None,
        alternative: str | None = None,
        alternative_limit: int | None = None,
    ) -> None:
        whose = f"the {hosting} endpoint's" if hosting else "the endpoint's"
        message = f"request payload is {size} bytes, over {whose} limit of {limit} bytes"
        fix = "send a smaller batch, or raise max_payload_bytes if the endpoint allows more"
        if alternative is not None and (alternative_limit is None or size <= alternative_limit):
            message += f"; hosting {alternative!r} takes requests up to {alternative_limit} bytes"
            fix = (
                f'send a smaller batch, or deploy the models with hosting = "{alternative}" '
                "(or pair this endpoint with one: the manifest's async_lane)"
            )
        elif hosting is not None:
            message += "; no hosting mode takes a larger request"
            fix = "split the request into smaller batches"
        super().__init__(message, where=where, fix=fix)
        self.size = size
        self.limit = limit
        self.hosting = hosting
        self.alternative = alternative
        self.alternative_limit = alternative_limit


class ManifestError(ClientError):
    """The model store's manifest.json cannot be read or is not a manifest."""


class ModelNotFoundError(ClientError):
    """A model name does not resolve to a TargetModel the endpoint serves."""


class ResponseFormatError(ClientError):
    """A response body cannot be decoded: truncated, inconsistent or of unknown type."""


class ModelError(ClientError):
    """The model (or Triton in front of it) rejected the request.

    `status` is Triton's HTTP status when known; retrying will not help.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        where: str | None = None,
        fix: str | None = None,
    ) -> None:
        super().__init__(message, where=where, fix=fix)
        self.status = status


class EndpointError(ClientError):
    """The endpoint or the SageMaker service failed the call.

    `code` is the service's error code (such as `ValidationError`), `status`
    the HTTP status of the response when there was one.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        where: str | None = None,
        fix: str | None = None,
    ) -> None:
        super().__init__(message, where=where, fix=fix)
        self.code = code
        self.status = status


class RetriesExhaustedError(EndpointError):
    """A transient failure (throttling, cold load, 503/507, reset) kept happening."""

    def __init__(
        self,
        message: str,
        *,
        attempts: int,
        code: str | None = None,
        status: int | None = None,
        where: str | None = None,
    ) -> None:
        super().__init__(
            f"{message} (gave up after {attempts} attempts)",
            code=code,
            status=status,
            where=where,
            fix="retry later, or allow more attempts with retries=RetryPolicy(max_attempts=...)",
        )
        self.attempts = attempts


class InferenceTimeoutError(ClientError):
    """A single call exceeded `timeout`, or all attempts exceeded the total deadline."""
