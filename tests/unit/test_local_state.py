"""The local endpoint's record and `deploy serve REPO`'s temporary store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deploy.local.modes.serve import store_for
from deploy.local.state import LocalState, read_state, remove_state, rotate_log, write_state

EXAMPLES = Path(__file__).resolve().parents[2] / "model_packages" / "examples"


def state(pid: int) -> LocalState:
    return LocalState("local", pid, 1, "http://127.0.0.1:1", "", "/store", 0.0)


def test_a_record_is_removed_only_by_its_process(tmp_path: Path) -> None:
    write_state(state(os.getpid()), tmp_path)
    remove_state("local", os.getpid() + 1, tmp_path)
    assert read_state("local", tmp_path) == state(os.getpid())
    remove_state("local", os.getpid(), tmp_path)
    assert read_state("local", tmp_path) is None


def test_a_record_of_a_dead_process_is_dropped(tmp_path: Path) -> None:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os._exit(0)
    os.waitpid(pid, 0)
    write_state(state(pid), tmp_path)
    assert read_state("local", tmp_path) is None
    assert not (tmp_path / "local.json").exists()


def test_the_previous_log_is_kept_once(tmp_path: Path) -> None:
    log = tmp_path / "local" / "tritonserver.log"
    rotate_log(log).write_text("first")
    rotate_log(log).write_text("second")
    rotate_log(log)
    assert (tmp_path / "local" / "tritonserver.log.1").read_text() == "second"
    assert not log.exists()


def test_the_temporary_store_goes_on_an_interrupt() -> None:
    with pytest.raises(KeyboardInterrupt), store_for(str(EXAMPLES)) as store:
        assert (Path(store) / "manifest.json").is_file()
        raise KeyboardInterrupt
    assert not Path(store).exists()


def test_a_given_package_dir_is_kept(tmp_path: Path) -> None:
    with store_for(str(EXAMPLES), package_dir=tmp_path / "out") as store:
        pass
    assert (Path(store) / "manifest.json").is_file()
