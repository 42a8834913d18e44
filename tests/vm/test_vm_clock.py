"""--clock virtual on real VMs (QEMU 10, TCG, numalab's baseline kernel): the guest's clock counts the instructions its
vCPUs execute, at the stated speed, whatever the host is doing."""

from __future__ import annotations

import json
import re

import pytest
from common import assert_one_line_error, host_hogs, numalab, qemu10_binary

SMALL = ["--cpus-per-node", "1", "--mem-per-node", "256M"]


@pytest.fixture(scope="module")
def qemu10() -> str:
    return qemu10_binary()


@pytest.mark.vm
def test_guest_time_is_instructions_at_the_stated_speed_under_host_load(tmp_path, qemu10, built_kernel) -> None:
    """spin on both vCPUs of ring-2 while a busy process runs on every host core: the vCPUs together execute
    1 G instructions per guest second (within 1%), the guest's TSC runs at 1 GHz, and the kernel's clock arguments
    are the virtual clock's, none derived from the host."""
    out = tmp_path / "spin"
    with host_hogs():
        proc = numalab("run", *built_kernel, "--qemu", qemu10, "--clock", "virtual", "--topology", "ring-2", *SMALL,
                       "--workload", "spin", "--duration", "3", "--no-trace", "--out", str(out), "--json",
                       timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "ok", m["reason"]
    clock = m["accelerator"]["clock"]
    assert clock["mode"] == "virtual" and clock["insn_per_guest_s"] == 1e9
    r = m["workload"]["result"]
    assert abs(r["insn_per_s"] / 1e9 - 1) < 0.01, r
    assert abs(r["insn_per_s_per_thread"] * 2 / 1e9 - 1) < 0.01, r  # two busy vCPUs share the speed
    mhz = re.search(r"tsc: Detected ([\d.]+) MHz", (out / "dmesg-boot.txt").read_text())
    assert mhz and abs(float(mhz.group(1)) - 1000) < 10, mhz
    # the clock arguments are the virtual clock's own, not the host's: its 1 GHz TSC and the lpj the kernel's HZ
    # makes of it (lab.vm.tcg.tcg_boot), so no secondary CPU calibrates its delay loop
    cmdline = (out / "cmdline.txt").read_text().split()
    tsc = [a for a in cmdline if a.startswith("tsc_early_khz=")]
    assert tsc == ["tsc_early_khz=1000000"], cmdline
    lpj = [int(a.split("=")[1]) for a in cmdline if a.startswith("lpj=")]
    assert len(lpj) == 1 and 1e9 / lpj[0] in (100, 250, 300, 1000), cmdline  # 10^9 / CONFIG_HZ
    assert "calibrate_delay_direct() failed" not in (out / "dmesg-boot.txt").read_text()
    argv = m["backend"]["argv"]
    assert argv[argv.index("-icount") + 1] == "shift=0,sleep=off" and "tcg,thread=single" in argv  # stock QEMU 10


def test_what_the_virtual_clock_cannot_do_is_a_one_line_error(tmp_path) -> None:
    base = ["run", "--topology", "ring-2", "--workload", "idle", "--duration", "1", "--clock", "virtual",
            "--out", str(tmp_path / "x")]  # fmt: skip
    assert_one_line_error(numalab(*base, "--accel", "kvm"), "--clock virtual: needs TCG")
    assert_one_line_error(numalab(*base, "--qemu", "system"), "--clock virtual: QEMU 7.2", "icount hangs SMP boots")
    assert_one_line_error(numalab(*base, "--backend", "libvirt", "--connect", "qemu:///nowhere"), "--clock virtual")
    assert not (tmp_path / "x").exists()
