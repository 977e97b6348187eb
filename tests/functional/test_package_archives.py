"""`deploy package`: deterministic, round-tripping, incremental, atomic and safe archives."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.errors import PackagingError
from deploy.packaging import package_repository, read_manifest
from deploy.packaging.archive import BLOCK_SIZE, write_archive
from deploy.packaging.layout import Entry

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "model_packages" / "examples"

ADDSUB_CONFIG = """
name: "m"
backend: "python"
max_batch_size: 4
input [ { name: "X", data_type: TYPE_FP32, dims: [ 2 ] } ]
output [ { name: "Y", data_type: TYPE_FP32, dims: [ 2 ] } ]
"""


def make_repo(root: Path, weights: bytes = b"\x00" * 1000) -> Path:
    model = root / "m"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(ADDSUB_CONFIG)
    (model / "1" / "model.py").write_text("# model\n")
    (model / "1" / "weights.bin").write_bytes(weights)
    (model / "1" / "run.sh").write_text("#!/bin/sh\n")
    (model / "1" / "run.sh").chmod(0o750)
    return root


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def source_tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def test_two_runs_write_byte_identical_archives(tmp_path: Path) -> None:
    first = package_repository(EXAMPLES, tmp_path / "a")
    second = package_repository(EXAMPLES, tmp_path / "b")
    assert first.manifest == second.manifest
    for entry in first.manifest.models.values():
        a, b = tmp_path / "a" / entry.target_model, tmp_path / "b" / entry.target_model
        assert a.read_bytes() == b.read_bytes()
        assert sha(a) == entry.sha256
        assert a.stat().st_size == entry.bytes
        assert entry.target_model == f"{entry.name}-{entry.source_digest[:16]}.tar.gz"


def test_archive_members_are_normalised(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    result = package_repository(repo, tmp_path / "out")
    archive = result.models[0].path
    raw = archive.read_bytes()
    assert raw[:2] == b"\x1f\x8b" and raw[4:8] == b"\0\0\0\0"  # gzip magic, mtime 0
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == [
        "m",
        "m/1",
        "m/1/model.py",
        "m/1/run.sh",
        "m/1/weights.bin",
        "m/config.pbtxt",
    ]
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, 0, "", "")}
    modes = {m.name: m.mode for m in members}
    assert modes["m/1"] == 0o755 and modes["m/config.pbtxt"] == 0o644
    assert modes["m/1/run.sh"] == 0o755
    assert all(not m.pax_headers for m in members)


def test_round_trip_with_tarfile_and_gnu_tar(tmp_path: Path) -> None:
    result = package_repository(EXAMPLES, tmp_path / "out")
    entry = result.manifest.models["image_pipeline"]
    assert entry.contains == ("classifier", "image_pipeline", "preprocess")
    extracted = tmp_path / "gnu"
    extracted.mkdir()
    subprocess.run(
        ["tar", "-xzf", str(tmp_path / "out" / entry.target_model), "-C", str(extracted)],
        check=True,
    )
    for name in entry.contains:
        assert source_tree(extracted / name) == source_tree(EXAMPLES / name)
    with tarfile.open(tmp_path / "out" / result.manifest.models["addsub"].target_model) as tar:
        tar.extractall(tmp_path / "py", filter="data")
    assert source_tree(tmp_path / "py" / "addsub") == source_tree(EXAMPLES / "addsub")


def test_bls_archive_bundles_its_dependency_with_a_json_config(tmp_path: Path) -> None:
    result = package_repository(EXAMPLES, tmp_path / "out")
    entry = result.manifest.models["bls_addsub"]
    assert (entry.kind, entry.contains) == ("bls", ("addsub", "bls_addsub"))
    with tarfile.open(tmp_path / "out" / entry.target_model) as tar:
        names = tar.getnames()
        config = json.loads(tar.extractfile("bls_addsub/deps/addsub.json").read())  # type: ignore[union-attr]
    assert "bls_addsub/deps/addsub/1/model.py" in names
    assert {n.split("/")[0] for n in names} == {"bls_addsub"}  # one folder at the root
    assert config["name"] == "addsub" and config["backend"] == "python"
    assert [i["name"] for i in config["input"]] == ["INPUT0", "INPUT1"]


def test_manifest_lists_models_with_v2_signatures(tmp_path: Path) -> None:
    package_repository(EXAMPLES, tmp_path / "out")
    manifest = read_manifest(tmp_path / "out")
    document = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (document["format"], document["hosting"]) == (1, "multi-model")
    strings = manifest.models["strings"]
    assert [(t.name, t.datatype, t.shape) for t in strings.outputs] == [
        ("UPPER", "BYTES", (-1,)),
        ("LENGTHS", "INT32", (-1,)),
    ]
    assert manifest.models["classifier"].backend == "pytorch"
    assert read_manifest(tmp_path / "out" / "manifest.json") == manifest


def test_manifest_marks_optional_inputs_and_only_those(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    config = repo / "m" / "config.pbtxt"
    config.write_text(
        config.read_text().replace(
            "dims: [ 2 ] } ]\noutput",
            'dims: [ 2 ] },\n  { name: "MASK", data_type: TYPE_BOOL, dims: [ 2 ], '
            "optional: true } ]\noutput",
        )
    )
    package_repository(repo, tmp_path / "out")
    document = json.loads((tmp_path / "out" / "manifest.json").read_text())
    # Written only where true: manifests of models without optional inputs are unchanged.
    assert document["models"]["m"]["inputs"] == [
        {"name": "X", "datatype": "FP32", "shape": [2]},
        {"name": "MASK", "datatype": "BOOL", "shape": [2], "optional": True},
    ]
    # A model with an optional input may leave out the outputs computed from it.
    assert document["models"]["m"]["outputs"] == [
        {"name": "Y", "datatype": "FP32", "shape": [2], "optional": True}
    ]
    manifest = read_manifest(tmp_path / "out")
    assert [t.optional for t in manifest.models["m"].inputs] == [False, True]
    plain = make_repo(tmp_path / "plain")
    package_repository(plain, tmp_path / "plain-out")
    unchanged = json.loads((tmp_path / "plain-out" / "manifest.json").read_text())
    assert "optional" not in json.dumps(unchanged["models"]["m"])


def test_no_op_rerun_reuses_every_archive_without_rewriting(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    first = package_repository(repo, tmp_path / "out")
    archive = first.models[0].path
    before = archive.stat().st_mtime_ns
    second = package_repository(repo, tmp_path / "out")
    assert [m.reused for m in second.models] == [True]
    assert second.manifest == first.manifest
    assert archive.stat().st_mtime_ns == before


def test_touched_but_unchanged_content_keeps_the_target_model(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    first = package_repository(repo, tmp_path / "out")
    weights = repo / "m" / "1" / "weights.bin"
    os.utime(weights, ns=(time.time_ns(), time.time_ns() + 10**9))
    second = package_repository(repo, tmp_path / "out")
    assert second.manifest.models["m"].target_model == first.manifest.models["m"].target_model
    assert second.manifest.models["m"].sha256 == first.manifest.models["m"].sha256


def test_changed_content_gets_a_new_target_model_and_the_old_archive_goes(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    old = package_repository(repo, tmp_path / "out").manifest.models["m"]
    (repo / "m" / "1" / "weights.bin").write_bytes(b"\x01" * 1000)
    result = package_repository(repo, tmp_path / "out")
    new = result.manifest.models["m"]
    assert new.target_model != old.target_model
    assert [m.reused for m in result.models] == [False]
    assert result.removed == [old.target_model]
    assert sorted(p.name for p in (tmp_path / "out").glob("*.tar.gz")) == [new.target_model]


def test_removed_model_drops_out_of_the_manifest_and_the_store(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "n").mkdir()
    (repo / "n" / "config.pbtxt").write_text(ADDSUB_CONFIG.replace('name: "m"', 'name: "n"'))
    (repo / "n" / "1").mkdir()
    (repo / "n" / "1" / "model.py").write_text("#\n")
    first = package_repository(repo, tmp_path / "out")
    gone = first.manifest.models["n"].target_model
    (repo / "n" / "config.pbtxt").unlink()
    (repo / "n" / "1" / "model.py").unlink()
    (repo / "n" / "1").rmdir()
    (repo / "n").rmdir()
    second = package_repository(repo, tmp_path / "out")
    assert list(second.manifest.models) == ["m"]
    assert second.removed == [gone]
    assert not (tmp_path / "out" / gone).exists()


def test_leftovers_are_not_packaged(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "m" / "1" / "__pycache__").mkdir()
    (repo / "m" / "1" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"x")
    (repo / "m" / ".DS_Store").write_bytes(b"x")
    (repo / "m" / ".ipynb_checkpoints").mkdir()
    (repo / "m" / "1" / "old.pyc").write_bytes(b"x")
    result = package_repository(repo, tmp_path / "out")
    with tarfile.open(result.models[0].path) as tar:
        names = tar.getnames()
    assert not [n for n in names if "pycache" in n or "DS_Store" in n or "ipynb" in n]
    assert not [n for n in names if n.endswith(".pyc")]


def test_symlink_leaving_the_repository_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "secret").write_text("x")
    link = repo / "m" / "1" / "escape.bin"
    link.symlink_to(tmp_path / "secret")
    with pytest.raises(PackagingError) as info:
        package_repository(repo, tmp_path / "out")
    assert info.value.where == str(link)
    assert "symlink leaves the repository" in info.value.message
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_symlink_inside_the_repository_is_stored_as_its_content(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "m" / "1" / "alias.bin").symlink_to(repo / "m" / "1" / "weights.bin")
    result = package_repository(repo, tmp_path / "out")
    with tarfile.open(result.models[0].path) as tar:
        alias = tar.getmember("m/1/alias.bin")
        assert alias.isfile() and tar.extractfile(alias).read() == b"\x00" * 1000  # type: ignore[union-attr]


def test_fifo_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    fifo = repo / "m" / "1" / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(PackagingError) as info:
        package_repository(repo, tmp_path / "out")
    assert info.value.where == str(fifo)


@pytest.mark.parametrize("name", ["../outside", "/abs/model", "a/b"])
def test_dependency_names_with_paths_are_refused(tmp_path: Path, name: str) -> None:
    repo = make_repo(tmp_path / "repo")
    config = repo / "m" / "config.pbtxt"
    config.write_text(
        ADDSUB_CONFIG
        + f'parameters {{ key: "deploy.dependencies" value {{ string_value: "{name}" }} }}\n'
    )
    with pytest.raises(PackagingError) as info:
        package_repository(repo, tmp_path / "out")
    assert info.value.where == str(config)
    assert "not a plain folder name" in info.value.message


def test_absolute_label_file_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    config = repo / "m" / "config.pbtxt"
    config.write_text(
        ADDSUB_CONFIG.replace(
            'output [ { name: "Y", data_type: TYPE_FP32, dims: [ 2 ] } ]',
            'output [ { name: "Y", data_type: TYPE_FP32, dims: [ 2 ], '
            'label_filename: "/etc/passwd" } ]',
        )
    )
    with pytest.raises(PackagingError) as info:
        package_repository(repo, tmp_path / "out")
    assert info.value.where == f"{config}: output.label_filename"
    assert "outside the model folder" in info.value.message


def test_output_inside_the_repository_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    with pytest.raises(PackagingError, match="inside the model repository"):
        package_repository(repo, repo / "build")


KILLED_RUN = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import deploy.packaging.archive as archive

    marker = Path(sys.argv[3])
    original = archive._Writer._write

    def slow_write(self, offset, pieces):
        original(self, offset, pieces)
        if offset > 0:
            marker.touch()  # a block of the archive is written: wait to be killed
            time.sleep(60)

    archive._Writer._write = slow_write
    from deploy.packaging import package_repository
    package_repository(Path(sys.argv[1]), Path(sys.argv[2]))
    """
)


