"""QEMU 10 (Debian's backports build, unpacked by make setup-qemu10) beside the system's 7.2, on real VMs:
chosen per run with --qemu, booting its own firmware, and the access-matrix plugin's guest-physical map."""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from common import numalab, qemu10_binary

from lab.host.accel import PROBE_MARK, PROBE_TOPOLOGY, probe_boot
from lab.kernel.stock import fetch_stock
from lab.placement.host_inventory import read_inventory
from lab.placement.pinning import plan_placement
from lab.vm.qemu.emulator import resolve
from lab.vm.qemu.qemu_argv import qemu_argv
from lab.vm.qemu.qemu_backend import QemuBackend

pytestmark = pytest.mark.vm

SMALL = ["--cpus-per-node", "1", "--mem-per-node", "256M", "--accel", "tcg"]
# Where the system's QEMU keeps its data and modules: a QEMU 10 from a prefix must read none of it.
SYSTEM_QEMU_FILES = ("/usr/share/qemu/", "/usr/share/seabios/", "/usr/lib/ipxe/", "/usr/lib/x86_64-linux-gnu/qemu/")


@pytest.fixture(scope="module")
def qemu10() -> str:
    return qemu10_binary()


def _run(tmp_path: Path, name: str, *args: str) -> dict:
    out = tmp_path / name
    proc = numalab("run", *args, "--out", str(out), "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_qemu10_and_the_system_qemu_each_boot_their_own_firmware(tmp_path, qemu10) -> None:
    m10 = _run(tmp_path, "q10", "--qemu", qemu10, "--topology", "ring-2", *SMALL, "--workload", "idle",
               "--duration", "1")  # fmt: skip
    prefix = str(Path(qemu10).parents[2])
    assert m10["status"] == "ok", m10["reason"]
    assert m10["backend"]["qemu"]["version"] == "10.0.2" and "10.0.2" in m10["backend"]["version"]
    assert m10["firmware"]["name"] == "qboot" and m10["firmware"]["rom"].startswith(prefix + "/")
    argv = m10["backend"]["argv"]
    assert argv[:3] == [qemu10, "-L", f"{prefix}/usr/share/qemu"]
    # Without --qemu: the system's 7.2, its own qboot, no -L.
    m72 = _run(tmp_path, "q72", "--topology", "ring-2", *SMALL, "--workload", "idle", "--duration", "1")
    assert m72["status"] == "ok" and m72["backend"]["qemu"]["version"].startswith("7.2.")
    assert m72["firmware"]["rom"] == "/usr/share/qemu/qboot.rom" and "-L" not in m72["backend"]["argv"]
    assert m72["backend"]["argv"][0] == os.path.realpath("/usr/bin/qemu-system-x86_64")


def test_numa01_on_qemu10_passes_the_topology_check(tmp_path, qemu10) -> None:
    m = _run(tmp_path, "numa01", "--qemu", qemu10, "--topology", "ring-4", *SMALL, "--workload", "numa01",
             "--duration", "3")  # fmt: skip
    assert m["status"] == "ok", m["reason"]
    assert m["guest_topology_ok"] and m["guest_topology"]["problems"] == []
    assert m["backend"]["qemu"]["version"] == "10.0.2"
    assert m["metrics"]["events"], "the NUMA tracepoints were traced"


def test_access_matrix_on_qemu10_maps_ram_above_4g(tmp_path, qemu10) -> None:
    """2 GiB a node: node 0 is the RAM below 2 GiB, node 1 all of it lies from 4 GiB up on q35 (QEMU 8.2+ reports
    guest-physical addresses). Its accesses count for node 1, and nothing lands outside every node."""
    m = _run(tmp_path, "access", "--qemu", qemu10, "--topology", "ring-2", "--cpus-per-node", "1",
             "--mem-per-node", "2G", "--accel", "tcg", "--no-trace", "--access-matrix", "--workload",
             "numa01-thread-alloc", "--duration", "4")  # fmt: skip
    a = m["access_matrix"]
    assert m["status"] == "ok" and a["problem"] is None, (m["reason"], a.get("problem"))
    assert a["plugin"]["address_mode"] == "guest-physical" and a["plugin"]["plugin_api"] == 2
    ranges = a["plugin"]["ranges"]
    assert [r for r in ranges if r["node"] == 1] == [{"node": 1, "start": hex(4 << 30), "end": hex(6 << 30)}], ranges
    mat = a["matrix"]
    assert mat[0][1] + mat[1][1] > 1000  # node 1's memory, all above 4 GiB, was counted
    # Next to nothing outside the nodes (a wrong map of the RAM above 4 GiB would put half the accesses there):
    # seen 0-2 in the window (a share of 1e-6) and 4 over the whole run, reads of the firmware ROM or similar.
    assert a["outside_share"] < 0.001 and a["outside_whole_run"] < 100


def test_a_qemu10_boot_reads_no_file_of_the_system_qemu(tmp_path, qemu10) -> None:
    """The probe guest's own command line (qboot, no share), run under strace: every ROM and module QEMU 10
    opens is its prefix's, none of the system 7.2's."""
    e = resolve(qemu10)
    boot = replace(probe_boot("tcg", fetch_stock() / "vmlinuz", tmp_path), firmware=QemuBackend(e).firmware_rom("auto"))
    argv = qemu_argv(PROBE_TOPOLOGY, plan_placement(PROBE_TOPOLOGY, read_inventory(), pinning="node"), boot,
                     e.argv_prefix())  # fmt: skip
    log = tmp_path / "strace.log"
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=open,openat,openat2", "-o", str(log), "--", *argv],
                   env={**os.environ, **e.env()}, timeout=120, check=False, capture_output=True)  # fmt: skip
    assert PROBE_MARK in Path(boot.console_log).read_text(errors="replace"), "the probe guest did not boot"
    opened = re.findall(r'open(?:at2?)?\((?:[A-Z_]+, )?"([^"]+)"', log.read_text())
    system = sorted({p for p in opened if p.startswith(SYSTEM_QEMU_FILES)})
    assert system == [], f"QEMU 10 read the system QEMU's files: {system}"
    prefix = str(Path(qemu10).parents[2])
    assert f"{prefix}/usr/share/qemu/qboot.rom" in opened
