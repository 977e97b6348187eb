"""The box's pieces on the real kernel: the seccomp filter, the environment, the keeper.

The filter is installed in a forked child (it cannot be removed), which
reports what socket() gave for each family through a pipe. These run as
whoever runs the tests; `tests/functional/test_repository_code_box.py` runs
the whole box as an unprivileged user.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deploy import box
from deploy.box import _enter
from deploy.box.environment import allowed, scrubbed_environment


def _in_filtered_child(families: list[int]) -> dict[str, object]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: filter, try, report, exit without pytest's cleanup
        try:
            os.close(read)
            _enter.install_socket_filter()
            results: dict[str, object] = {}
            for family in families:
                try:
                    socket.socket(family, socket.SOCK_STREAM).close()
                    results[str(family)] = "ok"
                except OSError as exc:
                    results[str(family)] = exc.errno
            pair = socket.socketpair(socket.AF_UNIX)
            pair[0].sendall(b"x")
            results["socketpair"] = pair[1].recv(1).decode()
            os.write(write, json.dumps(results).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return dict(json.loads(data))


def test_the_filter_refuses_internet_sockets_and_keeps_unix_ones() -> None:
    assert platform.machine() in _enter.ARCHES, "the box's filter knows this machine"
    assert _enter.seccomp_available(), "seccomp must be usable here"
    families = [socket.AF_UNIX, socket.AF_INET, socket.AF_INET6, socket.AF_PACKET]
    results = _in_filtered_child(families)
    assert results[str(socket.AF_UNIX)] == "ok"
    assert results["socketpair"] == "x"
    for family in (socket.AF_INET, socket.AF_INET6, socket.AF_PACKET):
        assert results[str(family)] in (errno.EPERM, errno.EACCES), family


def test_the_filter_is_a_whole_number_of_bpf_instructions_for_each_machine() -> None:
    for machine in _enter.ARCHES:
        program = _enter.socket_filter(machine)
        assert len(program) % 8 == 0 and 0 < len(program) // 8 < 64


def test_the_environment_keeps_no_credentials() -> None:
    source = {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_SESSION_TOKEN": "t",
        "AWS_PROFILE": "p",
        "GITHUB_TOKEN": "g",
        "HF_TOKEN": "h",
        "MY_API_KEY": "k",
        "https_proxy": "http://user:pass@proxy:3128",
        "HTTPS_PROXY": "http://user:pass@proxy:3128",
        "DB_PASSWORD": "d",
        "HOME": "/home/user",
        "PYTHONPATH": "/home/user/lib",
    }
    env = scrubbed_environment(home=Path("/tmp/h"), tmp=Path("/tmp/t"), source=source)
    assert env == {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "HOME": "/tmp/h",
        "TMPDIR": "/tmp/t",
        "USER": "deploy",
        "LOGNAME": "deploy",
    }
    assert not allowed("AWS_REGION")
    assert allowed("LC_CTYPE")


def test_the_keeper_kills_what_the_code_left_behind(tmp_path: Path) -> None:
    marker = f"{700 + os.getpid() % 97}.{time.time_ns() % 10**9}"
    code = (
        "import subprocess\n"
        f"subprocess.Popen(['setsid', 'sleep', '{marker}'])\n"
        f"subprocess.Popen(['sleep', '{marker}'])\n"
    )
    with box.scratch() as scratch:
        outcome = box.run([sys.executable, "-c", code], box=scratch, timeout=30)
    assert outcome == box.Outcome(0, timed_out=False)
    time.sleep(0.2)
    assert _with_marker(marker) == []


def test_a_run_past_its_timeout_is_stopped_with_its_tree() -> None:
    marker = f"{800 + os.getpid() % 97}.{time.time_ns() % 10**9}"
    code = f"import subprocess, time\nsubprocess.Popen(['setsid', 'sleep', '{marker}'])\n"
    code += "time.sleep(600)\n"
    started = time.monotonic()
    with box.scratch() as scratch:
        outcome = box.run([sys.executable, "-c", code], box=scratch, timeout=2)
    assert outcome.timed_out and time.monotonic() - started < 20
    time.sleep(0.2)
    assert _with_marker(marker) == []


def test_the_cpu_limit_stops_a_spinning_run() -> None:
    with box.scratch() as scratch:
        outcome = box.run(
            [sys.executable, "-c", "while True: pass"],
            box=scratch,
            limits=box.Limits(cpu_s=1),
            timeout=60,
        )
    assert not outcome.timed_out
    assert outcome.returncode != 0


@pytest.mark.parametrize("target", ["home", "outside"])
def test_writes_land_only_in_the_writable_folders(tmp_path: Path, target: str) -> None:
    outside = tmp_path / "outside.txt"
    with box.scratch() as scratch:
        path = scratch.home / "note.txt" if target == "home" else outside
        outcome = box.run(
            [sys.executable, "-c", f"open({str(path)!r}, 'w').write('x')"],
            box=scratch,
            timeout=30,
            stderr=subprocess.DEVNULL,
        )
        assert (outcome.returncode == 0) == (target == "home")
        assert path.exists() == (target == "home")


def _with_marker(marker: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker.encode() in (proc / "cmdline").read_bytes():
                    found.append(proc.name)
            except OSError:
                continue
    return found
