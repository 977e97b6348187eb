"""Whether the server on a loopback TCP port is the process we started.

Any user of the machine can bind a free port on 127.0.0.1. A server of
another user that holds tritonserver's SageMaker port before tritonserver
does (it was free when chosen, or freed by a crash) would be taken for it:
it would answer `/ping`, be sent model paths and request bodies, and its
answers would be returned as the model's. tritonserver cannot be handed a
socket opened for it, so the supervisor checks instead, through the
kernel's socket tables: /proc/net/tcp and tcp6 give the inode of every
socket that listens on the port, and /proc/PID/fd links name the sockets a
process holds (`socket:[INODE]`). The port is the child's when every socket
that takes connections made to 127.0.0.1:PORT is held by the child.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

_LISTEN = "0A"  # TCP_LISTEN, as /proc/net/tcp prints the state
# The local addresses, as /proc/net prints them (each 32-bit word in host order),
# of sockets that take connections made to 127.0.0.1: 127.0.0.1 and 0.0.0.0;
# ::ffff:127.0.0.1 and :: (dual-stack unless IPV6_V6ONLY, which /proc does not show).
_TABLES = (
    ("/proc/net/tcp", frozenset({"0100007F", "00000000"})),
    (
        "/proc/net/tcp6",
        frozenset({"0000000000000000FFFF00000100007F", "00000000000000000000000000000000"}),
    ),
)


class VerifiedServer(Protocol):
    """A server whose listener was verified (the supervisor): connect to
    `verified()`'s port, then send nothing unless `still_verified(token)`."""

    def verified(self) -> tuple[int, int]:
        """(port, token); ConnectionRefusedError while no verified server runs."""
        ...

    def still_verified(self, token: int) -> bool: ...


@dataclass(frozen=True)
class Listener:
    """A listening socket: its inode and the uid of its owner."""

    inode: int
    uid: int


class Holder(enum.Enum):
    """Who listens on the port."""

    NOBODY = "nobody"
    CHILD = "child"  # only the process we started
    OTHER = "other"  # at least one socket held by another process


def listeners(port: int) -> list[Listener]:
    """Every listening socket that takes connections made to 127.0.0.1:`port`."""
    found = []
    for table, addresses in _TABLES:
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:  # a kernel without IPv6
            continue
        for line in lines:
            fields = line.split()
            address, _, hex_port = fields[1].partition(":")
            if fields[3] == _LISTEN and int(hex_port, 16) == port and address in addresses:
                found.append(Listener(inode=int(fields[9]), uid=int(fields[7])))
    return found


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets process `pid` holds (empty once it has exited)."""
    inodes = set()
    with contextlib.suppress(OSError):  # exited, or not ours to read
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):  # closed meanwhile
                target = str(fd.readlink())
                if target.startswith("socket:["):
                    inodes.add(int(target[8:-1]))
    return inodes


def holder(pid: int, port: int) -> tuple[Holder, list[Listener]]:
    """Who listens on 127.0.0.1:`port`, and the sockets of others if not only `pid`."""
    found = listeners(port)
    if not found:
        return Holder.NOBODY, []
    held = socket_inodes(pid)
    others = [listener for listener in found if listener.inode not in held]
    return (Holder.OTHER, others) if others else (Holder.CHILD, [])


def port_bound(port: int) -> bool:
    """True when a socket (listening or not) holds 127.0.0.1:`port`, so nothing else can
    bind it. Connections in TIME_WAIT do not count: tritonserver binds with SO_REUSEADDR."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def describe(others: list[Listener]) -> str:
    """'uid 65534 (socket 1234)' for a log line."""
    return ", ".join(f"uid {other.uid} (socket {other.inode})" for other in others) or "a process"
