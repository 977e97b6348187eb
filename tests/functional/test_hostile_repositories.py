"""Hostile repositories: `deploy package` and `deploy validate` fail with a message, never a
traceback, a hang or a torn archive.

Each case builds a repository that breaks an assumption (a file rewritten
while it is archived, unreadable paths, link loops, names that are not UTF-8,
FIFOs and sockets, invalid ONNX files, names that look like markup) and runs
the real command line. Commands that could hang run in a subprocess with a
timeout. Tests run as root here, and root reads everything: unreadable paths
are checked with the command run under `setpriv` without the capabilities
that let root bypass file permissions (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH),
so the kernel refuses the reads exactly as it would for any other user.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from deploy.cli import app
from deploy.errors import PackagingError
from deploy.packaging import archive
from deploy.packaging.archive import BLOCK_SIZE, verify_unchanged
from deploy.packaging.digest import content_hash
from deploy.packaging.layout import Entry, change_key_of

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """
name: "m"
backend: "python"
max_batch_size: 4
input [ { name: "X", data_type: TYPE_FP32, dims: [ 2 ] } ]
output [ { name: "Y", data_type: TYPE_FP32, dims: [ 2 ] } ]
"""
WEIGHTS_BLOCKS = 8  # more blocks than archive threads: some are read after the rewrite


def make_repo(root: Path) -> Path:
    version = root / "m" / "1"
    version.mkdir(parents=True)
    (root / "m" / "config.pbtxt").write_text(CONFIG)
    (version / "model.py").write_text("# model\n")
    (version / "weights.bin").write_bytes(os.urandom(WEIGHTS_BLOCKS * BLOCK_SIZE))
    return root


def onnx_only_repo(root: Path, content: bytes | None) -> Path:
    """A model with no config.pbtxt, so its config is read from model.onnx."""
    version = root / "m" / "1"
    version.mkdir(parents=True)
    if content is not None:
        (version / "model.onnx").write_bytes(content)
    return root


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def run_cli(*args: str, unprivileged: bool = False) -> subprocess.CompletedProcess[str]:
    """The real `deploy` command in a child process (a hang fails the test, not the run)."""
    command = [sys.executable, "-m", "deploy", *args]
    if unprivileged and os.geteuid() == 0:
        # Root without the capabilities that bypass file permissions.
        caps = "-dac_override,-dac_read_search"
        command = ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", *command]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=60, cwd=ROOT, env=env, check=False
    )


def assert_clean_failure(result: Any, where: str, *words: str) -> None:
    """Exit 1, a message that names `where` and says `words`, and a fix; no traceback."""
    if isinstance(result, subprocess.CompletedProcess):
        code, output = result.returncode, result.stdout + result.stderr
    else:
        assert isinstance(result.exception, SystemExit), result.exception
        code, output = result.exit_code, result.output
    assert code == 1, output
    assert "Traceback" not in output
    assert where in output, output
    assert "fix:" in output
    for word in words:
        assert word in output, output


def assert_nothing_written(out: Path) -> None:
    assert not (out / "manifest.json").exists()
    assert not list(out.glob("*.tar.gz"))
    assert not list(out.glob(".*partial*"))


# --- a file that changes while it is archived -------------------------------------------


@pytest.fixture
def rewrite_during_read(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Arrange for `path` to be rewritten in place by another thread mid-archive.

    The first block the archiver reads triggers the writer thread and waits
    for it to finish; the blocks read after that see the new bytes. No timing
    is involved: the order is forced.
    """
    threads: list[threading.Thread] = []

    def arrange(path: Path, keep_times: bool = False) -> None:
        original = archive._read_range
        done = threading.Event()

        def rewrite() -> None:
            before = path.stat()
            with path.open("r+b") as handle:  # in place: same inode, same size
                handle.seek(BLOCK_SIZE * (WEIGHTS_BLOCKS - 1))
                handle.write(os.urandom(BLOCK_SIZE))
                handle.flush()
                os.fsync(handle.fileno())
            if keep_times:  # as `rsync -t` or `touch -r` would leave it
                os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))

        def read_range(*args: Any) -> None:
            original(*args)
            if not done.is_set():
                done.set()
                writer = threading.Thread(target=rewrite, name="rewriter")
                threads.append(writer)
                writer.start()
                writer.join()

        monkeypatch.setattr(archive, "_read_range", read_range)

    yield arrange
    for thread in threads:
        thread.join()


