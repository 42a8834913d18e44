"""Move a process's pages from one NUMA node to another (migrate_pages(2), what numactl's migratepages does):
the nested tier breaks a run's placement on purpose with it. Usage: move_memory.py PID FROM TO."""

from __future__ import annotations

import ctypes
import os
import sys

SYS_MIGRATE_PAGES = 256  # x86_64


def move(pid: int, src: int, dst: int) -> int:
    """Pages not moved (migrate_pages' return); raises OSError on failure."""
    libc = ctypes.CDLL(None, use_errno=True)
    old, new = ctypes.c_ulong(1 << src), ctypes.c_ulong(1 << dst)
    left = libc.syscall(SYS_MIGRATE_PAGES, pid, 64, ctypes.byref(old), ctypes.byref(new))
    if left < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return left


if __name__ == "__main__":
    pid, src, dst = (int(a) for a in sys.argv[1:4])
    print(f"migrate_pages({pid}, {src} -> {dst}): {move(pid, src, dst)} pages not moved")
