"""Which machines and Pythons the pinned nvidia-pytriton wheel (and the stub's numpy) serve."""

from __future__ import annotations

import pytest

from deploy.errors import LocalEndpointError
from deploy.local.triton.wheel import target_for


def test_linux_x86_64_cpython_3_11_gets_both_pinned_wheels() -> None:
    target = target_for("linux", "x86_64", "3.11", "glibc", "2.36")
    assert target.pytriton.filename == ("nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_x86_64.whl")
    assert target.numpy.filename.startswith("numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64")
    assert all(len(wheel.sha256) == 64 for wheel in target.wheels)


@pytest.mark.parametrize(
    ("system", "machine", "python", "libc", "glibc", "named"),
    [
        ("darwin", "arm64", "3.11", "", "", "darwin on aarch64"),
        ("linux", "ppc64le", "3.11", "glibc", "2.36", "linux on ppc64le"),
        ("linux", "x86_64", "3.11", "glibc", "2.31", "glibc 2.31"),
        ("linux", "x86_64", "3.11", "", "", "another C library"),  # musl
        ("linux", "x86_64", "3.13", "glibc", "2.36", "CPython 3.13"),
        ("linux", "x86_64", "3.14", "glibc", "2.36", "CPython 3.14"),
    ],
)
def test_what_the_wheel_cannot_run_on_is_named_with_a_fix(
    system: str, machine: str, python: str, libc: str, glibc: str, named: str
) -> None:
    with pytest.raises(LocalEndpointError) as caught:
        target_for(system, machine, python, libc, glibc)
    assert named in str(caught.value)
    assert caught.value.fix and "make" not in caught.value.fix
