"""The S3 prefixes a manifest may hand the SDK, and the answers it may accept.

Pure functions: routing a request to an asynchronous endpoint or an async
lane checks the manifest section's prefixes against where the manifest came
from; an answer's locations are checked against those prefixes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from deploy.client import Manifest, ManifestError, ResponseFormatError
from deploy.client._core import DEFAULT_MAX_PAYLOAD, prepare, route
from deploy.client._ownership import Origin, S3Scope, account_of

MODEL = {
    "name": "strings",
    "target_model": "strings-0123456789abcdef.tar.gz",
    "inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [-1]}],
    "outputs": [],
}
FROM_S3 = Origin("s3://store/models/manifest.json", "store", "models/manifest.json", "111122223333")


def prefixes(input_: str, output: str, failure: str) -> dict[str, str]:
    return {"input_prefix": input_, "output_prefix": output, "failure_prefix": failure}


GOOD = prefixes(
    "s3://store/async/ep/input/", "s3://store/async/ep/output/", "s3://store/async/ep/failure/"
)


def async_manifest(section: dict[str, str]) -> Manifest:
    document = {"format": 1, "hosting": "async", "models": {"strings": MODEL}}
    return Manifest.parse({**document, "async_inference": section}, FROM_S3.source)


@pytest.mark.parametrize(
    ("section", "origin", "message"),
    [
        (
            prefixes("s3://store/a/in/", "s3://other/a/out/", "s3://store/a/fail/"),
            Origin("manifest.json"),
            "names prefixes in several buckets (other, store)",
        ),
        (
            prefixes("s3://victim/a/in/", "s3://victim/a/out/", "s3://victim/a/fail/"),
            FROM_S3,
            "names bucket 'victim' (s3://victim/a/in/), but the manifest is in bucket 'store'",
        ),
        (
            prefixes("s3://store/a/in/", "s3://store/", "s3://store/a/fail/"),
            FROM_S3,
            "output_prefix 's3://store/' does not name a folder inside a bucket",
        ),
        (
            prefixes("s3://store/a/in/", "s3://store/a/../models/", "s3://store/a/fail/"),
            FROM_S3,
            "output_prefix 's3://store/a/../models/' does not name a folder",
        ),
        (
            prefixes("s3://store/a/in/", "s3://store/models/", "s3://store/a/fail/"),
            FROM_S3,
            "output_prefix s3://store/models/ contains the manifest itself",
        ),
        (
            prefixes("s3://store/a/", "s3://store/a/out/", "s3://store/a/fail/"),
            FROM_S3,
            "input_prefix s3://store/a/ contains output_prefix s3://store/a/out/",
        ),
    ],
    ids=["two-buckets", "not-the-manifests-bucket", "whole-bucket", "dot-dot", "covers", "nested"],
)
def test_prefixes_outside_the_manifests_own_are_refused(
    section: dict[str, str], origin: Origin, message: str
) -> None:
    with pytest.raises(ManifestError) as raised:
        route("strings", None, async_manifest(section), None, origin)
    assert message in str(raised.value)
    assert f"{origin.source}: async_inference" in str(raised.value)


def test_the_async_lane_is_checked_before_a_large_request_goes_to_it() -> None:
    lane = {"endpoint_name": "ep-async", **prefixes(*(f"s3://victim/{k}/" for k in "abc"))}
    document = {"format": 1, "models": {"strings": MODEL}, "async_lane": lane}
    manifest = Manifest.parse(document, FROM_S3.source)

    def send(size: int) -> Any:
        chosen = route("strings", None, manifest, None, FROM_S3)
        return prepare(
            chosen,
            {"TEXT": np.array([b"x" * size], dtype=object)},
            None,
            class_count=None,
            parameters=None,
            max_payload_bytes=None,
            endpoint="ep",
            manifest=manifest,
            origin=FROM_S3,
        )

    assert send(1024).route.asynchronous is None  # real time: the lane is not used
    with pytest.raises(ManifestError, match="async_lane: names bucket 'victim'"):
        send(DEFAULT_MAX_PAYLOAD)


def test_answers_are_taken_only_under_their_prefix() -> None:
    locations = async_manifest(GOOD).async_inference
    assert locations is not None
    scope = S3Scope.of(locations, FROM_S3, "async_inference")
    assert scope.owner_args() == {"ExpectedBucketOwner": "111122223333"}
    assert scope.output_key("s3://store/async/ep/output/1.out", "here") == "async/ep/output/1.out"
    assert scope.failure_key("s3://store/async/ep/failure/1-error.out", "here")
    refused = [
        "s3://victim/prod/important-model.tar.gz",
        "s3://store/async/ep/output/",  # the prefix itself
        "s3://store/async/ep/output/../../../models/model.tar.gz",
        "s3://store/async/ep/failure/1.out",  # the failure prefix is not the output's
        "https://store.s3.amazonaws.com/async/ep/output/1.out",
        None,
    ]
    for location in refused:
        with pytest.raises(ResponseFormatError, match="nothing was read or deleted") as raised:
            scope.output_key(location, "endpoint 'ep'")
        assert repr(location) in str(raised.value)


def test_the_account_comes_from_an_arn_only() -> None:
    assert account_of("arn:aws:sagemaker:eu-west-1:111122223333:endpoint/ep") == "111122223333"
    assert account_of("arn:aws:sagemaker:eu-west-1::endpoint/ep") is None
    assert account_of(None) is None
    locations = async_manifest(GOOD).async_inference
    assert locations is not None
    without = S3Scope.of(locations, Origin("m.json"), "async_inference")
    assert without.owner_args() == {}
