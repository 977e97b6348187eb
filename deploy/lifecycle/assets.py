"""File assets of a synthesized stack (e.g. a Lambda's code), published as `cdk deploy` would.

The CDK writes `<stack>.assets.json` next to each template: for every file
asset, its source in the cloud assembly and the bootstrap bucket and key it
must be uploaded to. Templates are passed to CloudFormation directly, so the
stacks' own template assets are skipped. Container image assets need Docker
and the CDK CLI; a stack with any is refused with that advice.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

from deploy.aws.s3 import ModelStore
from deploy.errors import ConfigError

_FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # zip entries carry no build time: same bytes each run


def zip_directory(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                info = zipfile.ZipInfo(path.relative_to(folder).as_posix(), _FIXED_TIME)
                info.external_attr = (path.stat().st_mode & 0o777) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


def container_image_stacks(assembly: Path, stacks: list[str]) -> list[str]:
    """The stacks of `stacks` with container image assets (they need Docker and the CDK CLI)."""
    found = []
    for stack in stacks:
        manifest = assembly / f"{stack}.assets.json"
        if manifest.is_file() and json.loads(manifest.read_text(encoding="utf-8")).get(
            "dockerImages"
        ):
            found.append(stack)
    return found


def publish_file_assets(
    assembly: Path,
    stack: str,
    *,
    account: str,
    region: str,
    store: Callable[[str], ModelStore],
) -> list[str]:
    """Upload the stack's file assets that are not in their bucket yet; returns the keys sent."""
    manifest = assembly / f"{stack}.assets.json"
    if not manifest.is_file():
        return []
    document = json.loads(manifest.read_text(encoding="utf-8"))
    if document.get("dockerImages"):
        raise ConfigError(
            f"stack {stack} has container image assets, which need Docker to build",
            where=str(manifest),
            fix=f"deploy this stack with `deploy cdk deploy {stack}`",
        )
    sent: list[str] = []
    for asset in document.get("files", {}).values():
        source = asset["source"]
        if source.get("packaging") == "file" and source["path"].endswith(".template.json"):
            continue  # the template itself goes to CloudFormation as TemplateBody
        path = assembly / source["path"]
        for destination in asset["destinations"].values():
            bucket = _substitute(destination["bucketName"], account, region)
            key = _substitute(destination["objectKey"], account, region)
            bucket_store = store(bucket)
            if bucket_store.head(key) is not None:
                continue  # content-addressed key: already published
            data = zip_directory(path) if source.get("packaging") == "zip" else path.read_bytes()
            bucket_store.put_bytes(key, data, content_type="application/octet-stream")
            sent.append(f"s3://{bucket}/{key}")
    return sent


def _substitute(text: str, account: str, region: str) -> str:
    return (
        text.replace("${AWS::AccountId}", account)
        .replace("${AWS::Region}", region)
        .replace("${AWS::Partition}", "aws")
    )
