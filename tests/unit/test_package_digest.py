"""Source digests and the stat cache: what changes a target_model name and what does not."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from deploy.packaging.digest import DigestCache, cached_contents, source_digest
from deploy.packaging.layout import Entry
from deploy.packaging.packager import target_name


def entry(arcname: str, mode: int = 0o644, kind: str = "file") -> Entry:
    return Entry(arcname=arcname, kind=kind, mode=mode, size=1, source=Path("/x") / arcname)


@given(st.binary(min_size=1, max_size=64), st.binary(min_size=1, max_size=64))
def test_digest_depends_on_content(a: bytes, b: bytes) -> None:
    members = [entry("m/1/model.py")]
    first = source_digest(members, {"m/1/model.py": a.hex()})
    second = source_digest(members, {"m/1/model.py": b.hex()})
    assert (first == second) == (a == b)


def test_digest_depends_on_path_and_mode_but_not_on_stat() -> None:
    content = {"m/1/model.py": "aa"}
    base = source_digest([entry("m/1/model.py")], content)
    assert source_digest([entry("m/1/model.py", mode=0o755)], content) != base
    assert source_digest([entry("n/1/model.py")], {"n/1/model.py": "aa"}) != base
    touched = Entry("m/1/model.py", "file", 0o644, 1, Path("/x"), None, (1, 2, 3, 4))
    assert source_digest([touched], content) == base


def test_target_name_uses_the_first_16_hex_digits() -> None:
    assert target_name("addsub", "0123456789abcdef" + "f" * 48) == "addsub-0123456789abcdef.tar.gz"


def test_cache_hits_only_on_identical_stat_keys(tmp_path: Path) -> None:
    cache = DigestCache(tmp_path / ".deploy-cache.json")
    hit = Entry("m/w", "file", 0o644, 3, tmp_path / "w", None, (1, 2, 3, 4))
    cache.remember_file(hit, "cafe")
    assert cached_contents([hit], cache) == {"m/w": "cafe"}
    moved = Entry("m/w", "file", 0o644, 3, tmp_path / "w", None, (1, 2, 3, 5))
    assert cached_contents([moved], cache) is None
    cache.save()
    reloaded = DigestCache.load(tmp_path)
    assert reloaded.file_sha(hit) == "cafe"


def test_unreadable_cache_is_ignored(tmp_path: Path) -> None:
    (tmp_path / ".deploy-cache.json").write_text("{not json")
    assert DigestCache.load(tmp_path).files == {}
