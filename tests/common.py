"""Shared test fixtures and helpers (plain module: pytest puts tests/ on sys.path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lab.placement.host_inventory import HostInventory, HostNode
from lab.vm.qemu_argv import BootSpec

REPO = Path(__file__).resolve().parents[1]

BOOT = BootSpec(
    kernel="/srv/numalab/bzImage",
    initrd="/srv/numalab/initrd.cpio",
    cmdline="console=ttyS0 numa=on quiet",
    results_dir="/srv/numalab/results",
    console_log="/srv/numalab/console.log",
    qmp_socket="/srv/numalab/qmp.sock",
    name="numalab-test",
)

# Two host nodes with plenty of memory and 2 MiB hugepages, so placements alternate 0, 1, 0, 1...
HOST = HostInventory(
    nodes=(
        HostNode(0, (0, 1, 2, 3), 65536, 60000, {2048: 30000}),
        HostNode(1, (4, 5, 6, 7), 65536, 60000, {2048: 30000}),
    ),
    online_cpus=tuple(range(8)),
    mem_available_mib=120000,
)


def numalab(*args: str, timeout: float = 600, env: dict | None = None, cwd: Path | None = None):
    """Run the real CLI in a subprocess (as a user would)."""
    return subprocess.run(
        [sys.executable, "-m", "lab.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or REPO,
        env={**os.environ, **(env or {})},
    )


def assert_one_line_error(proc, *needles: str) -> None:
    """Exit != 0, exactly one line on stderr, no traceback, naming what is wrong."""
    assert proc.returncode != 0, proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]
