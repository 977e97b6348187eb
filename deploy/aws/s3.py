"""The model store in S3: checksummed, resumable, parallel uploads.

An archive becomes visible under its final key only when it is complete:
small files go up in one `PutObject`, larger ones through a multipart upload
that S3 assembles on `CompleteMultipartUpload`. Every part carries its
SHA-256 (S3 verifies it on arrival). An interrupted multipart upload stays
open; the next run lists its parts, keeps those whose checksum matches the
local bytes, and sends only the rest. The archive's own SHA-256 is stored as
object metadata (`sha256`) so later runs can skip unchanged archives.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deploy.aws.session import AwsCallError, AwsSession, aws_call
from deploy.errors import AwsError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

SHA256_METADATA = "sha256"
MIN_PART_SIZE = 5 * 1024 * 1024  # S3's lower bound for every part but the last
DEFAULT_PART_SIZE = 8 * 1024 * 1024

ProgressCallback = Callable[[int], None]

# What S3 answers a conditional write that lost: 412 PreconditionFailed (the ETag no
# longer matches, or the key exists under If-None-Match), 409 ConditionalRequestConflict
# (another conditional write to the key was in flight), and NoSuchKey under If-Match
# (the object was deleted since it was read).
CONDITION_FAILED_CODES = frozenset(
    {"PreconditionFailed", "412", "ConditionalRequestConflict", "409", "NoSuchKey", "404"}
)


class ConditionFailedError(AwsError):
    """A conditional write lost: the object is not the version it was read as."""


@dataclass(frozen=True)
class ReadObject:
    """An object's bytes and its ETag (what a conditional write names as If-Match)."""

    data: bytes
    etag: str


@dataclass(frozen=True)
class StoredObject:
    key: str
    size: int
    sha256: str | None
    last_modified: datetime | None


@dataclass(frozen=True)
class UploadResult:
    key: str
    parts_sent: int
    parts_reused: int
    bytes_sent: int
    resumed: bool


