"""Runs that repeat exactly under --clock virtual: no host-timed input reaches the guest (the RTC on the
guest's clock from a fixed date, the 9p queue served in the vCPU's thread), and --seed chooses the trajectory,
repeat i getting seed + i on both sides of an A/B (docs/qemu.md, "Runs that repeat exactly")."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from common import BOOT, HOST, assert_one_line_error, numalab

from lab.analysis.trajectory import fingerprint
from lab.errors import LabError
from lab.kernel.resolve import Kernel
from lab.matrix.definition import parse_matrix, run_options_of
from lab.placement.pinning import plan_placement
from lab.run import batch as batch_mod
from lab.run.options import RunOptions
from lab.topology.model.ref import TopologyRef
from lab.topology.model.spec import load_topology
from lab.trace.tracedat import Event
from lab.vm.qemu.charge_series import is_current, prefix_name, series
from lab.vm.qemu.emulator import find_binary
from lab.vm.qemu.qemu_argv import qemu_argv
from lab.vm.tcg.guest_clock import MAX_SEED, GuestClock


def _opt(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_the_virtual_clock_starts_the_rtc_at_the_seeds_date_on_the_guests_clock() -> None:
    assert "-rtc" not in GuestClock().accel_args()  # the host's clock: QEMU's default RTC, as before
    assert GuestClock().kernel_args() == "" and "seed" not in GuestClock().to_dict()
    zero, seven = GuestClock("virtual"), GuestClock("virtual", seed=7)
    assert _opt(zero.accel_args(), "-rtc") == ["base=2026-01-01T00:00:00,clock=vm"]
    assert _opt(seven.accel_args(), "-rtc") == ["base=2026-01-01T00:00:07,clock=vm"]
    assert _opt(GuestClock("virtual", seed=86400 + 61).accel_args(), "-rtc") == ["base=2026-01-02T00:01:01,clock=vm"]
    assert seven.kernel_args() == "numalab.seed=7"
    assert seven.to_dict()["seed"] == 7 and seven.to_dict()["rtc_base"] == "2026-01-01T00:00:07"
    # the largest seed is still a date QEMU and the kernel take
    assert GuestClock("virtual", seed=MAX_SEED).rtc_base().startswith("2057-")


def test_the_9p_queue_is_served_in_the_vcpus_thread_under_the_virtual_clock() -> None:
    """ioeventfd=off: the guest's notify runs the device in the vCPU's thread (with numalab's QEMU the whole
    request, images/qemu/0004), not in the main loop at a host-timed instant."""
    topo = load_topology("ring-2")
    placement = plan_placement(topo, HOST)
    for boot in (replace(BOOT, clock=GuestClock("virtual")), replace(BOOT, clock=GuestClock("virtual"),
                                                                      host_share="/")):  # fmt: skip
        devices = [d for d in _opt(qemu_argv(topo, placement, boot), "-device") if d.startswith("virtio-9p-pci")]
        assert devices and all(d.endswith(",ioeventfd=off") for d in devices)
    plain = qemu_argv(topo, placement, replace(BOOT, host_share="/"))
    assert all("ioeventfd" not in d for d in _opt(plain, "-device"))
    assert "-rtc" not in plain


def test_seed_is_refused_where_it_would_choose_nothing() -> None:
    with pytest.raises(LabError, match=r"^--seed: only with --clock virtual"):
        RunOptions.of(seed=1)
    with pytest.raises(LabError, match=r"^--seed: must be 0\.\.999999999 \(with --repeat 1\), got -1$"):
        RunOptions.of(clock="virtual", seed=-1)
    with pytest.raises(LabError, match=r"^--seed: must be 0\.\.999999997 \(with --repeat 3\), got 999999998$"):
        RunOptions.of(clock="virtual", seed=MAX_SEED - 2, repeat=3)
    assert_one_line_error(numalab("run", "--seed", "3", "--topology", "ring-2"), "--seed: only with --clock virtual")
    assert RunOptions.of(clock="virtual").guest_time.seed_of(2) == 2
    assert RunOptions.of(clock="virtual", seed=40).guest_time.seed_of(2) == 42


def test_repeats_get_consecutive_seeds_and_both_kernels_the_same(monkeypatch, tmp_path: Path) -> None:
    """An A/B batch: A B A B with seeds 5 5 6 6, so the sides differ by kernel, not by trajectory."""
    image = tmp_path / "bzImage"
    image.write_bytes(b"")
    monkeypatch.setattr(batch_mod, "resolve_kernel", lambda name: Kernel(name, image, None, None, "6.1"))
    fake = SimpleNamespace(name="qemu", emulator=None, firmware_rom=lambda _f: "", check_machine=lambda _t: None,
                           emulator_version=lambda: "QEMU emulator version 10.0.2")  # fmt: skip
    monkeypatch.setattr(batch_mod, "backend_of", lambda _opts: fake)
    opts = RunOptions.of(topology=TopologyRef("ring-2"), kernels=("a", "b"), workload="idle", repeat=2,
                      clock="virtual", seed=5, out=tmp_path / "ab")  # fmt: skip
    reqs = batch_mod.requests_from_options(opts, lambda _m: None)
    assert [(r.kernel.name, r.clock.seed) for r in reqs] == [("a", 5), ("b", 5), ("a", 6), ("b", 6)]
    assert all(r.clock.virtual for r in reqs)
    default = batch_mod.requests_from_options(opts.replaced(seed=None, out=tmp_path / "ab2"), lambda _m: None)
    assert [r.clock.seed for r in default] == [0, 0, 1, 1]


def test_a_matrix_repeat_is_its_seed_in_every_cell() -> None:
    spec = parse_matrix(
        {"name": "m", "topologies": ["ring-2"], "kernels": ["a", "b"], "workloads": [{"name": "idle", "duration": 2}],
         "settings": [{"name": "v", "clock": "virtual", "qemu": "backports"}, {"name": "h"}], "repeats": 2},
        "m.yaml", "m",
    )  # fmt: skip
    seeds = {
        (r.kernel.name, r.setting.name, r.repeat): run_options_of(r, r.kernel.name, None).guest_time.seed
        for r in spec.runs
    }
    assert seeds == {("a", "v", 1): 0, ("b", "v", 1): 0, ("a", "v", 2): 1, ("b", "v", 2): 1,
                     ("a", "h", 1): None, ("b", "h", 1): None, ("a", "h", 2): None, ("b", "h", 2): None}  # fmt: skip


def _charge_build(cache: Path, name: str) -> Path:
    binary = cache / "qemu-charge" / name / "usr" / "bin" / "qemu-system-x86_64"
    binary.parent.mkdir(parents=True)
    binary.write_bytes(b"\x7fELF stand-in")
    binary.chmod(0o755)
    (cache / "qemu-charge" / name / ".complete").touch()
    return binary


def test_qemu_charge_is_the_build_of_the_current_patch_series_and_no_other(tmp_path: Path, monkeypatch) -> None:
    """Two builds of one QEMU version in the cache (another series is one without 0004, whose runs do not
    repeat): --qemu charge runs the current series' build, and without it says so instead of guessing."""
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    old = _charge_build(tmp_path, "10.0.2+numalab.0123456789")
    with pytest.raises(LabError, match=r"^--qemu charge: numalab's patched QEMU of this patch series \(images/qemu; "
                       r"the cache has builds of others\) is not built yet; run make setup-qemu-charge$"):  # fmt: skip
        find_binary("charge")
    current = _charge_build(tmp_path, prefix_name("10.0.2"))
    assert find_binary("charge") == str(current) != str(old)
    assert is_current(current.parents[2]) and not is_current(old.parents[2])
    assert any(p.name.startswith("0004-9pfs") for p in series())


