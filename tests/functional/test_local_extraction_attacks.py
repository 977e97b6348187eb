"""Hostile archives against the local endpoint's extraction: nothing is written outside.

GIVEN archives built to escape the extraction folder, exhaust the disk or
slip past the digest check
WHEN `deploy.local.models.archive.extract_archive` (what the endpoint runs on a
first invocation) extracts them
THEN each is refused with a message naming the member, and no file appears
outside the folder, whether or not the archive's sha256 matches.
"""

from __future__ import annotations

import hashlib
import io
import os
import posixpath
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from deploy.errors import LocalEndpointError
from deploy.local.models.archive import extract_archive
from tests.functional.local_models import addsub_files, write_archive

GOOD = addsub_files("m")


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> str:
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _dir(name: str) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, 0o777
    return info, None


def _link(name: str, target: str, *, hard: bool = False) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    info.linkname = target
    return info, None


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _realpath_limit_layout(staging_len: int) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    """The CVE-2025-4517 layout (as CPython's test_tarfile `test_realpath_limit_attack`
    builds it): a chain of links whose expansion passes PATH_MAX, so
    `os.path.realpath` stops resolving and tarfile's `data` filter sees a path
    inside the folder while the kernel follows the links outside it."""
    steps = "abcdefghijklmnop"
    component = "d" * ((os.pathconf("/", "PC_PATH_MAX") - staging_len - 1) // (len(steps) + 1))
    members: list[tuple[tarfile.TarInfo, bytes | None]] = []
    path = ""
    for step in steps:
        members.append(_dir(posixpath.join(path, component)))
        members.append(_link(posixpath.join(path, step), component))
        path = posixpath.join(path, component)
    long_link = posixpath.join(*steps, "l" * 254)
    members.append(_link(long_link, posixpath.join(*[".."] * len(steps))))
    members.append(_link("escape", posixpath.join(long_link, "..")))
    members.append(_link("flaglink", posixpath.join("escape", "flag"), hard=True))
    members.append(_file("flaglink", b"overwritten"))
    members.append(_file("escape/newfile", b"written outside"))
    return members


@pytest.mark.parametrize("digest", ["matching", "tampered"])
def test_realpath_limit_symlink_chain_writes_nothing_outside(tmp_path: Path, digest: str) -> None:
    # GIVEN the extraction folder's parent holds a file the archive aims at
    parent = tmp_path / "work" / "hash"
    parent.mkdir(parents=True)
    flag = parent / "flag"
    flag.write_text("original")
    # Staging is `<parent>/.model.XXXXXXXX` (tempfile.mkdtemp's 8 characters).
    staging_len = len(str(parent / ".model.")) + 8
    archive = tmp_path / "cve.tar.gz"
    sha = _tar(archive, _realpath_limit_layout(staging_len))
    expected = sha if digest == "matching" else "0" * 64

    # WHEN it is extracted
    with pytest.raises(LocalEndpointError) as caught:
        extract_archive(archive, parent / "model", expected_sha256=expected, name="cve.tar.gz")

    # THEN it is refused (a link, or the digest) and nothing exists outside
    message = str(caught.value)
    assert "cve.tar.gz" in message
    if digest == "matching":
        assert "symbolic link" in message and "not allowed" in message
    else:
        assert "does not match the manifest" in message
    assert flag.read_text() == "original"
    assert sorted(p.name for p in parent.iterdir()) == ["flag"]
    assert not list(tmp_path.rglob("newfile"))


@pytest.mark.parametrize(
    ("member", "kind"),
    [
        (_link("m/1/helper.py", "model.py"), "symbolic link"),  # inside: tarfile's filter allows it
        (_link("m/1/copy.py", "m/1/model.py", hard=True), "hard link"),
        (_link("m/up", ".."), "symbolic link"),
    ],
)
def test_links_are_refused_even_when_they_stay_inside(
    tmp_path: Path, member: tuple[tarfile.TarInfo, None], kind: str
) -> None:
    members = [_file(name, data) for name, data in GOOD.items()]
    archive = tmp_path / "links.tar.gz"
    sha = _tar(archive, [*members, member])
    with pytest.raises(LocalEndpointError, match=f"it is a {kind}") as caught:
        extract_archive(archive, tmp_path / "h" / "model", expected_sha256=sha)
    assert member[0].name in str(caught.value)
    assert list((tmp_path / "h").iterdir()) == []


def test_member_count_limit(tmp_path: Path) -> None:
    archive = tmp_path / "many.tar.gz"
    _tar(archive, [_file(f"m/{i}.txt", b"") for i in range(50)])
    with pytest.raises(LocalEndpointError, match="more than 20 members"):
        extract_archive(archive, tmp_path / "h" / "model", max_members=20)
    assert list((tmp_path / "h").iterdir()) == []


def test_size_limit_stops_before_the_disk_fills(tmp_path: Path) -> None:
    # GIVEN a 1 MB file system and a 64 MB file that compresses to almost nothing
    archive = tmp_path / "bomb.tar.gz"
    _tar(archive, [_file("m/config.pbtxt", b'name: "m"'), _file("m/1/zeros", b"\0" * (64 << 20))])
    # WHEN the limit is below the free space THEN the limit stops it, not the disk
    output = _extract_on_small_disk(tmp_path, archive, max_bytes=256 * 1024)
    assert "more than 262144 bytes" in output, output
    assert "disk full" not in output


def test_disk_full_says_disk_full(tmp_path: Path) -> None:
    archive = tmp_path / "big.tar.gz"
    _tar(archive, [_file("m/config.pbtxt", b'name: "m"'), _file("m/1/zeros", b"\0" * (8 << 20))])
    output = _extract_on_small_disk(tmp_path, archive, max_bytes=1 << 30)
    assert "disk full while extracting 'm/1/zeros'" in output, output
    assert "free space" in output
    assert "LEFT []" in output  # the partial extraction was removed


def _extract_on_small_disk(tmp_path: Path, archive: Path, *, max_bytes: int) -> str:
    """Run extract_archive onto a 1 MB tmpfs (a private mount namespace: no root needed)."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) for a private 1 MB tmpfs")
    disk = tmp_path / "disk"
    disk.mkdir()
    script = textwrap.dedent(
        f"""
        import os, sys
        from pathlib import Path
        from deploy.local.models.archive import extract_archive
        from deploy.errors import LocalEndpointError
        try:
            extract_archive(Path({str(archive)!r}), Path({str(disk)!r}) / "h" / "model",
                            max_bytes={max_bytes})
        except LocalEndpointError as exc:
            print("ERROR", exc)
        print("LEFT", sorted(os.listdir({str(disk)!r} + "/h")))
        """
    )
    command = f'mount -t tmpfs -o size=1m tmpfs {disk} && exec {sys.executable} -c "$SCRIPT"'
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"unprivileged mount namespaces are not available: {probe.stderr!r}")
    result = subprocess.run(
        ["unshare", "-rm", "sh", "-c", command],
        env={**os.environ, "SCRIPT": script},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_good_archive_still_extracts(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar.gz"
    sha = write_archive(archive, GOOD)
    size = extract_archive(archive, tmp_path / "h" / "model", expected_sha256=sha)
    assert size == sum(len(v) for v in GOOD.values())
    assert (tmp_path / "h" / "model" / "m" / "1" / "model.py").read_bytes() == GOOD["m/1/model.py"]