def test_run_killed_mid_write_leaves_no_partial_archive_or_stale_entry(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", weights=os.urandom(8 * 1024 * 1024))
    out = tmp_path / "out"
    first = package_repository(repo, out)
    manifest_before = (out / "manifest.json").read_bytes()
    (repo / "m" / "1" / "weights.bin").write_bytes(os.urandom(8 * 1024 * 1024))
    marker = tmp_path / "writing"
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, str(repo), str(out), str(marker)], cwd=ROOT
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None, "the packaging run ended before it was killed"
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert (out / "manifest.json").read_bytes() == manifest_before
    archives = sorted(p.name for p in out.glob("*.tar.gz"))
    assert archives == [first.manifest.models["m"].target_model]
    assert sha(out / archives[0]) == first.manifest.models["m"].sha256
    # The next run finishes the job and clears what the killed one left.
    result = package_repository(repo, out)
    assert sorted(p.name for p in out.iterdir() if p.name != ".deploy-cache.json") == sorted(
        ["manifest.json", result.manifest.models["m"].target_model]
    )


def test_cli_package_json_and_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    repo = make_repo(tmp_path / "repo")
    ok = runner.invoke(app, ["package", str(repo), "--out", str(tmp_path / "out"), "--json"])
    assert ok.exit_code == 0, ok.output
    document = json.loads(ok.stdout)
    assert [m["name"] for m in document["models"]] == ["m"]
    assert document["models"][0]["reused"] is False
    missing = runner.invoke(app, ["package", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert missing.exit_code == 1
    assert "not a directory" in missing.output
    assert "Traceback" not in missing.output
    usage = runner.invoke(app, ["package", str(repo)])
    assert usage.exit_code == 2


def test_progress_bar_stays_off_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_repo(tmp_path / "repo")
    result = package_repository(repo, tmp_path / "out", progress=True)
    assert [m.reused for m in result.models] == [False]
    assert capsys.readouterr().out == ""  # the bar never writes to stdout


def test_archive_bytes_do_not_depend_on_the_thread_count(tmp_path: Path) -> None:
    noise = tmp_path / "noise.bin"
    noise.write_bytes(os.urandom(3 * BLOCK_SIZE + 1234))
    table = tmp_path / "table.txt"
    table.write_bytes(b"".join(b"weight %d\n" % i for i in range(400_000)))
    entries = [
        Entry("m", "dir", 0o755),
        Entry("m/noise.bin", "file", 0o644, noise.stat().st_size, source=noise),
        Entry("m/table.txt", "file", 0o644, table.stat().st_size, source=table),
    ]
    written = set()
    for threads in (1, 2, 5):
        path = tmp_path / f"t{threads}.tar.gz"
        with path.open("wb") as out:
            sha256, size, _ = write_archive(entries, out, threads=threads)
        data = path.read_bytes()
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (sha256, size)
        written.add(data)
    assert len(written) == 1
    with tarfile.open(tmp_path / "t2.tar.gz") as tar:
        assert tar.extractfile("m/noise.bin").read() == noise.read_bytes()  # type: ignore[union-attr]


def test_a_file_that_shrinks_while_it_is_read_fails_the_archive(tmp_path: Path) -> None:
    source = tmp_path / "weights.bin"
    source.write_bytes(os.urandom(BLOCK_SIZE))
    entry = Entry("m/weights.bin", "file", 0o644, 2 * BLOCK_SIZE, source=source)  # stat said more
    with (tmp_path / "a.tar.gz").open("wb") as out, pytest.raises(PackagingError) as info:
        write_archive([entry], out, threads=2)
    assert info.value.where == str(source)
    assert "got shorter" in info.value.message


def test_random_blocks_are_stored_and_text_is_compressed(tmp_path: Path) -> None:
    # GIVEN a model with a random (incompressible) and a repetitive file, each
    # several blocks long
    noise = os.urandom(3 * BLOCK_SIZE + 1234)
    text = b"".join(b"weight %d\n" % i for i in range(400_000))
    repo = make_repo(tmp_path / "repo", weights=noise)
    (repo / "m" / "1" / "table.txt").write_bytes(text)
    # WHEN it is packaged
    archive = package_repository(repo, tmp_path / "out").models[0].path
    # THEN the random bytes are stored (5 bytes per 64 KiB more than their size)
    # and the text is compressed
    assert len(noise) < archive.stat().st_size < len(noise) + len(text) // 4
    with gzip.open(archive) as raw:
        tar_bytes = raw.read()
    assert noise in tar_bytes
    extracted = tmp_path / "x"
    extracted.mkdir()
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(extracted)], check=True)
    assert source_tree(extracted / "m") == source_tree(repo / "m")
