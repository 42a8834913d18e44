"""The instruments in one shape (lab.run.instrument, issue 67): each instrument checked before a boot, its plugin
arguments, its counts collected into the record, and the run going through the instruments it holds
(lab.run.instrument_set). No VM, no plugin build: small inputs (tests/unit/test_access_matrix.py and
test_remote_latency.py feed the real plugin)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from lab.errors import LabError
from lab.run import instrument_set
from lab.run.access_matrix import AccessMatrix
from lab.run.instrument import Instrument, Plan, Window
from lab.run.manifest import add_instrument
from lab.run.options import RunOptions
from lab.run.remote_latency import COHERENCE_SCALE, RemoteLatency
from lab.topology.model.spec import load_topology
from lab.topology.model.topology import Node, Topology
from lab.vm.qemu.emulator import Emulator
from lab.vm.tcg import access_plugin as ap
from lab.vm.tcg.clock_options import ClockOptions
from lab.vm.tcg.latency_options import LatencyOptions

S = 1_000_000_000
TCG = Plan("tcg", "qemu")
STOCK = Emulator("/q", "QEMU emulator version 10.0.2", ())
CHARGE = replace(STOCK, charges_time=True, vcpu_clock=True)


def _two_nodes() -> Topology:
    return Topology("t", (Node(0, 1, 256), Node(1, 1, 256)), ((10, 20), (20, 10)))


def _plugin(workdir: Path) -> ap.AccessPlugin:
    return ap.AccessPlugin("file=x", workdir, 1, "ram-block", "QEMU emulator version 7.2.22", ())


def _charge(clock: str = "virtual", **latency) -> RemoteLatency:
    charge = RemoteLatency.asked(LatencyOptions("slit", **latency), ClockOptions(clock, quantum=2000), _two_nodes())
    assert charge is not None
    return charge


def test_every_instrument_has_the_one_shape() -> None:
    members = ("key", "from_workload", "host_time_scale", "check", "plugin_args", "collect")
    for instrument in (AccessMatrix(_two_nodes(), 64), _charge()):
        typed: Instrument = instrument  # (the Protocol, for the type checker)
        assert all(hasattr(typed, m) for m in members), instrument
    assert (AccessMatrix.key, RemoteLatency.key) == ("access_matrix", "remote_latency")


def test_the_access_matrix_is_checked_before_a_boot() -> None:
    matrix = AccessMatrix(_two_nodes(), 64)
    matrix.check(TCG)
    matrix.check(Plan(None, "qemu"))  # (--accel auto: not known yet)
    for plan, needle in (
        (Plan("kvm", "qemu"), r"^--access-matrix: needs TCG \(the plugin sees no access under kvm\); add --accel tcg$"),
        (Plan("tcg", "libvirt", "qemu+ssh://h/system"), r"^--access-matrix: not with the remote libvirt host "),
        (Plan("tcg", "qemu", clock="virtual", emulator=STOCK), r"^--access-matrix with --clock virtual: QEMU 10.0"),
    ):
        with pytest.raises(LabError, match=needle):
            matrix.check(plan)
    matrix.check(Plan("tcg", "qemu", clock="virtual", emulator=CHARGE))
    with pytest.raises(LabError, match=r"^--access-sample: must be >= 1, got 0$"):
        AccessMatrix(_two_nodes(), 0).check(TCG)


def test_the_access_matrix_arguments_and_its_counts_in_the_record(tmp_path) -> None:
    matrix = AccessMatrix.asked(RunOptions.of(access_matrix=True, access_sample=8).access, _two_nodes())
    assert matrix is not None and AccessMatrix.asked(RunOptions().access, _two_nodes()) is None
    assert matrix.plugin_args(Path("/w")) == ["out=/w/access-matrix.txt", "sample=8"]
    assert not matrix.from_workload and matrix.host_time_scale == 1.0
    work, run = tmp_path / "work", tmp_path / "run"
    work.mkdir()
    run.mkdir()
    head = ["numalab-access-matrix 1", "api 1", "sample 8", "interval_ms 200", "vcpus 2", "nodes 2",
            "range 0 0x0 0x10000000", "range 1 0x10000000 0x20000000"]  # fmt: skip
    snaps = [f"snap {10 * S} " + " ".join(["0"] * 10), f"end {12 * S} 90 10 0 0 0 0 100 0 0 0"]
    (work / "access-matrix.txt").write_text("\n".join(head + snaps) + "\n")
    got = matrix.collect(run, _plugin(work), Window(10 * S, 12 * S, 2.0))
    assert got.key == "access_matrix" and got.failure is None and got.section["problem"] is None
    assert got.section["plugin"] == {"sample": 8, "plugin_api": 1, "address_mode": "ram-block",
                                     "qemu_version": "QEMU emulator version 7.2.22", "ranges": []}  # fmt: skip
    assert got.section["local_pct"] == 95.0 and got.section["guest_clock_ratio"] == 1.0
    assert set(got.files) == {"access-matrix.json", "access-matrix.txt"}
    assert json.loads((run / "access-matrix.json").read_text()) == got.section
    # no counts: a problem that fails an otherwise good run
    (tmp_path / "run2").mkdir()
    missing = matrix.collect(tmp_path / "run2", _plugin(tmp_path / "none"), Window())
    assert missing.failure is not None and missing.failure[0] == "access-map-mismatch"
    manifest = {"status": "ok", "reason": "", "files": ["manifest.json"]}
    add_instrument(manifest, missing)
    assert manifest["status"] == "access-map-mismatch" and manifest["access_matrix"] is missing.section


def test_the_memory_charge_is_checked_before_a_boot() -> None:
    charge = _charge()
    charge.check(Plan("tcg", "qemu", clock="virtual", emulator=CHARGE))
    charge.check(Plan(None, "qemu", clock="virtual"))  # (the QEMU not known yet)
    for plan, needle in (
        (Plan("kvm", "qemu"), r"^--remote-latency: needs TCG"),
        (Plan("tcg", "libvirt"), r"^--remote-latency: only with --backend qemu$"),
        (Plan("tcg", "qemu", clock="virtual", emulator=STOCK), r"cannot charge the guest's clock"),
        (Plan("tcg", "qemu", clock="virtual", emulator=replace(CHARGE, vcpu_clock=False)), r"a vCPU's own guest time"),
    ):
        with pytest.raises(LabError, match=needle):
            charge.check(plan)
    # without streams, a QEMU that cannot tell a vCPU's time will do
    _charge(remote_bandwidth_gbs=0).check(
        Plan("tcg", "qemu", clock="virtual", emulator=replace(CHARGE, vcpu_clock=False))
    )
    # what the machine cannot have is said when the charge is made
    with pytest.raises(LabError, match=r"^--remote-latency table: topology t has no latency_ratio: matrix"):
        RemoteLatency.asked(LatencyOptions("table"), ClockOptions(), _two_nodes())
    assert RemoteLatency.asked(LatencyOptions(), ClockOptions(), _two_nodes()) is None


def test_the_memory_charge_and_its_coherence_give_the_plugin_the_models_arguments(tmp_path) -> None:
    charge, coherent = _charge(), _charge(coherence="on")
    assert charge.plugin_args(Path("/w")) == charge.model.plugin_args(Path("/w/remote-latency.txt"))
    assert charge.plugin_args(Path("/w"))[0] == "lat_out=/w/remote-latency.txt" and charge.from_workload
    assert "coherence=1" not in charge.plugin_args(Path("/w")) and charge.host_time_scale == 1.0
    assert coherent.plugin_args(Path("/w"))[-2:] == ["coherence=1", "coh_lines=524288"]
    assert coherent.host_time_scale == COHERENCE_SCALE and not _charge("host").from_workload
    # coherence by LLC: the LLC level is the charge's too (genoa-nps2: two LLCs a node)
    genoa = RemoteLatency.asked(LatencyOptions("slit", coherence="on"), ClockOptions("virtual"),
                                load_topology("genoa-nps2"))  # fmt: skip
    assert genoa is not None and "llc_cost=0:80000" in genoa.plugin_args(Path("/w"))
    # its counts missing: the record says so, and the run fails
    (tmp_path / "run").mkdir()
    got = charge.collect(tmp_path / "run", _plugin(tmp_path / "none"), Window())
    assert got.key == "remote_latency" and got.section["model"] == charge.model.to_dict()
    assert got.failure is not None and got.failure[1].startswith("remote latency: ")


def test_a_run_holds_the_instruments_its_options_ask_for_in_the_manifests_order(tmp_path) -> None:
    topo = _two_nodes()
    assert instrument_set.instruments_of(RunOptions(), topo) == ()
    both = instrument_set.instruments_of(
        RunOptions.of(access_matrix=True, remote_latency="slit", clock="virtual", accel="tcg"), topo
    )
    assert [i.key for i in both] == ["access_matrix", "remote_latency"] and instrument_set.from_workload(both)
    instrument_set.check(both, Plan("tcg", "qemu", clock="virtual", emulator=CHARGE))
    with pytest.raises(LabError, match=r"^--access-matrix with --clock virtual"):
        instrument_set.check(both, Plan("tcg", "qemu", clock="virtual", emulator=STOCK))
    # no instrument, no plugin; no plugin, no counts
    assert instrument_set.build_plugin((), topo, tmp_path, "QEMU emulator version 7.2.22") is None
    assert instrument_set.collect(both, tmp_path, None, Window()) == ()
    # the plugin's one -plugin value: the access matrix's options, the interval and the map, then the charge's
    args = [a for i in both for a in i.plugin_args(Path("/w"))]
    value = ap.plugin_argument(Path("/p.so"), ap.node_ranges(topo, "ram-block"), args)
    assert value.startswith("file=/p.so,out=/w/access-matrix.txt,sample=64,interval_ms=200,range=0:0:10000000,")
    assert ",range=1:20000000:30000000,lat_out=/w/remote-latency.txt," in value


def test_the_summary_has_each_instruments_line() -> None:
    manifest = {"access_matrix": {"local_pct": 88.3, "accesses": 1234, "plugin": {"sample": 64}},
                "remote_latency": {"problem": "remote latency: no file"}}  # fmt: skip
    lines = instrument_set.summary_lines(manifest)
    assert (
        len(lines) == 2 and "access-local=88.3%" in lines[0] and lines[1] == "  remote latency: remote latency: no file"
    )
    assert instrument_set.summary_lines({}) == []
