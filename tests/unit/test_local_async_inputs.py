"""`deploy serve --async-input`: which s3:// prefixes an asynchronous endpoint reads."""

from __future__ import annotations

import pytest

from deploy.errors import ConfigError
from deploy.local.modes.async_invocations import input_prefix


@pytest.mark.parametrize(
    ("given", "allowed"),
    [
        ("s3://bucket/requests/", "s3://bucket/requests/"),
        ("s3://bucket/requests", "s3://bucket/requests/"),  # not `requests-old/`
        ("s3://bucket/", "s3://bucket/"),  # the whole bucket
        ("s3://bucket", "s3://bucket/"),
    ],
)
def test_a_prefix_ends_at_a_folder(given: str, allowed: str) -> None:
    assert input_prefix(given) == allowed


@pytest.mark.parametrize("given", ["bucket/requests/", "s3://", "s3:///x/", "s3://b/a/../c/"])
def test_what_is_not_a_prefix_is_refused(given: str) -> None:
    with pytest.raises(ConfigError, match="is not an s3://BUCKET/PREFIX/ URL"):
        input_prefix(given)
