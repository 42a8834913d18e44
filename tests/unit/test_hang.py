"""Where a timed-out VM was (lab.vm.hang): QEMU's real `info registers -a` output parsed, RIPs named from a
System.map, one line for the summary. The capture itself is proven on a real hung guest in test_vm_run.py."""

from __future__ import annotations

from pathlib import Path

from lab.vm.hang import describe, parse_registers, symbolize

DATA = Path(__file__).resolve().parents[1] / "data" / "hang"


def test_long_mode_registers_from_a_real_guest() -> None:
    # A stock 6.1 kernel, 2 vCPUs, captured from QEMU 7.2 after it panicked (no root fs) with panic=0.
    vcpus = parse_registers((DATA / "info-registers-a-64bit.txt").read_text())
    assert vcpus == [
        {"cpu": 0, "rip": "ffffffff8103fc9b", "halted": True},
        {"cpu": 1, "rip": "ffffffff819f77a3", "halted": False},
    ]


def test_vcpus_still_in_the_firmware_show_eip() -> None:
    # Two vCPUs of a machine started paused: the reset vector, in real mode; the second one halted
    # (an application processor waits for its startup IPI).
    vcpus = parse_registers((DATA / "info-registers-a-realmode.txt").read_text())
    assert vcpus == [{"cpu": 0, "rip": "0000fff0", "halted": False}, {"cpu": 1, "rip": "0000fff0", "halted": True}]
    assert "symbol" not in symbolize({"vcpus": vcpus}, None)["vcpus"][0]


def test_rips_are_named_from_system_map(tmp_path: Path) -> None:
    smap = tmp_path / "System.map"
    smap.write_text(
        "ffffffff81000000 T _stext\n"
        "ffffffff8103fc80 T native_safe_halt\n"
        "ffffffff8103fcc0 t other\n"
        "ffffffff819f7700 T panic\n"
        "ffffffff82000000 D some_data\n"
    )
    state = {"status": "running", "vcpus": parse_registers((DATA / "info-registers-a-64bit.txt").read_text())}
    named = symbolize(state, smap)
    assert [v["symbol"] for v in named["vcpus"]] == ["native_safe_halt+0x1b", "panic+0xa3"]
    assert describe(named) == "QEMU running; vCPUs: 0 halted at native_safe_halt+0x1b; 1 at panic+0xa3"


def test_debian_placeholder_system_map_names_nothing(tmp_path: Path) -> None:
    """Debian's linux-image ships a one-line System.map that points to the -dbg package: no names, no error."""
    smap = tmp_path / "System.map"
    smap.write_text("ffffffffffffffff B The real System.map is in the linux-image-<version>-dbg package\n")
    vcpus = [{"cpu": c, "rip": "ffffffff8103fc9b", "halted": True} for c in range(3)]
    named = symbolize({"status": "running", "vcpus": vcpus}, smap)
    assert all("symbol" not in v for v in named["vcpus"])
    assert describe(named) == "QEMU running; vCPUs: 0-2 halted at ffffffff8103fc9b"
