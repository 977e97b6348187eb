"""Which S3 objects the SDK may read and delete: those the manifest owns.

Asynchronous requests travel through S3 with the caller's credentials, and
the SDK deletes what it uploaded and the answer it read. A manifest or an
endpoint answer from someone else must not turn that into reading or
deleting other objects, or into uploading the caller's data elsewhere. So:

- an `S3Scope` is one manifest section's three prefixes (`async_inference`
  or `async_lane`). They must share one bucket, be disjoint, each name a
  folder (not the whole bucket), and, when the manifest was read from S3,
  lie in the manifest's own bucket without covering the manifest itself.
  Anything else is a `ManifestError` naming the section and the URL.
- an answer's `OutputLocation` must lie under the output prefix and its
  `FailureLocation` under the failure prefix, or the answer is a
  `ResponseFormatError` naming it, before anything is read or deleted.
- every S3 call passes `ExpectedBucketOwner` when the bucket's account is
  known. Discovery learns it without another call: DescribeEndpoint's
  `EndpointArn` names the endpoint's account, and `deploy up` creates the
  model-store bucket (which holds the manifest and the asynchronous
  prefixes) in that same account. STS would name the caller's account,
  which is not the bucket's when a role of another account calls; a manifest
  field would be the unchecked word of whoever wrote the manifest. With
  `manifest=` given (a path, an s3:// URL) the account is not known and the
  header is left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deploy.client._errors import ManifestError, ResponseFormatError
from deploy.client.manifest import AsyncLocations

_S3 = "s3://"
_FIX = (
    "the SDK reads and deletes only objects under the manifest's own asynchronous "
    "prefixes: use the manifest `deploy up` published for this stage"
)


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a manifest came from: `bucket` and `key` when it was read from S3,
    `owner` the AWS account owning that bucket when known (see the module)."""

    source: str
    bucket: str | None = None
    key: str | None = None
    owner: str | None = None


def account_of(arn: Any) -> str | None:
    """The 12-digit account of an ARN (`arn:aws:sagemaker:REGION:ACCOUNT:...`)."""
    parts = arn.split(":") if isinstance(arn, str) else []
    if len(parts) >= 6 and parts[0] == "arn" and len(parts[4]) == 12 and parts[4].isdigit():
        return parts[4]
    return None


def _split(url: str) -> tuple[str, str]:
    bucket, _, key = url.removeprefix(_S3).partition("/")
    return bucket, key


def _dot_segment(key: str) -> bool:
    return any(part in (".", "..") for part in key.split("/"))


@dataclass(frozen=True, slots=True)
class S3Scope:
    """One asynchronous endpoint's prefixes (keys in `bucket`) and the bucket's owner."""

    section: str
    bucket: str
    input_prefix: str
    output_prefix: str
    failure_prefix: str
    owner: str | None = None

    @classmethod
    def of(cls, locations: AsyncLocations, origin: Origin, section: str) -> S3Scope:
        """The scope of a manifest section, checked (see the module docstring)."""
        where = f"{origin.source}: {section}"
        named = {
            "input_prefix": locations.input_prefix,
            "output_prefix": locations.output_prefix,
            "failure_prefix": locations.failure_prefix,
        }
        keys: dict[str, str] = {}
        buckets = set()
        for field, url in named.items():
            bucket, key = _split(url)
            if not url.startswith(_S3) or not bucket or not key or _dot_segment(key):
                raise ManifestError(
                    f"{field} {url!r} does not name a folder inside a bucket", where=where, fix=_FIX
                )
            keys[field] = key
            buckets.add(bucket)
        if len(buckets) != 1:
            raise ManifestError(
                f"names prefixes in several buckets ({', '.join(sorted(buckets))})",
                where=where,
                fix=_FIX,
            )
        bucket = buckets.pop()
        if origin.bucket is not None and bucket != origin.bucket:
            raise ManifestError(
                f"names bucket {bucket!r} ({named['input_prefix']}), but the manifest is in "
                f"bucket {origin.bucket!r}",
                where=where,
                fix=_FIX,
            )
        for field, key in keys.items():
            for other, other_key in keys.items():
                if other != field and other_key.startswith(key):
                    raise ManifestError(
                        f"{field} {named[field]} contains {other} {named[other]}",
                        where=where,
                        fix=_FIX,
                    )
            if origin.key is not None and origin.key.startswith(key):
                raise ManifestError(
                    f"{field} {named[field]} contains the manifest itself", where=where, fix=_FIX
                )
        return cls(
            section,
            bucket,
            keys["input_prefix"],
            keys["output_prefix"],
            keys["failure_prefix"],
            origin.owner,
        )

    def url(self, key: str) -> str:
        return f"{_S3}{self.bucket}/{key}"

    def output_key(self, location: Any, where: str) -> str:
        """The key of an answer's OutputLocation; refused outside the output prefix."""
        return self._key(location, self.output_prefix, "OutputLocation", where)

    def failure_key(self, location: Any, where: str) -> str:
        """The key of an answer's FailureLocation; refused outside the failure prefix."""
        return self._key(location, self.failure_prefix, "FailureLocation", where)

    def _key(self, location: Any, prefix: str, name: str, where: str) -> str:
        bucket, key = _split(location) if isinstance(location, str) else ("", "")
        inside = (
            isinstance(location, str)
            and location.startswith(_S3)
            and bucket == self.bucket
            and key.startswith(prefix)
            and len(key) > len(prefix)
            and not _dot_segment(key)
        )
        if not inside:
            raise ResponseFormatError(
                f"the endpoint answered {name} {location!r}, which is not under "
                f"{self.url(prefix)} ({self.section}): nothing was read or deleted",
                where=where,
                fix="check that the endpoint is the one the manifest describes",
            )
        return key

    def owner_args(self) -> dict[str, str]:
        """`ExpectedBucketOwner` for every S3 call, when the account is known."""
        return {"ExpectedBucketOwner": self.owner} if self.owner else {}
