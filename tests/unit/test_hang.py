"""Where a timed-out VM was (lab.vm.hang): QEMU's real `info registers -a` output parsed, RIPs named from a
System.map, one line for the summary. The capture itself is proven on a real hung guest in test_vm_run.py."""

from __future__ import annotations

from pathlib import Path

from lab.vm.hang import add_busy, busy_shares, describe, kind, parse_registers, symbolize

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


def test_busy_shares_come_from_two_readings_of_cpu_time() -> None:
    # ns of CPU time before and after a 2 s window: 1.5 s, 0 s, more than the window (clamped), a vCPU gone.
    before = {0: 10_000_000_000, 1: 5_000_000_000, 2: 0, 3: 7}
    after = {0: 11_500_000_000, 1: 5_000_000_000, 2: 3_000_000_000}
    assert busy_shares(before, after, 2.0) == {0: 0.75, 1: 0.0, 2: 1.0}
    assert busy_shares(before, after, 0.0) == {}


def _state(*vcpus: tuple[bool, float]) -> dict:
    rip = "ffffffff81000000"
    return {"status": "running", "vcpus": [{"cpu": c, "rip": rip, "halted": h} for c, (h, _) in enumerate(vcpus)]}


def test_the_hang_is_sorted_by_what_the_vcpu_threads_did() -> None:
    """A RIP alone cannot tell a spinning guest from an emulator that stopped running it (a vCPU looping in
    one translated block shows one RIP at every look): the threads' CPU time can."""
    cases = {
        "guest-spinning": ((False, 0.4), (True, 0.0)),  # one vCPU not halted and running
        "guest-idle": ((True, 0.0), (True, 0.01)),  # all halted, whatever their threads did
        "emulator-stalled": ((False, 0.0), (False, 0.02), (True, 0.0)),  # not halted, threads not running
    }
    for want, vcpus in cases.items():
        state = add_busy(_state(*vcpus), {c: b for c, (_, b) in enumerate(vcpus)})
        assert state["kind"] == want, (want, state)
        assert kind(state) == want
    stalled = add_busy(_state((False, 0.0), (False, 0.0)), {0: 0.0, 1: 0.0})
    assert describe(stalled).endswith("; their threads did not run for 1 s: QEMU stopped running the guest")
    spinning = add_busy(_state((False, 0.9), (False, 0.0)), {0: 0.9, 1: 0.0})
    assert describe(spinning).endswith("; 0 busy: the guest spins")


def test_without_the_threads_cpu_time_the_hang_is_not_sorted() -> None:
    state = _state((False, 0.0), (True, 0.0))
    assert kind(state) is None and kind(None) is None
    partial = add_busy(_state((False, 0.5), (True, 0.0)), {0: 0.5})  # vCPU 1's thread was not read
    assert partial["kind"] is None
    assert describe(partial) == "QEMU running; vCPUs: 0 at ffffffff81000000; 1 halted at ffffffff81000000"


def test_a_timeout_says_what_the_vcpus_were_doing() -> None:
    from lab.run.status import Evidence, classify

    base = {"console_tail": "", "timed_out": True, "booted": True, "guest_done": False, "workload_rc": None,
            "trace_rc": None, "topology_problems": ()}  # fmt: skip
    assert classify(Evidence(**base, hang_kind="emulator-stalled")) == (
        "timeout",
        "the VM did not power off before the timeout; QEMU stopped running its vCPUs",
    )
    assert classify(Evidence(**base))[1] == "the VM did not power off before the timeout"
