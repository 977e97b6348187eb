"""Clients for one region and the mapping of botocore errors to `AwsError`.

boto3 (>= 1.28) reads `AWS_ENDPOINT_URL` and `AWS_ENDPOINT_URL_<SERVICE>`
itself, so no endpoint handling lives here: the moto server, LocalStack or
a VPC endpoint are chosen by environment, exactly as for the AWS CLI.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deploy.errors import AwsError

if TYPE_CHECKING:
    import boto3

# What to tell the user for the error codes that have one obvious fix.
_FIXES = {
    "AccessDenied": "grant the calling role the permission named above",
    "AccessDeniedException": "grant the calling role the permission named above",
    "ExpiredToken": "refresh the credentials (aws sso login, or a new OIDC session)",
    "ExpiredTokenException": "refresh the credentials (aws sso login, or a new OIDC session)",
    "InvalidClientTokenId": "check AWS_ACCESS_KEY_ID / AWS_PROFILE",
    "NoSuchBucket": "run `deploy up` for this stage first, or check the bucket name",
    "ThrottlingException": "retry in a minute; lower the upload concurrency",
}


class AwsCallError(AwsError):
    """An AWS call failed; `code` is the service's error code ('' when none)."""

    def __init__(self, message: str, *, code: str, where: str | None, fix: str | None) -> None:
        super().__init__(message, where=where, fix=fix)
        self.code = code


@contextlib.contextmanager
def aws_call(action: str, *, where: str | None = None, fix: str | None = None) -> Iterator[None]:
    """Run boto3 calls, turning botocore failures into `AwsCallError`."""
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
    )

    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = str(error.get("Message", "")) or str(exc)
        raise AwsCallError(
            f"{action} failed: {code}: {message}",
            code=code,
            where=where,
            fix=fix or _FIXES.get(code, "check the message above; re-running is safe"),
        ) from exc
    except NoCredentialsError as exc:
        raise AwsCallError(
            f"{action} failed: no AWS credentials found",
            code="NoCredentials",
            where=where,
            fix="configure credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID, or an OIDC role)",
        ) from exc
    except NoRegionError as exc:
        raise AwsCallError(
            f"{action} failed: no region",
            code="NoRegion",
            where=where,
            fix="set `region` in deploy.toml, DEPLOY_REGION or --region",
        ) from exc
    except EndpointConnectionError as exc:
        raise AwsCallError(
            f"{action} failed: cannot reach {exc.kwargs.get('endpoint_url', 'the endpoint')}",
            code="EndpointConnection",
            where=where,
            fix="check the network, or AWS_ENDPOINT_URL when using an emulator",
        ) from exc
    except BotoCoreError as exc:
        raise AwsCallError(
            f"{action} failed: {exc}", code=type(exc).__name__, where=where, fix=fix
        ) from exc


@dataclass
class AwsSession:
    """One region and credential source; hands out cached, thread-safe clients.

    `profile` is `--profile`; None leaves the choice to boto3, which reads
    `AWS_PROFILE` itself and, as it always does, then prefers credentials in the
    environment (an explicit profile would skip them). `region_source` says
    where the region came from (`deploy.aws.region`).
    """

    region: str
    profile: str | None = None
    region_source: str = "settings"
    _session: boto3.Session | None = field(default=None, init=False, repr=False)
    _clients: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _account: str | None = field(default=None, init=False, repr=False)

    def client(self, service: str, *, max_attempts: int = 5) -> Any:
        """A boto3 client; its endpoint follows AWS_ENDPOINT_URL[_<SERVICE>]."""
        key = service if max_attempts == 5 else f"{service}/{max_attempts}"
        with self._lock:
            if key not in self._clients:
                from botocore.config import Config

                config = Config(
                    retries={"mode": "standard", "max_attempts": max_attempts},
                    max_pool_connections=32,
                )
                session: Any = self._boto3()
                # A malformed region or endpoint URL fails here, not at the first call;
                # botocore says so with a bare ValueError (`Invalid endpoint: ...`).
                action = f"creating the {service} client"
                try:
                    with aws_call(action, where=self._where()):
                        self._clients[key] = session.client(service, config=config)
                except ValueError as exc:
                    raise AwsCallError(
                        f"{action} failed: {exc}",
                        code="InvalidConfiguration",
                        where=self._where(),
                        fix="check AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_"
                        f"{service.upper().replace('-', '_')} and the region",
                    ) from exc
            return self._clients[key]

    def _where(self) -> str:
        from deploy.aws.region import describe_profile, resolve_profile

        return f"{describe_profile(resolve_profile(self.profile))}, region {self.region}"

    def _boto3(self) -> boto3.Session:
        if self._session is None:
            import boto3

            with aws_call("opening an AWS session", where=self._where()):
                self._session = boto3.Session(region_name=self.region, profile_name=self.profile)
        return self._session

    def credentials_missing(self) -> str | None:
        """Why no call can be signed (no credentials found), or None.

        Asks boto3's credential chain (environment, profile, SSO cache, container
        or instance role) without calling an AWS service.
        """
        with aws_call("looking for AWS credentials", where=self._where()):
            credentials = self._boto3().get_credentials()
        if credentials is None:
            return f"no AWS credentials found ({self._where()})"
        return None

    def account_id(self) -> str:
        """The account the credentials belong to (asked once)."""
        if self._account is None:
            with aws_call("sts:GetCallerIdentity", where=self._where()):
                self._account = str(self.client("sts").get_caller_identity()["Account"])
        return self._account
