"""--quantum: parallel guest time under --clock virtual (numalab's patched QEMU, images/qemu/0006): the -icount
option it passes, the record it writes, and the one-line refusals (docs/qemu.md, "Parallel guest time"). The
VM side is tests/vm/test_vm_parallel_time.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from common import assert_one_line_error, numalab

from lab.errors import LabError
from lab.matrix.definition import parse_matrix, run_options_of
from lab.run.options import RunOptions
from lab.vm.tcg.clock_options import ClockOptions
from lab.vm.tcg.guest_clock import PAUSE_NS, GuestClock, check_parallel_time, pause_ns_for


def _icount(clock: GuestClock) -> str:
    argv = clock.accel_args()
    return argv[argv.index("-icount") + 1]


def test_the_quantum_is_an_icount_option_and_in_the_record() -> None:
    assert _icount(GuestClock("virtual")) == "shift=0,sleep=off"  # (unchanged without it)
    assert _icount(GuestClock("virtual", quantum_ns=2000)) == "shift=0,sleep=off,quantum=2000"
    shared = GuestClock("virtual").to_dict()
    assert "parallel" not in shared and shared["shared_by"].startswith("the running vCPUs")
    par = GuestClock("virtual", seed=3, quantum_ns=2000).to_dict()
    assert par["parallel"]["quantum_ns"] == 2000 and "shared_by" not in par and par["seed"] == 3


def test_quantum_is_refused_where_it_means_nothing_or_cannot_be_had() -> None:
    with pytest.raises(LabError, match=r"^--quantum: only with --clock virtual"):
        RunOptions.of(quantum=2000)
    for bad in (-1, 1, 99, 100_000_001):
        with pytest.raises(LabError, match=rf"^--quantum: must be 0 \(one shared clock\) or 100\.\.100000000 ns, "
                           rf"got {bad}$"):  # fmt: skip
            RunOptions.of(clock="virtual", quantum=bad)
    assert RunOptions.of(clock="virtual", quantum=0).guest_time.quantum == 0
    assert RunOptions.of(clock="virtual", quantum=100).guest_time.quantum
    stock = SimpleNamespace(parallel_time=False, short_version="10.0.2", binary="/q/qemu-system-x86_64")
    with pytest.raises(LabError, match=r"^--quantum: QEMU 10\.0\.2 at /q/qemu-system-x86_64 has no parallel guest "
                       r"time \(numalab's patched QEMU: --qemu charge"):  # fmt: skip
        check_parallel_time(2000, stock)
    check_parallel_time(0, stock)
    check_parallel_time(2000, SimpleNamespace(parallel_time=True))
    assert_one_line_error(numalab("run", "--quantum", "2000", "--topology", "ring-2"),
                          "--quantum: only with --clock virtual")  # fmt: skip
    assert_one_line_error(numalab("run", "--clock", "virtual", "--quantum", "5", "--topology", "ring-2"),
                          "--quantum: must be 0 (one shared clock) or 100..100000000 ns, got 5")  # fmt: skip


def test_a_matrix_setting_takes_a_quantum_and_the_runs_check_it() -> None:
    def matrix(setting: dict) -> object:
        return parse_matrix({"name": "m", "topologies": ["ring-2"], "kernels": ["a"], "workloads": ["idle"],
                             "settings": [{"name": "p", **setting}], "repeats": 1}, "m.yaml", "m")  # fmt: skip

    spec = matrix({"clock": "virtual", "qemu": "charge", "quantum": 2000, "insns_per_ns": 4})
    (run,) = spec.runs
    assert run_options_of(run, "a", None).guest_time == ClockOptions("virtual", 0, 2000, 4)
    assert run_options_of(matrix({"clock": "virtual"}).runs[0], "a", None).guest_time.quantum == 0
    with pytest.raises(LabError, match=r"--quantum: only with --clock virtual"):
        matrix({"quantum": 2000})
    with pytest.raises(LabError, match=r"settings\[0\]\.quantum"):
        matrix({"clock": "virtual", "quantum": -5})
    with pytest.raises(LabError, match=r"settings\[0\]\.insns_per_ns"):
        matrix({"clock": "virtual", "insns_per_ns": 0})
    with pytest.raises(LabError, match=r"--insns-per-ns: must be 1\.\.64, got 99"):
        matrix({"clock": "virtual", "insns_per_ns": 99})


def test_insns_per_ns_is_an_icount_option_refused_where_it_means_nothing() -> None:
    fast = GuestClock("virtual", quantum_ns=2000, insns_per_ns=4)
    assert _icount(fast) == "shift=0,sleep=off,quantum=2000,ipns=4"
    assert fast.insn_per_guest_s == 4e9 and fast.to_dict()["insns_per_ns"] == 4
    assert "insns_per_ns" not in GuestClock("virtual").to_dict()
    with pytest.raises(LabError, match=r"^--insns-per-ns: only with --clock virtual"):
        RunOptions.of(insns_per_ns=4)
    for bad in (0, -2, 65):
        with pytest.raises(LabError, match=rf"^--insns-per-ns: must be 1\.\.64, got {bad}$"):
            RunOptions.of(clock="virtual", insns_per_ns=bad)
    slow = SimpleNamespace(parallel_time=True, fast_cpu=False, short_version="10.0.2", binary="/q/qemu")
    with pytest.raises(LabError, match=r"^--insns-per-ns: QEMU 10\.0\.2 at /q/qemu runs one instruction a guest ns"):
        check_parallel_time(0, slow, 4)
    check_parallel_time(0, slow, 1)
    assert_one_line_error(numalab("run", "--clock", "virtual", "--insns-per-ns", "99", "--topology", "ring-2"),
                          "--insns-per-ns: must be 1..64, got 99")  # fmt: skip


def test_a_pause_takes_guest_time_with_a_qemu_that_can() -> None:
    """images/qemu/0009: -icount ...,pause=NS with numalab's QEMU, nothing with another; in the record."""
    assert pause_ns_for(SimpleNamespace(pause_time=True)) == PAUSE_NS == 40
    assert pause_ns_for(SimpleNamespace(pause_time=False)) == 0 and pause_ns_for(None) == 0
    clock = GuestClock("virtual", quantum_ns=2000, insns_per_ns=4, pause_ns=PAUSE_NS)
    assert _icount(clock) == "shift=0,sleep=off,quantum=2000,ipns=4,pause=40"
    assert clock.to_dict()["pause_ns"] == 40
    plain = GuestClock("virtual")
    assert _icount(plain) == "shift=0,sleep=off" and "pause_ns" not in plain.to_dict()
