"""Safe extraction: refused archives leave nothing behind, inside or outside."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from deploy.errors import LocalEndpointError
from deploy.local.models.archive import extract_archive
from tests.functional.local_models import add_file, addsub_files, write_archive


def build(path: Path, members: list[tuple[str, dict[str, object], bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, fields, data in members:
            add_file(tar, name, data, **fields)
    return path


GOOD = ("m/config.pbtxt", {}, b'name: "m"')


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        (("/tmp/absolute.txt", {}, b"x"), "absolute"),
        (("m/../../escape.txt", {}, b"x"), "outside"),
        (("m/link", {"type": tarfile.SYMTYPE, "linkname": "/etc/passwd"}, b""), "link"),
        (("m/up", {"type": tarfile.SYMTYPE, "linkname": "../../.."}, b""), "outside"),
        (("m/hard", {"type": tarfile.LNKTYPE, "linkname": "../outside"}, b""), "outside"),
        (("m/dev", {"type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 3}, b""), "special"),
    ],
)
def test_unsafe_members_are_refused(
    tmp_path: Path, member: tuple[str, dict[str, object], bytes], reason: str
) -> None:
    archive = build(tmp_path / "bad.tar.gz", [GOOD, member])
    root = tmp_path / "work"
    with pytest.raises(LocalEndpointError, match="refused") as caught:
        extract_archive(archive, root / "hash" / "model", name="bad.tar.gz")
    assert "bad.tar.gz" in str(caught.value)
    assert reason in str(caught.value).lower() or member[0] in str(caught.value)
    # Nothing written: not the model folder, no staging left, nothing outside.
    assert not (root / "hash" / "model").exists()
    assert list((root / "hash").iterdir()) == []
    assert not (tmp_path / "escape.txt").exists()
    assert not (tmp_path / "outside").exists()


def test_size_limit(tmp_path: Path) -> None:
    archive = build(tmp_path / "big.tar.gz", [GOOD, ("m/weights", {}, b"\0" * 4096)])
    with pytest.raises(LocalEndpointError, match="more than 1000 bytes"):
        extract_archive(archive, tmp_path / "h" / "model", max_bytes=1000)
    assert list((tmp_path / "h").iterdir()) == []


def test_sha256_mismatch_leaves_nothing(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar.gz"
    write_archive(archive, addsub_files("a"))
    with pytest.raises(LocalEndpointError, match="does not match the manifest"):
        extract_archive(archive, tmp_path / "h" / "model", expected_sha256="0" * 64)
    # Checked before extraction starts: not even the staging folder was made.
    assert not (tmp_path / "h").exists()


def test_good_archive_extracts_and_verifies(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar.gz"
    sha = write_archive(archive, addsub_files("a"))
    size = extract_archive(archive, tmp_path / "h" / "model", expected_sha256=sha)
    model = tmp_path / "h" / "model" / "a"
    assert (model / "config.pbtxt").is_file() and (model / "1" / "model.py").is_file()
    assert size == sum(len(v) for v in addsub_files("a").values())
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == sha


def test_not_an_archive(tmp_path: Path) -> None:
    archive = tmp_path / "junk.tar.gz"
    archive.write_bytes(io.BytesIO(b"not gzip at all").read())
    with pytest.raises(LocalEndpointError, match="cannot be read"):
        extract_archive(archive, tmp_path / "h" / "model")
    assert list((tmp_path / "h").iterdir()) == []