def test_the_trajectory_fingerprint_says_which_part_of_a_path_differs(tmp_path: Path) -> None:
    out = tmp_path / "workload.out"
    out.write_text('NUMALAB_RESULT {"gbps": 8.6}\n')
    move = Event(1.234567891, 2, "numa01", 147, "sched_move_numa", {"pid": "147", "src_cpu": "2", "dst_cpu": "0"})
    vm0, vm1 = {"numa_hint_faults": 10, "numa_pages_migrated": 0}, {"numa_hint_faults": 2207, "numa_pages_migrated": 3}
    one = fingerprint([move], vm0, vm1, out)
    assert set(one) == {"path", "events", "vmstat", "workload"}
    assert one == fingerprint([move], dict(vm0), dict(vm1), out)
    later = fingerprint([replace(move, ts=1.234567892)], vm0, vm1, out)  # one event a nanosecond later
    assert later["events"] != one["events"] and later["path"] != one["path"]
    assert (later["vmstat"], later["workload"]) == (one["vmstat"], one["workload"])
    other = fingerprint([move], vm0, {**vm1, "numa_pages_migrated": 1026}, out)
    assert other["vmstat"] != one["vmstat"] and other["events"] == one["events"]
    no_trace = fingerprint(None, vm0, vm1, out)  # a --no-trace run: the parts it has
    assert set(no_trace) == {"path", "vmstat", "workload"} and no_trace["path"] != one["path"]
    assert fingerprint(None, {}, {}, tmp_path / "none") == {}
