"""Coherence by LLC (issue 67): on a machine of several LLCs a node, a line's owner is an LLC, a move between two
LLCs of one node costs the spec's ``llc: transfer_ns:`` and one inside an LLC nothing; a machine of one LLC a node
is modelled by node exactly as before. The plugin is fed by the stand-in for QEMU (tests/data/plugin_harness.c);
tests/vm/test_vm_llc_coherence.py boots a real machine."""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from test_remote_latency import _but_lookups, _feed_model, _first_miss_ns, _topo, harness  # noqa: F401  (the harness fixture)

from lab.errors import LabError
from lab.run import remote_latency as rl
from lab.topology.model.ref import TopologyRef
from lab.topology.model.spec import load_spec
from lab.topology.model.topology import LlcCosts, topology_from_dict
from lab.topology.predictions.cpu_view import vcpu_llcs
from lab.vm.tcg import access_plugin as ap
from lab.vm.tcg.latency_model import LatencyModel, model_for

# Two vCPUs of node 0 (the harness feeds vCPU 0 and its peer, vCPU 1), node 0 of two LLCs, L = 100 ns, SLIT 20
ONE_NODE = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 0), chunk_ns=1000, clock="virtual", coherence=True,
                        node_llcs=(2, 1), vcpu_llcs=(0, 1), llc_transfer_ns=80.0)  # fmt: skip
COUNTER = 0x10000  # a line of node 0's memory


def _handed(harness, tmp_path: Path, model: LatencyModel, exe: str = "plugin_harness_line") -> tuple[list, dict]:  # noqa: F811
    """vCPU 0 and vCPU 1 increment one counter in turn (2 us of guest time a turn): per vCPU its counts."""
    env = {"HARNESS_QUANTUM_NS": "2000", "HARNESS_PEER": f"1:{COUNTER:x}", "HARNESS_RMW": "3"}
    s, out = _feed_model(harness, tmp_path, model, 0, COUNTER, 64, 100_000, harness[1].with_name(exe), stride=8,
                         env=env)  # fmt: skip
    return s["whole_run"]["per_vcpu"], out


def test_a_counter_handed_between_two_llcs_of_a_node_costs_the_llc_transfer(harness, tmp_path) -> None:  # noqa: F811
    args = ONE_NODE.plugin_args(Path("o"))
    assert args[-5:] == ["coherence=1", "coh_lines=524288", "vllc=0:0:0", "vllc=1:1:1", "llc_cost=0:80000"], args
    coherence = ONE_NODE.to_dict()["coherence"]
    assert coherence["owners"] == "llc" and coherence["llc_transfer_ns"] == [80.0, None], coherence
    results = []
    for exe in ("plugin_harness_charge", "plugin_harness_line"):
        rows, out = _handed(harness, tmp_path, ONE_NODE, exe)
        log = rl.read_log(tmp_path / "lat.txt")
        assert log.version == 6 and log.head["llcs"] == 2 and log.vcpu_llcs == [0, 1]
        assert sum(r["transfers"] for r in rows) == out["switches"] > 1000
        for v, r in enumerate(rows):
            # every transfer between the node's two LLCs, each 80 ns of the vCPU's guest time, paid at once
            assert r["transfers"] == r["llc_transfers"] > 0 and r["transfer_ns"] == r["llc_transfer_ns"]
            assert r["transfer_ns"] == r["transfers"] * 80 == r["charged_ns"] - _first_miss_ns(ONE_NODE, r), r
            assert out[f"vcpu_time_ns_{v}"] == 1_600_000 + r["charged_ns"]
        results.append((_but_lookups(rows), out["switches"]))
    assert results[0] == results[1]  # every access or the line callback's: the same
    # One LLC: the two vCPUs share it, nothing moves
    rows, out = _handed(harness, tmp_path, replace(ONE_NODE, vcpu_llcs=(0, 0)))
    assert [r["transfers"] for r in rows] == [0, 0]
    assert [out["vcpu_time_ns_0"], out["vcpu_time_ns_1"]] == [1_600_000 + _first_miss_ns(ONE_NODE, r) for r in rows]
    # By node (the model of one LLC a node): within a node nothing moves either, and the plugin is told no LLC
    rows, out = _handed(harness, tmp_path, replace(ONE_NODE, vcpu_llcs=()))
    assert [r["transfers"] for r in rows] == [0, 0] and rl.read_log(tmp_path / "lat.txt").head["llcs"] == 0
    # Across nodes with LLC owners: the pair's cost, as by node (2 x 100 ns), none of it between LLCs of a node
    apart = replace(ONE_NODE, vcpu_nodes=(0, 1))
    rows, out = _handed(harness, tmp_path, apart)
    assert all(r["transfers"] > 0 and r["transfer_ns"] == 200 * r["transfers"] and r["llc_transfers"] == 0
               for r in rows), rows  # fmt: skip


