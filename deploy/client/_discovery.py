"""Finding the manifest: a path, an s3:// URL, or discovered from the endpoint.

Discovery follows the endpoint to its model data URL (DescribeEndpoint →
DescribeEndpointConfig → DescribeModel → ModelDataUrl) and reads
`manifest.json` there; with an `endpoint_url` it then asks that URL for
`/deploy/manifest.json` (what the local endpoint serves). Finding no
manifest is not an error by itself: names that are already TargetModels
still work, and `reason` says what went wrong. A manifest that is found but
refused (too large, not JSON, nested too deeply, breaking the contract) is a
`ManifestError`.

Whoever serves the manifest does not decide how long or how much the SDK
reads: every read happens within the call's deadline (`timeout`), over the
deadline sockets of `deploy.client._transport` (a byte every few seconds
does not keep a read alive), and stops at `MAX_MANIFEST_BYTES`: a larger
announced length is refused before the body is read, and a body without one
is read only one byte past the limit. A deadline that passes is an
`InferenceTimeoutError`, and the next call looks again.

`origin` records where the manifest came from, and the bucket owner's
account when DescribeEndpoint named it (`deploy.client._ownership`).

A manifest read from a path, an s3:// URL or by discovery is kept for
`ttl` seconds (`DEFAULT_MANIFEST_TTL`), then read again on the next call, so
that a manifest `deploy up`, a promotion or a rollback publishes reaches
every caller within that time. A re-read that fails keeps the manifest read
before (the call goes on; the failure is logged) and is tried again
`_RETRY_AFTER_FAILURE` seconds later. A `Manifest` object given is never re-read.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deploy.client._deadline import deadline, remaining
from deploy.client._errors import InferenceTimeoutError, ManifestError
from deploy.client._manifest import Manifest, check_size, manifest_url_for, split_s3_url
from deploy.client._ownership import Origin, account_of
from deploy.client.manifest import MAX_MANIFEST_BYTES

# Where the local endpoint (`deploy serve`) serves its store's manifest; SageMaker's
# runtime has no such path, so elsewhere the GET simply fails and names stay unresolved.
ENDPOINT_MANIFEST_PATH = "/deploy/manifest.json"
# ...and names itself in this header of that answer (deploy/local/http/wire.py sends it).
ENDPOINT_NAME_HEADER = "X-Deploy-Endpoint-Name"
# How long discovery may take when the caller gives no deadline.
DEFAULT_DISCOVERY_TIMEOUT = 10.0
# A failure this close to the deadline is taken for the deadline passing (a socket
# timeout armed to the time left may fire a hair early).
_SLACK = 0.05
# How long a manifest read is used before it is read again (seconds): the most a
# published change (a canary, its rollback) takes to reach a running client.
DEFAULT_MANIFEST_TTL = 60.0
# After a failed re-read, how long the manifest read before is used until the next try.
_RETRY_AFTER_FAILURE = 5.0
log = logging.getLogger("deploy.client")

ManifestLocation = str | Path | Manifest | None


class ManifestSource:
    """Finds and caches the manifest: a path, an s3:// URL, or discovered.

    `client_factory` returns the control-plane clients (sagemaker, s3) whose
    requests stop at the calling thread's deadline; `connect_timeout` bounds
    connecting to `endpoint_url`; `ca_bundle()` names what verifies its TLS
    (None: botocore's default bundle); `ttl` how many seconds a manifest read
    is used (None: for ever).
    """

    def __init__(
        self,
        location: ManifestLocation,
        *,
        endpoint: str,
        client_factory: Callable[[str], Any],
        discover: bool = True,
        endpoint_url: str | None = None,
        connect_timeout: float = 10.0,
        ca_bundle: Callable[[], str | None] = lambda: None,
        ttl: float | None = DEFAULT_MANIFEST_TTL,
    ) -> None:
        if ttl is not None and ttl < 0:
            raise ValueError(f"manifest_ttl must be 0 or more seconds (or None), not {ttl!r}")
        self._location = location
        self._discover_allowed = discover
        self._endpoint_url = endpoint_url
        self._endpoint = endpoint
        self._client = client_factory
        self._connect_timeout = connect_timeout
        self._ca_bundle = ca_bundle
        self._cached: Manifest | None = location if isinstance(location, Manifest) else None
        self._loaded = self._cached is not None
        self.reason: str | None = None
        source = self._cached.source if self._cached is not None else str(location)
        self.origin = Origin(source)
        self._ttl = None if isinstance(location, Manifest) else ttl
        self._read_at = 0.0  # time.monotonic() of the last read
        self._rereading = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether `get` answers without reading (read, and not yet due again)."""
        return self._loaded and not self._due()

    def _due(self) -> bool:
        """A manifest read before whose lifetime is over."""
        ttl = self._ttl
        return ttl is not None and self._loaded and time.monotonic() - self._read_at >= ttl

    def get(self, timeout: float | None = None) -> Manifest | None:
        """The manifest, read on first use (and again once `ttl` has passed) within
        `timeout` seconds (the call's)."""
        if not self._loaded:
            self._read(timeout)
        elif self._due() and self._rereading.acquire(blocking=False):
            # One thread re-reads; the others go on with the manifest they have.
            try:
                if self._due():
                    self._reread(timeout)
            finally:
                self._rereading.release()
        return self._cached

    def _read(self, timeout: float | None) -> None:
        limit = DEFAULT_DISCOVERY_TIMEOUT if timeout is None else timeout
        with deadline(limit):
            self._cached, self.origin = self._load(limit)
        self._loaded = True
        self._read_at = time.monotonic()

    def _reread(self, timeout: float | None) -> None:
        """Read again after the lifetime; a failure keeps what was read before."""
        before, origin, reason = self._cached, self.origin, self.reason
        try:
            self._read(timeout)
        except (ManifestError, InferenceTimeoutError) as exc:
            failure: str = str(exc)
        else:
            if self._cached is not None or before is None:
                return
            failure = self.reason or "no manifest was found"
        log.warning(
            "endpoint %r: re-reading the manifest failed (%s); using the one read before, "
            "trying again in %g s",
            self._endpoint,
            failure,
            _RETRY_AFTER_FAILURE,
        )
        self._cached, self.origin, self.reason = before, origin, reason
        self._loaded = True
        assert self._ttl is not None  # only a manifest with a lifetime is re-read
        self._read_at = time.monotonic() - self._ttl + min(_RETRY_AFTER_FAILURE, self._ttl)

    def refresh(self, timeout: float | None = None) -> Manifest | None:
        """Read the manifest again (after the endpoint said a model is missing)."""
        if isinstance(self._location, Manifest):
            return self._location
        self._loaded = False
        return self.get(timeout)

    def _load(self, limit: float) -> tuple[Manifest | None, Origin]:
        location = self._location
        if isinstance(location, Manifest):
            return location, self.origin
        if location is None:
            return self._discover(limit)
        text = str(location)
        if text.startswith("s3://"):
            return self._read_s3(text, limit)
        return Manifest.from_path(location), Origin(text)

    def _expired(self, what: str, limit: float) -> InferenceTimeoutError | None:
        """The timeout error when the deadline has passed (else None)."""
        left = remaining()
        if left is None or left > _SLACK:
            return None
        return InferenceTimeoutError(
            f"{what} did not arrive within timeout={limit:g}s",
            where=f"endpoint {self._endpoint!r}",
            fix="raise timeout=, or pass manifest= (a path or s3:// URL) to skip discovery",
        )

    def _read_s3(self, url: str, limit: float) -> tuple[Manifest, Origin]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self._fetch_s3(url, None)
        except (BotoCoreError, ClientError) as exc:
            expired = self._expired(f"the manifest {url}", limit)
            if expired is not None:
                raise expired from exc
            raise ManifestError(
                f"cannot be read: {exc}",
                where=url,
                fix="check the URL and that these credentials may read it",
            ) from exc

    def _fetch_s3(self, url: str, owner: str | None) -> tuple[Manifest, Origin]:
        """Read and parse a manifest object, refusing one over the limit unread."""
        bucket, key = split_s3_url(url)
        extra = {"ExpectedBucketOwner": owner} if owner else {}
        response = self._client("s3").get_object(Bucket=bucket, Key=key, **extra)
        body = response["Body"]
        try:
            check_size(int(response.get("ContentLength") or 0), url)
            raw = body.read(MAX_MANIFEST_BYTES + 1)
        finally:
            body.close()
        check_size(len(raw), url, at_least=True)
        return Manifest.from_bytes(raw, url), Origin(url, bucket, key, owner)

    def _discover(self, limit: float) -> tuple[Manifest | None, Origin]:
        reasons = []
        if self._discover_allowed:
            found, reason = self._from_control_plane(limit)
            if found is not None:
                return found
            reasons.append(reason)
        if self._endpoint_url is not None:
            found, reason = self._from_endpoint_url(self._endpoint_url, limit)
            if found is not None:
                return found
            reasons.append(reason)
        if not reasons:
            reasons.append("no manifest was given")
        self.reason = "; ".join(reasons)
        return None, self.origin

    def _from_control_plane(self, limit: float) -> tuple[tuple[Manifest, Origin] | None, str]:
        from botocore.exceptions import BotoCoreError, ClientError

        failed = f"could not find the manifest of endpoint {self._endpoint!r}"
        try:
            sagemaker = self._client("sagemaker")
            endpoint = sagemaker.describe_endpoint(EndpointName=self._endpoint)
            config = sagemaker.describe_endpoint_config(
                EndpointConfigName=endpoint["EndpointConfigName"]
            )
            model = sagemaker.describe_model(ModelName=config["ProductionVariants"][0]["ModelName"])
            container = model.get("PrimaryContainer") or model["Containers"][0]
            url = manifest_url_for(container["ModelDataUrl"])
            # `deploy up` puts the model store in the endpoint's account.
            owner = account_of(endpoint.get("EndpointArn"))
        except (BotoCoreError, ClientError, ManifestError, KeyError, IndexError) as exc:
            expired = self._expired("the endpoint's description", limit)
            if expired is not None:
                raise expired from exc
            return None, f"{failed}: {exc}"
        try:
            return self._fetch_s3(url, owner), ""  # found but refused: a ManifestError
        except (BotoCoreError, ClientError) as exc:
            expired = self._expired(f"the manifest {url}", limit)
            if expired is not None:
                raise expired from exc
            return None, f"{failed}: {exc}"

    def _from_endpoint_url(
        self, endpoint_url: str, limit: float
    ) -> tuple[tuple[Manifest, Origin] | None, str]:
        """The manifest a local endpoint serves."""
        from botocore.exceptions import BotoCoreError

        from deploy.client._connections import BodyTooLargeError, Connections

        url = endpoint_url.rstrip("/") + ENDPOINT_MANIFEST_PATH
        try:
            connections = Connections(
                url,
                connect_timeout=self._connect_timeout,
                max_idle=0,
                ca_bundle=self._ca_bundle(),
            )
            status, _, raw = connections.request(
                "GET",
                None,
                {"Accept": "application/json"},
                _left(limit),
                max_bytes=MAX_MANIFEST_BYTES,
            )
        except BodyTooLargeError as exc:
            check_size(exc.size, url, at_least=exc.at_least)
            raise AssertionError("unreachable: the size is over the limit") from exc
        except (BotoCoreError, ValueError, OSError) as exc:  # ValueError: a malformed URL
            expired = self._expired(f"the manifest {url}", limit)
            if expired is not None:
                raise expired from exc
            return None, f"{url} gave no manifest ({exc})"
        if status != 200:
            return None, f"{url} gave no manifest (HTTP {status})"
        return (Manifest.from_bytes(raw, url), Origin(url)), ""


def _left(limit: float) -> float:
    left = remaining()
    return limit if left is None else left


def endpoint_name_at(
    endpoint_url: str, *, timeout: float = DEFAULT_DISCOVERY_TIMEOUT
) -> str | None:
    """The name the local endpoint (`deploy serve`) at `endpoint_url` gives itself.

    None when the URL does not answer as a local endpoint does (SageMaker's
    runtime, a proxy to it, nothing listening)."""
    import urllib.error
    import urllib.request

    url = endpoint_url.rstrip("/") + ENDPOINT_MANIFEST_PATH
    try:
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            name = response.headers.get(ENDPOINT_NAME_HEADER)
    except urllib.error.HTTPError as exc:  # a store without a manifest still names itself
        with exc:  # the error is the response: close its connection
            name = exc.headers.get(ENDPOINT_NAME_HEADER)
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return str(name) if name else None
