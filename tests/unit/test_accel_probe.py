"""The KVM probe's guest: the run's own QEMU command line writer, one node and one vCPU, nothing to share."""

from __future__ import annotations

from pathlib import Path

from common import HOST

from lab.host.accel import PROBE_CMDLINE, PROBE_TOPOLOGY, kernel_printed, probe_boot
from lab.placement.pinning import plan_placement
from lab.vm.qemu.qemu_argv import qemu_argv


def test_the_probe_argv_is_qemu_argv_without_share_monitor_or_pause(tmp_path: Path) -> None:
    boot = probe_boot("kvm", Path("/boot/vmlinuz"), tmp_path)
    argv = qemu_argv(PROBE_TOPOLOGY, plan_placement(PROBE_TOPOLOGY, HOST), boot)
    assert argv[argv.index("-accel") + 1 : argv.index("-accel") + 4] == ["kvm", "-cpu", "host"]
    assert argv[argv.index("-m") + 1] == "256M" and argv[argv.index("-smp") + 1].startswith("1,")
    assert argv[argv.index("-append") + 1] == PROBE_CMDLINE
    assert argv[argv.index("-initrd") + 1] == str(tmp_path / "initrd") and (tmp_path / "initrd").stat().st_size
    for absent in ("-fsdev", "-device", "-qmp", "-S"):
        assert absent not in argv, absent
    assert boot.name.startswith("numalab-probe-kvm-")  # a leftover of a killed probe is a numalab-* domain
    assert boot.name != probe_boot("kvm", Path("/boot/vmlinuz"), tmp_path).name


def test_the_setup_stubs_lines_are_not_the_kernel_printing() -> None:
    # Measured here (2026-11-26): a KVM guest printed the stub's EDD line and hung; taken for a printing
    # kernel, the probe waited out its whole 150 s timeout instead of the 60 s silence.
    assert not kernel_printed("")
    assert not kernel_printed("Probing EDD (edd=off to disable)... ok\r\n")
    assert not kernel_printed("Probing EDD (edd=off to disable)... ok\nDecompressing Linux... Parsing ELF... done.\n")
    assert kernel_printed("Probing EDD (edd=off to disable)... ok\n[    0.000000] Linux version 6.1.0\n")
    assert kernel_printed("Linux version 6.1.0 (no timestamps)\n")