def test_a_transfer_between_llcs_is_the_spec_s_and_the_host_clock_s_extra_only(harness, tmp_path) -> None:  # noqa: F811
    dear = replace(ONE_NODE, llc_transfer_ns=150.0)
    rows, _ = _handed(harness, tmp_path, dear)
    assert all(r["transfer_ns"] == 150 * r["transfers"] > 0 for r in rows), rows
    free = replace(ONE_NODE, llc_transfer_ns=0.0)
    assert not any(a.startswith("llc_cost=") for a in free.plugin_args(Path("o")))
    rows, _ = _handed(harness, tmp_path, free)
    assert all(r["llc_transfers"] > 0 and r["transfer_ns"] == 0 for r in rows), rows  # moved, and free
    # Under the host's clock a line costs what TCG takes plus the extra over a local miss: below L, nothing
    host = replace(ONE_NODE, clock="host")
    assert host.llc_transfer_ps(0) == 0 and replace(host, llc_transfer_ns=250.0).llc_transfer_ps(0) == 150_000


def test_a_machine_of_one_llc_a_node_is_modelled_by_node_exactly_as_before() -> None:
    ring = TopologyRef("ring-2", cpus_per_node=2).load()
    for mib in (None, 8):
        m = model_for(ring, "slit", 100.0, "virtual", 10.0, 5000, coherence=True, coherence_mib=mib)
        assert m is not None and not m.llc_owners and m.vcpu_llcs == ()
        args = m.plugin_args(Path("o"))
        assert not any(a.startswith(("vllc=", "llc_cost=", "coh_llc=")) for a in args)
        assert args[-2:] == ["coherence=1", f"coh_lines={(mib or 32) * 16384}"]
        assert m.to_dict()["coherence"]["owners"] == "node" and "llc_transfer_ns" not in m.to_dict()["coherence"]
    genoa = TopologyRef("genoa-nps2", cpus_per_node=4).load()
    assert vcpu_llcs(genoa) == (0, 0, 1, 1, 2, 2, 3, 3)
    m = model_for(genoa, "slit", 100.0, "virtual", 10.0, 5000, coherence=True)
    assert m is not None and m.llc_owners
    args = m.plugin_args(Path("o"))
    assert [a for a in args if a.startswith(("vllc=", "llc_cost=", "coh_"))] == [
        "coh_lines=524288", "vllc=0:1:0", "vllc=2:3:1", "vllc=4:5:2", "vllc=6:7:3", "llc_cost=0:80000",
        "llc_cost=1:80000"]  # fmt: skip
    assert m.to_dict()["coherence"]["llc_transfer_ns"] == [80.0, 80.0]
    # coherence off: no owners at all, on any machine
    off = model_for(genoa, "slit", 100.0, "virtual", 10.0, 5000)
    assert off is not None and not off.llc_owners and off.vcpu_llcs == ()


def _spec(llc: object) -> dict:
    return {"name": "x", "nodes": 2, "cpus_per_node": 4, "memory_per_node": "256M", "llcs_per_node": 2,
            "distances": [[10, 20], [20, 10]], "llc": llc}  # fmt: skip


