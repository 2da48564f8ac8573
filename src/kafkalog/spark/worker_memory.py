"""Executor memory: keep freed memory in the Python worker for the next Arrow batch.

A read task allocates ~100 MB per million ~100-byte records (segment bytes read, then key and
value buffers of a few MB per Arrow batch) and frees each batch once Spark has shipped it. glibc's
malloc hands blocks that big back to the kernel on free (``mmap``/``munmap``, heap trimming), so
every batch is built in fresh pages that the kernel must fault in and zero: measured on a
1 M-record partition, that doubled the decode time (page faults were over half of it). Raising
glibc's mmap threshold (to its maximum, 32 MiB) and trim threshold makes freed blocks stay in the
process and be reused, as Arrow's own allocator (mimalloc/jemalloc) does for its buffers.

It is a process-wide setting of the worker (a long-lived Spark Python worker, reused by later
tasks): a worker keeps up to the trim threshold of freed memory instead of returning it. Applied
once per process, only on Linux with glibc, and never over the user's own ``MALLOC_*`` settings.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["keep_freed_memory"]

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Blocks up to this size come from the heap (glibc's maximum on 64-bit: 32 MiB), so a batch's
# buffers (ARROW_BATCH_BYTES at most) are reused rather than mapped afresh ...
_MMAP_THRESHOLD = 32 * 1024 * 1024
# ... and up to this much free memory at the heap's top is kept rather than trimmed.
_TRIM_THRESHOLD = 256 * 1024 * 1024
_USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")

_applied: bool | None = None  # None: not tried yet in this process


def keep_freed_memory() -> bool:
    """Set the thresholds once per process; returns whether they are set."""
    global _applied
    if _applied is None:
        _applied = _apply()
    return _applied


def _apply() -> bool:
    if not sys.platform.startswith("linux") or any(name in os.environ for name in _USER_SETTINGS):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's C library
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success (musl's is a stub that returns 0).
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