@pytest.mark.parametrize("keep_times", [False, True], ids=["times-move", "mtime-restored"])
def test_a_file_rewritten_in_place_while_it_is_archived_fails_naming_it(
    tmp_path: Path, rewrite_during_read: Callable[..., None], keep_times: bool
) -> None:
    # GIVEN a model whose weights another thread rewrites in place mid-archive
    repo = make_repo(tmp_path / "repo")
    weights = repo / "m" / "1" / "weights.bin"
    rewrite_during_read(weights, keep_times=keep_times)
    out = tmp_path / "out"
    # WHEN it is packaged
    result = cli("package", str(repo), "--out", str(out))
    # THEN the run fails naming the file, and leaves no archive and no manifest
    assert_clean_failure(result, str(weights), "changed while it was archived")
    assert_nothing_written(out)


def test_a_file_changed_without_moving_its_times_is_caught_by_a_second_read(
    tmp_path: Path,
) -> None:
    # GIVEN a recently changed file whose archived bytes (hashed while reading)
    # differ from what it now holds, with the same times: a change inside one
    # tick of a coarse file clock looks exactly like this
    source = tmp_path / "weights.bin"
    archived = os.urandom(BLOCK_SIZE)
    source.write_bytes(os.urandom(BLOCK_SIZE))
    info = source.stat()
    entry = Entry(
        "m/weights.bin",
        "file",
        0o644,
        info.st_size,
        source=source,
        change_key=change_key_of(info),
        recent=True,
    )
    # THEN the check after archiving reads it again and fails naming it
    with pytest.raises(PackagingError) as error:
        verify_unchanged([entry], [content_hash(archived).hexdigest()])
    assert error.value.where == str(source)
    assert "second read" in error.value.message
    # AND the same bytes pass
    verify_unchanged([entry], [content_hash(source.read_bytes()).hexdigest()])


def test_a_file_replaced_by_a_fifo_after_planning_is_refused_without_blocking(
    tmp_path: Path,
) -> None:
    source = tmp_path / "weights.bin"
    source.write_bytes(b"x" * 100)
    info = source.stat()
    entry = Entry(
        "m/weights.bin", "file", 0o644, 100, source=source, change_key=change_key_of(info)
    )
    source.unlink()
    os.mkfifo(source)  # swapped in after the plan: opening it must not wait for a writer
    with (tmp_path / "a.tar.gz").open("wb") as out, pytest.raises(PackagingError) as error:
        archive.write_archive([entry], out)
    assert error.value.where == str(source)
    assert "no longer a regular file" in error.value.message


# --- unreadable files and folders (run without root's permission bypass) ----------------


def test_an_unreadable_file_fails_packaging_naming_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    secret = repo / "m" / "1" / "secret.bin"
    secret.write_bytes(b"x")
    secret.chmod(0)
    out = tmp_path / "out"
    result = run_cli("package", str(repo), "--out", str(out), unprivileged=True)
    assert_clean_failure(result, f"{secret}: cannot read", "Permission denied")
    assert_nothing_written(out)