def test_the_spec_gives_the_llc_size_and_transfer_and_the_run_options_win() -> None:
    topo = load_spec(_spec({"size_mib": 16, "transfer_ns": 45.5}), "x.yaml")
    assert topo.llc == LlcCosts(16, 45.5) and topo.to_dict()["llc"] == {"size_mib": 16, "transfer_ns": 45.5}
    assert topology_from_dict(topo.to_dict()).llc == topo.llc  # (a manifest's copy)
    m = model_for(topo, "slit", 100.0, "virtual", coherence=True)
    assert m is not None and m.coherence_mib == 16 and m.llc_transfer_ps(0) == 45_500
    assert model_for(topo, "slit", 100.0, "virtual", coherence=True, coherence_mib=4).coherence_mib == 4  # type: ignore[union-attr]
    # a size alone keeps the default transfer; with_overrides (--cpus-per-node) keeps the spec's llc:
    half = load_spec(_spec({"size_mib": 8}), "x.yaml")
    assert half.llc_costs.transfer == 80.0 and half.with_overrides(cpus_per_node=2).llc == LlcCosts(8, None)
    assert "llc" not in TopologyRef("genoa-nps2").load().to_dict()  # (a spec without it: its records as before)


@pytest.mark.parametrize(
    ("llc", "needle"),
    [({"size_mib": 0}, "llc.size_mib"), ({"transfer_ns": -1}, "llc.transfer_ns"), ({"size": 4}, "llc"),
     ({"transfer_ns": "fast"}, "llc.transfer_ns"), ([1], "llc")],
)  # fmt: skip
def test_a_bad_llc_field_is_a_one_line_error_naming_it(llc, needle: str) -> None:
    with pytest.raises(LabError) as err:
        load_spec(_spec(llc), "x.yaml")
    assert "\n" not in str(err.value) and needle in str(err.value), err.value


@pytest.mark.parametrize(
    ("args", "needle"),
    [(["vllc=0:0:0"], "vllc needs coherence=1"),
     (["coherence=1", "vllc=0:0:0", "coh_node=0:64"], "coh_node with vllc"),
     (["coherence=1", "coh_llc=0:64"], "coh_llc needs vllc"),
     (["coherence=1", "llc_cost=0:5"], "llc_cost needs vllc"),
     (["coherence=1", "vnode=0:0:0", "vnode=1:1:1", "vllc=0:1:0"], "an LLC's vCPUs on two nodes"),
     (["coherence=1", "vllc=0:0:24"], "bad vllc"), (["coherence=1", "vllc=1:0:0"], "bad vllc"),
     (["coherence=1", "vllc=0:0:0", "llc_cost=0"], "bad llc_cost"),
     (["coherence=1", "vllc=0:0:0", "coh_llc=0:2147483648"], "bad coh_llc")],
)  # fmt: skip
def test_plugin_refuses_bad_llc_arguments(harness, tmp_path, args, needle: str) -> None:  # noqa: F811
    so, exe = harness
    proc = subprocess.run([str(exe), str(so), "0", "0", "64", "64", "1", "range=0:0:1000", "range=1:1000:2000",
                           f"lat_out={tmp_path / 'x'}", *args], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 1 and needle in proc.stderr, proc.stderr


def test_an_llc_s_own_size_ages_its_lines_out(harness, tmp_path) -> None:  # noqa: F811
    # vCPU 0 (LLC 0) writes 4 MiB once, then both read it twice; each LLC holds 1 MiB (coh_lines), or LLC 0 its own
    # 2 MiB (coh_llc=): only the lines LLC 0 wrote last, within what it holds, move from it to LLC 1.
    lines = 4 * 1024 * 1024 // 64
    small = replace(ONE_NODE, coherence_mib=1)
    env = {"HARNESS_QUANTUM_NS": "2000", "HARNESS_PEER": "1:10000", "HARNESS_INIT": "1"}
    exe = harness[1].with_name("plugin_harness_line")
    s, _ = _feed_model(harness, tmp_path, small, 0, 0x10000, 4 << 20, 2, exe, stride=8, env=env)
    assert [r["transfers"] for r in s["whole_run"]["per_vcpu"]] == [0, lines // 4 - 1]
    # an LLC's own size (coh_llc=; Python gives every LLC one size, the plugin takes each its own): LLC 0 holds
    # 2 MiB, so half the lines less one move
    out = tmp_path / "own.txt"
    parts = [r.arg() for r in ap.node_ranges(_topo(), "guest-physical")] + small.plugin_args(out) + ["coh_llc=0:32768"]
    proc = subprocess.run([str(exe), str(harness[0]), "0", "10000", str(4 << 20), "8", "2", *parts],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **env})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    per = rl.summarize(rl.read_log(out), None, None)["whole_run"]["per_vcpu"]
    assert [r["transfers"] for r in per] == [0, lines // 2 - 1]
