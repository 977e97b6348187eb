"""Keep the memory of large request bodies for the next request (glibc only).

A request body of a few MB arrives as a few dozen chunks of up to 256 KB
(uvloop's reads, then httptools' body callbacks). The front end's event loop
runs in a thread, whose glibc arena gives freed memory back to the kernel
(`madvise`) as soon as a request is done, and chunks past the mmap threshold
are mapped and unmapped one by one: the next request faults every page in
again. Measured with a 4.8 MB body (bench/local_endpoint.py, `large_body`),
those page faults were more than half of the front end's CPU per request.
Raising the trim and mmap thresholds keeps up to `TRIM_THRESHOLD` of freed
memory mapped, so bodies reuse it. Other C libraries are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import platform

log = logging.getLogger(__name__)

# mallopt parameters (glibc malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
TRIM_THRESHOLD = 128 * 1024 * 1024
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit)

_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Tune this process's allocator once; True when it was (glibc), else False."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        mmap = libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    except (OSError, AttributeError) as exc:
        log.debug("allocator left as it is: %s", exc)
        return False
    _applied = bool(trim == 1 and mmap == 1)  # mallopt answers 1 on success
    return _applied