def test_an_unreadable_folder_fails_packaging_instead_of_being_left_out(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    hidden = repo / "m" / "1" / "tokenizer"
    hidden.mkdir()
    (hidden / "vocab.txt").write_text("a\nb\n")
    hidden.chmod(0)
    out = tmp_path / "out"
    try:
        result = run_cli("package", str(repo), "--out", str(out), unprivileged=True)
    finally:
        hidden.chmod(0o755)
    assert_clean_failure(result, str(hidden), "cannot read")
    assert_nothing_written(out)


def test_an_unreadable_model_folder_is_a_validation_error(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    version = repo / "m" / "1"
    version.chmod(0)
    try:
        result = run_cli("validate", str(repo), unprivileged=True)
    finally:
        version.chmod(0o755)
    assert_clean_failure(result, str(version), "cannot read")


# --- links --------------------------------------------------------------------------------


def test_links_that_loop_fail_packaging(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    version = repo / "m" / "1"
    (version / "a.bin").symlink_to("b.bin")
    (version / "b.bin").symlink_to("a.bin")
    result = cli("package", str(repo), "--out", str(tmp_path / "out"))
    assert_clean_failure(result, str(version / "a.bin"), "symlinks form a loop")
    assert_nothing_written(tmp_path / "out")


@pytest.mark.parametrize("target", [".", "..", "../.."], ids=["itself", "parent", "model"])
def test_a_folder_link_to_an_ancestor_fails_packaging(tmp_path: Path, target: str) -> None:
    repo = make_repo(tmp_path / "repo")
    sub = repo / "m" / "1" / "assets"
    sub.mkdir()
    (sub / "again").symlink_to(target)
    result = cli("package", str(repo), "--out", str(tmp_path / "out"))
    assert_clean_failure(result, str(sub / "again"), "folder that contains it")


def test_folder_links_that_lead_to_each_other_fail_packaging(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    version = repo / "m" / "1"
    (version / "a").mkdir()
    (version / "b").mkdir()
    (version / "a" / "to_b").symlink_to("../b")
    (version / "b" / "to_a").symlink_to("../a")
    result = cli("package", str(repo), "--out", str(tmp_path / "out"))
    assert_clean_failure(result, str(version), "folder that contains it")


def test_a_folder_link_to_a_sibling_is_still_packaged(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    version = repo / "m" / "1"
    (version / "shared").mkdir()
    (version / "shared" / "vocab.txt").write_text("a\n")
    (version / "alias").symlink_to("shared")
    result = cli("package", str(repo), "--out", str(tmp_path / "out"), "--json")
    assert result.exit_code == 0, result.output


# --- names and special files --------------------------------------------------------------


def test_a_file_name_that_is_not_utf8_fails_package_and_validate(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    version = repo / "m" / "1"
    (Path(os.fsdecode(bytes(version) + b"/\xff\xfe.bin"))).write_bytes(b"x")
    shown = f"{version}/\\xff\\xfe.bin"
    packaged = run_cli("package", str(repo), "--out", str(tmp_path / "out"))
    assert_clean_failure(packaged, shown, "not valid UTF-8")
    validated = run_cli("validate", str(repo))
    assert_clean_failure(validated, shown, "not valid UTF-8")


def test_a_fifo_named_model_onnx_fails_validate_without_opening_it(tmp_path: Path) -> None:
    repo = onnx_only_repo(tmp_path / "repo", None)
    fifo = repo / "m" / "1" / "model.onnx"
    os.mkfifo(fifo)
    assert_clean_failure(run_cli("validate", str(repo)), str(fifo), "not a regular file")


def test_a_link_to_a_fifo_named_model_onnx_fails_validate_without_opening_it(
    tmp_path: Path,
) -> None:
    repo = onnx_only_repo(tmp_path / "repo", None)
    os.mkfifo(tmp_path / "pipe")
    link = repo / "m" / "1" / "model.onnx"
    link.symlink_to(tmp_path / "pipe")
    assert_clean_failure(run_cli("validate", str(repo)), str(link), "not a regular file")


def test_a_socket_in_a_model_folder_fails_validate_and_package(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    path = repo / "m" / "1" / "control.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        assert_clean_failure(cli("validate", str(repo)), str(path), "not a regular file")
        packaged = cli("package", str(repo), "--out", str(tmp_path / "out"))
        assert_clean_failure(packaged, str(path), "not a regular file")


def test_file_names_that_look_like_markup_are_printed_as_they_are(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    odd = repo / "m" / "1" / "a[" / "b]c"
    odd.parent.mkdir()
    os.mkfifo(odd)
    assert_clean_failure(run_cli("validate", str(repo)), f"{odd}: not a regular file")


# --- ONNX files that are not ONNX models --------------------------------------------------


def _onnx_with_sequence_input() -> bytes:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("SequenceLength", ["S"], ["N"])],
        "g",
        [helper.make_tensor_sequence_value_info("S", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("N", TensorProto.INT64, [])],
    )
    return bytes(onnx.helper.make_model(graph).SerializeToString())


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"this is not protobuf\n\xff\xff\xff", "not a valid ONNX model"),
        (b"", "no graph"),
        (None, "ONNX type UNDEFINED"),
    ],
    ids=["garbage", "empty", "sequence-input"],
)
def test_an_invalid_onnx_file_is_a_validation_error_naming_it(
    tmp_path: Path, content: bytes | None, words: str
) -> None:
    repo = onnx_only_repo(tmp_path / "repo", content if content is not None else b"")
    model = repo / "m" / "1" / "model.onnx"
    if content is None:
        model.write_bytes(_onnx_with_sequence_input())
    assert_clean_failure(cli("validate", str(repo)), str(model), words)
    packaged = cli("package", str(repo), "--out", str(tmp_path / "out"))
    assert_clean_failure(packaged, str(model), words)


# --- the output folder ---------------------------------------------------------------------


def test_an_output_folder_that_cannot_be_written_is_a_message(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    for out in (locked, locked / "store"):
        result = run_cli("package", str(repo), "--out", str(out), unprivileged=True)
        assert_clean_failure(result, str(out), "cannot write the output", "Permission denied")


def test_a_fifo_in_place_of_the_digest_cache_is_not_opened(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / ".deploy-cache.json")
    result = run_cli("package", str(repo), "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr
    assert (out / "manifest.json").is_file()


def test_an_output_link_loop_is_a_message(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    result = cli("package", str(repo), "--out", str(tmp_path / "a"))
    assert_clean_failure(result, str(tmp_path / "a"), "loop")
