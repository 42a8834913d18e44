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
from lab.vm.tcg.guest_clock import GuestClock, check_parallel_time


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
        RunOptions(quantum=2000)
    for bad in (-1, 1, 99, 100_000_001):
        with pytest.raises(LabError, match=rf"^--quantum: must be 0 \(one shared clock\) or 100\.\.100000000 ns, "
                           rf"got {bad}$"):  # fmt: skip
            RunOptions(clock="virtual", quantum=bad)
    assert RunOptions(clock="virtual", quantum=0).quantum == 0 and RunOptions(clock="virtual", quantum=100).quantum
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

    spec = matrix({"clock": "virtual", "qemu": "charge", "quantum": 2000})
    (run,) = spec.runs
    assert run_options_of(run, "a", None).quantum == 2000
    assert run_options_of(matrix({"clock": "virtual"}).runs[0], "a", None).quantum == 0
    with pytest.raises(LabError, match=r"--quantum: only with --clock virtual"):
        matrix({"quantum": 2000})
    with pytest.raises(LabError, match=r"settings\[0\]\.quantum"):
        matrix({"clock": "virtual", "quantum": -5})
