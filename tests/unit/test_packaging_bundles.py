"""Bundled BLS models: their digests, and the archives that cannot share an endpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.errors import PackagingError
from deploy.packaging.bundles import (
    BUNDLES_KEY,
    archive_bundles,
    bundle_conflicts,
    check_published_bundles,
    folder_bundles,
)


def caller_files(caller: str, preprocess: str = "one", config: str = "{}") -> dict[str, str]:
    """Archive members (arcname -> content hash) of a BLS caller bundling preprocess."""
    return {
        f"{caller}/config.pbtxt": f"config-of-{caller}",
        f"{caller}/1/model.py": f"code-of-{caller}",
        f"{caller}/deps/preprocess.json": config,
        f"{caller}/deps/preprocess/config.pbtxt": "preprocess-config",
        f"{caller}/deps/preprocess/1/model.py": preprocess,
    }


def test_a_bundle_digest_depends_on_its_contents_not_on_the_caller() -> None:
    a = archive_bundles(caller_files("caller_a"))
    c = archive_bundles(caller_files("caller_c"))
    assert set(a) == {"preprocess"} and a == c
    assert archive_bundles(caller_files("caller_a", preprocess="two")) != a
    assert archive_bundles(caller_files("caller_a", config='{"x": 1}')) != a
    # The caller's own files are not part of the bundle.
    changed = caller_files("caller_a") | {"caller_a/1/model.py": "other code"}
    assert archive_bundles(changed) == a


def test_nested_bundles_count_and_other_folders_are_no_bundles() -> None:
    files = caller_files("caller") | {
        "caller/deps/preprocess/deps/tokenizer.json": "{}",
        "caller/deps/preprocess/deps/tokenizer/config.pbtxt": "tokenizer-config",
        # A folder called deps in a model that is not a bundle: no .json beside it.
        "plain/config.pbtxt": "x",
        "plain/deps/weights/config.pbtxt": "y",
        # A .json with no model folder beside it.
        "caller/deps/notes.json": "{}",
    }
    assert set(archive_bundles(files)) == {"preprocess", "tokenizer"}
    # The nested bundle is part of the outer one's files too.
    assert (
        archive_bundles(files)["preprocess"]
        != archive_bundles(caller_files("caller"))["preprocess"]
    )


def test_an_extracted_folder_gives_the_digests_packaging_recorded(tmp_path: Path) -> None:
    from blake3 import blake3

    contents = {name: f"bytes of {name}".encode() for name in caller_files("caller_a")}
    for name, data in contents.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
        (tmp_path / name).chmod(0o600)  # modes are not part of the digest
    hashes = {name: blake3(data).hexdigest() for name, data in contents.items()}
    assert folder_bundles(tmp_path) == archive_bundles(hashes) != {}


def test_conflicts_name_both_archives_and_identical_copies_are_none() -> None:
    one = archive_bundles(caller_files("caller_a"))
    same = archive_bundles(caller_files("caller_c"))
    other = archive_bundles(caller_files("caller_b", preprocess="two"))
    assert bundle_conflicts({"a.tar.gz": one, "c.tar.gz": same, "plain.tar.gz": {}}) == []
    (conflict,) = bundle_conflicts({"a.tar.gz": one, "b.tar.gz": other, "c.tar.gz": same})
    assert (conflict.name, conflict.first, conflict.second) == (
        "preprocess",
        "a.tar.gz",
        "b.tar.gz",
    )
    assert "a.tar.gz" in conflict.message and "b.tar.gz" in conflict.message
    assert "'preprocess'" in conflict.message
    assert "another name" in conflict.fix and "identical copies" in conflict.fix


def test_one_archive_bundling_two_different_models_of_one_name_conflicts_with_itself() -> None:
    files = caller_files("caller") | {
        "caller/deps/x.json": "{}",
        "caller/deps/x/config.pbtxt": "x-config",
        "caller/deps/x/deps/preprocess.json": "{}",
        "caller/deps/x/deps/preprocess/config.pbtxt": "preprocess-config",
        "caller/deps/x/deps/preprocess/1/model.py": "another preprocess",
    }
    (conflict,) = bundle_conflicts({"caller.tar.gz": archive_bundles(files)})
    assert conflict.first == conflict.second == "caller.tar.gz"
    assert "bundles two different models called 'preprocess'" in conflict.message


def manifest(**archives: dict[str, str]) -> dict[str, object]:
    """A manifest naming each archive (target_model) with its bundles."""
    return {
        "format": 1,
        "models": {
            target.split("-")[0]: {"target_model": target, BUNDLES_KEY: bundles}
            for target, bundles in archives.items()
        },
    }


def test_publishing_a_bundle_that_differs_from_an_earlier_archives_is_refused() -> None:
    one = archive_bundles(caller_files("caller_a"))
    two = archive_bundles(caller_files("caller_a", preprocess="two"))
    published = manifest(**{"caller_a-old": one})
    with pytest.raises(PackagingError) as caught:
        check_published_bundles(manifest(**{"caller_a-new": two}), published)
    error = caught.value
    assert "caller_a-new" in error.message and "caller_a-old" in error.message
    assert "'preprocess'" in error.message and "Nothing was uploaded" in error.message
    assert error.fix and "another name" in error.fix and "deploy down" in error.fix
    # The same archive again, an identical copy, a first deploy, an earlier manifest
    # without bundles: nothing to refuse.
    check_published_bundles(published, published)
    check_published_bundles(manifest(**{"caller_c-new": one}), published)
    check_published_bundles(manifest(**{"caller_a-new": two}), None)
    check_published_bundles(manifest(**{"caller_a-new": two}), {"models": {"x": {}}})


def test_publishing_two_archives_whose_bundles_differ_is_refused() -> None:
    one = archive_bundles(caller_files("caller_a"))
    two = archive_bundles(caller_files("caller_b", preprocess="two"))
    with pytest.raises(PackagingError) as caught:
        check_published_bundles(manifest(**{"caller_a-1": one, "caller_b-1": two}), None)
    assert "caller_a-1" in caught.value.message and "caller_b-1" in caught.value.message


def test_every_earlier_archive_counts_not_only_the_first_of_a_name() -> None:
    one = archive_bundles(caller_files("caller_a"))
    two = archive_bundles(caller_files("caller_a", preprocess="two"))
    # An earlier archive with the new bundle sorts first; another holds the old one.
    published = manifest(**{"caller_a-0": two, "caller_z-0": one})
    with pytest.raises(PackagingError) as caught:
        check_published_bundles(manifest(**{"caller_a-1": two}), published)
    assert "caller_z-0" in caught.value.message