def b64_sha256(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")


class ModelStore:
    """One bucket of archives and manifests."""

    def __init__(self, session: AwsSession, bucket: str) -> None:
        self.bucket = bucket
        self._session = session

    @property
    def _s3(self) -> S3Client:
        client: S3Client = self._session.client("s3")
        return client

    def _where(self, key: str = "") -> str:
        return f"s3://{self.bucket}/{key}"

    def exists(self) -> bool:
        try:
            with aws_call("s3:HeadBucket", where=self._where()):
                self._s3.head_bucket(Bucket=self.bucket)
        except AwsCallError as exc:
            if exc.code in {"404", "NoSuchBucket", "NotFound"}:
                return False
            raise
        return True

    def head(self, key: str) -> StoredObject | None:
        try:
            with aws_call("s3:HeadObject", where=self._where(key)):
                response = self._s3.head_object(Bucket=self.bucket, Key=key)
        except AwsCallError as exc:
            if exc.code in {"404", "NoSuchKey", "NotFound"}:
                return None
            raise
        return StoredObject(
            key=key,
            size=int(response["ContentLength"]),
            sha256=response.get("Metadata", {}).get(SHA256_METADATA),
            last_modified=response.get("LastModified"),
        )

    def objects(self, prefix: str = "") -> list[StoredObject]:
        objects: list[StoredObject] = []
        with aws_call("s3:ListObjectsV2", where=self._where(prefix)):
            paginator = self._s3.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    objects.append(
                        StoredObject(
                            key=item["Key"],
                            size=int(item["Size"]),
                            sha256=None,
                            last_modified=item.get("LastModified"),
                        )
                    )
        return objects

    def get_bytes(self, key: str) -> bytes | None:
        try:
            with aws_call("s3:GetObject", where=self._where(key)):
                body = self._s3.get_object(Bucket=self.bucket, Key=key)["Body"]
                return body.read()
        except AwsCallError as exc:
            if exc.code in {"404", "NoSuchKey", "NotFound"}:
                return None
            raise

    def read(self, key: str) -> ReadObject | None:
        """The object's bytes with its ETag (None: absent), for a conditional rewrite."""
        try:
            with aws_call("s3:GetObject", where=self._where(key)):
                response = self._s3.get_object(Bucket=self.bucket, Key=key)
                return ReadObject(response["Body"].read(), str(response["ETag"]))
        except AwsCallError as exc:
            if exc.code in {"404", "NoSuchKey", "NotFound"}:
                return None
            raise

    def put_bytes(
        self,
        key: str,
        data: bytes,
        *,
        content_type: str,
        if_match: str | None = None,
        if_none_match: bool = False,
    ) -> str:
        """Write a small object in one request (atomic: old or new, never partial);
        returns its ETag.

        `if_match` (an ETag read) replaces the object only if it is still that version;
        `if_none_match` creates it only if the key is free. A write that loses raises
        `ConditionFailedError` and changes nothing.
        """
        digest = hashlib.sha256(data).hexdigest()
        conditions: dict[str, str] = {}
        if if_match is not None:
            conditions["IfMatch"] = if_match
        if if_none_match:
            conditions["IfNoneMatch"] = "*"
        try:
            with aws_call("s3:PutObject", where=self._where(key)):
                response = self._s3.put_object(
                    Bucket=self.bucket,
                    Key=key,
                    Body=data,
                    ContentType=content_type,
                    ChecksumSHA256=b64_sha256(data),
                    Metadata={SHA256_METADATA: digest},
                    **conditions,  # type: ignore[arg-type]
                )
        except AwsCallError as exc:
            if conditions and exc.code in CONDITION_FAILED_CODES:
                raise ConditionFailedError(
                    f"{exc.code}: the object is not the version this write was based on",
                    where=self._where(key),
                    fix="read it again and re-run",
                ) from exc
            raise
        return str(response.get("ETag", ""))

    def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            batch = keys[start : start + 1000]
            with aws_call("s3:DeleteObjects", where=self._where()):
                response = self._s3.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": key} for key in batch], "Quiet": True},
                )
            errors = response.get("Errors", [])
            if errors:
                first = errors[0]
                raise AwsError(
                    f"could not delete {len(errors)} object(s): {first.get('Message')}",
                    where=self._where(str(first.get("Key", ""))),
                    fix="check the bucket policy and re-run",
                )

    def purge(self) -> int:
        """Delete every object version, delete marker and open upload, then the
        bucket itself; returns the number of versions deleted."""
        for key, upload_id in self.open_uploads():
            self.abort_upload(key, upload_id)
        versions: list[dict[str, str]] = []
        with aws_call("s3:ListObjectVersions", where=self._where()):
            paginator = self._s3.get_paginator("list_object_versions")
            for page in paginator.paginate(Bucket=self.bucket):
                for item in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]:
                    versions.append({"Key": item["Key"], "VersionId": item["VersionId"]})
        for start in range(0, len(versions), 1000):
            with aws_call("s3:DeleteObjects", where=self._where()):
                self._s3.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": versions[start : start + 1000], "Quiet": True},  # type: ignore[typeddict-item]
                )
        with aws_call("s3:DeleteBucket", where=self._where()):
            self._s3.delete_bucket(Bucket=self.bucket)
        return len(versions)

    def open_uploads(self, key: str | None = None) -> list[tuple[str, str]]:
        """(key, upload id) of multipart uploads not yet completed, oldest first."""
        found: list[tuple[datetime | None, str, str]] = []
        with aws_call("s3:ListMultipartUploads", where=self._where(key or "")):
            paginator = self._s3.get_paginator("list_multipart_uploads")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=key or ""):
                for upload in page.get("Uploads", []):
                    if key is None or upload["Key"] == key:
                        found.append((upload.get("Initiated"), upload["Key"], upload["UploadId"]))
        found.sort(key=lambda item: item[0] or datetime.min)
        return [(item[1], item[2]) for item in found]

    def abort_upload(self, key: str, upload_id: str) -> None:
        with aws_call("s3:AbortMultipartUpload", where=self._where(key)):
            self._s3.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)

    def upload_file(
        self,
        key: str,
        path: Path,
        sha256: str,
        *,
        part_size: int = DEFAULT_PART_SIZE,
        workers: int = 4,
        progress: ProgressCallback | None = None,
        before_part: Callable[[int], None] | None = None,
    ) -> UploadResult:
        """Upload `path` to `key`; visible only once complete. Resumes open uploads.

        `before_part(part_number)` runs before each part is sent (progress
        hooks and interruption tests use it).
        """
        if part_size < MIN_PART_SIZE:
            raise AwsError(
                f"part size {part_size} is below S3's minimum of {MIN_PART_SIZE} bytes",
                where="upload part size",
                fix="use a part size of at least 5 MiB",
            )
        size = path.stat().st_size
        report = progress or (lambda _n: None)
        if size <= part_size:
            data = path.read_bytes()
            if before_part:
                before_part(1)
            with aws_call("s3:PutObject", where=self._where(key)):
                self._s3.put_object(
                    Bucket=self.bucket,
                    Key=key,
                    Body=data,
                    ContentType="application/gzip",
                    ChecksumSHA256=b64_sha256(data),
                    Metadata={SHA256_METADATA: sha256},
                )
            report(size)
            return UploadResult(key, parts_sent=1, parts_reused=0, bytes_sent=size, resumed=False)
        return self._multipart(key, path, sha256, size, part_size, workers, report, before_part)

    def _multipart(
        self,
        key: str,
        path: Path,
        sha256: str,
        size: int,
        part_size: int,
        workers: int,
        report: ProgressCallback,
        before_part: Callable[[int], None] | None,
    ) -> UploadResult:
        count = (size + part_size - 1) // part_size
        upload_id, done = self._resumable(key, path, part_size, count)
        resumed = bool(done)
        for number in done:
            report(min(part_size, size - (number - 1) * part_size))
        todo = [number for number in range(1, count + 1) if number not in done]
        if upload_id is None:
            with aws_call("s3:CreateMultipartUpload", where=self._where(key)):
                upload_id = self._s3.create_multipart_upload(
                    Bucket=self.bucket,
                    Key=key,
                    ContentType="application/gzip",
                    ChecksumAlgorithm="SHA256",
                    Metadata={SHA256_METADATA: sha256},
                )["UploadId"]

        stop = threading.Event()

        def send(number: int) -> tuple[int, str, str, int] | None:
            if stop.is_set():
                return None  # another part failed: leave the rest for the resumed run
            try:
                return send_part(number)
            except BaseException:
                stop.set()
                raise

        def send_part(number: int) -> tuple[int, str, str, int]:
            if before_part:
                before_part(number)
            chunk = _read_part(path, number, part_size)
            checksum = b64_sha256(chunk)  # in the worker: hashing runs beside other parts' I/O
            with aws_call("s3:UploadPart", where=f"{self._where(key)} part {number}"):
                etag = self._s3.upload_part(
                    Bucket=self.bucket,
                    Key=key,
                    UploadId=str(upload_id),
                    PartNumber=number,
                    Body=chunk,
                    ChecksumAlgorithm="SHA256",
                    ChecksumSHA256=checksum,
                )["ETag"]
            report(len(chunk))
            return number, etag, checksum, len(chunk)

        sent: dict[int, tuple[str, str, int]] = {}
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            futures = [pool.submit(send, number) for number in todo]
            finished, pending = wait(futures, return_when=FIRST_EXCEPTION)
            for future in pending:
                future.cancel()
            for future in finished:
                error = future.exception()
                if error is not None:
                    # The upload stays open; the next run resumes it.
                    raise error
                outcome = future.result()
                if outcome is not None:
                    number, etag, checksum, length = outcome
                    sent[number] = (etag, checksum, length)
        parts: list[dict[str, Any]] = []
        for number in range(1, count + 1):
            etag, checksum = sent[number][:2] if number in sent else done[number]
            parts.append({"PartNumber": number, "ETag": etag, "ChecksumSHA256": checksum})
        with aws_call("s3:CompleteMultipartUpload", where=self._where(key)):
            self._s3.complete_multipart_upload(
                Bucket=self.bucket,
                Key=key,
                UploadId=str(upload_id),
                MultipartUpload={"Parts": parts},  # type: ignore[typeddict-item]
            )
        return UploadResult(
            key,
            parts_sent=len(sent),
            parts_reused=len(done),
            bytes_sent=sum(item[2] for item in sent.values()),
            resumed=resumed,
        )

    def _resumable(
        self, key: str, path: Path, part_size: int, count: int
    ) -> tuple[str | None, dict[int, tuple[str, str]]]:
        """An open upload of the same bytes: its id and {part number: ETag} to keep.

        An open upload whose parts disagree with the local bytes is aborted.
        """
        chosen: tuple[str | None, dict[int, tuple[str, str]]] = (None, {})
        for _key, upload_id in reversed(self.open_uploads(key)):
            if chosen[0] is not None:
                self.abort_upload(key, upload_id)
                continue
            done: dict[int, tuple[str, str]] = {}
            consistent = True
            with aws_call("s3:ListParts", where=self._where(key)):
                paginator = self._s3.get_paginator("list_parts")
                for page in paginator.paginate(Bucket=self.bucket, Key=key, UploadId=upload_id):
                    for part in page.get("Parts", []):
                        number = int(part["PartNumber"])
                        local = (
                            _part_checksums(path, number, part_size) if number <= count else None
                        )
                        if local is not None and _same_part(part, local):
                            done[number] = (str(part["ETag"]), local[0])
                        else:
                            consistent = False
            if consistent:
                chosen = (upload_id, done)
            else:
                self.abort_upload(key, upload_id)
        return chosen


def _read_part(path: Path, number: int, part_size: int) -> bytes:
    with path.open("rb") as handle:
        handle.seek((number - 1) * part_size)
        return handle.read(part_size)


def _part_checksums(path: Path, number: int, part_size: int) -> tuple[str, str]:
    """(base64 SHA-256, hex MD5) of one part of the local file."""
    chunk = _read_part(path, number, part_size)
    return b64_sha256(chunk), hashlib.md5(chunk, usedforsecurity=False).hexdigest()


def _same_part(part: Any, local: tuple[str, str]) -> bool:
    """A stored part holds the local bytes: by its SHA-256 when S3 lists it,
    else by its ETag (the part's MD5 for non-KMS objects; emulators list no checksums)."""
    sha, md5 = local
    checksum = part.get("ChecksumSHA256")
    if checksum:
        return bool(checksum == sha)
    return bool(str(part.get("ETag", "")).strip('"') == md5)
