"""Linux 7.3 (Debian's linux-source-7.3, ``--source debian:7.3``) on the machines of 2026 (issue 65): it builds with
the default fragments (7.x's NUMA_BALANCING needs NUMA_MIGRATION; SYSCTL carries /proc/sys), boots, writes
/proc/schedstat version 17 (the domain's name before its mask) and passes the topology checks, and its
cache-aware scheduling (SCHED_CACHE) is on exactly where numalab predicts; then issue 65's known answers 2 to 4:
a process gathered on one LLC only with llc_balancing on, NUMA balancing against the LLC, and numalab ab from a
7.3 git tree deciding a cache-aware default in the per-LLC view.

The kernel is tests/kernel/conftest.py's v73 (cold 5.5 to 6 minutes here on a quiet machine); kernel_repo_73 is its
source as a git tree (about a minute to make). Cached, the file takes two and a half minutes: six short boots, one
traced numa01 run, two, four and six short traced runs of a two-thread process, and the ab's patched kernel (an
incremental build of fair.c): 2m23s here beside a running make test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import REPO, numalab, static_workload

ONE_NODE = """name: one-node
description: One node of four CPUs that share one LLC.
nodes: 1
cpus_per_node: 4
memory_per_node: 512M
distances: [[10]]
"""


GATHER = (REPO / "tests" / "data" / "gather.yaml").read_text()  # (the fidelity tier's LLC answer runs it too)
# One node of two LLCs of 4 CPUs: the kernel gives no LLC preference to a process whose running threads, times the
# SMT threads a core, do not fit 80% of the LLC's CPUs (invalid_llc_nr: fits_capacity(nr_running_avg * smt,
# llc_size)), so two busy threads need LLCs of 3 CPUs or more.
ONE_NODE_2LLC = (REPO / "tests" / "data" / "one-node-2llc.yaml").read_text()


# The process of known answers 2 to 4: threads that share memory, started on the CPUs named and then free
# (tests/fidelity/test_fidelity_llc.py runs it too).
THREADS_C = (REPO / "tests" / "data" / "workloads" / "threads.c").read_text()
NUMALLC = """\
name: numallc
description: two threads started on node 0's two LLCs, over 4 MiB first touched on node 1
command: ./threads {duration} 4096 6 0 3
files: [threads]
results:
  regex: {loops: '^loops (\\d+)$'}
metrics:
  - {name: loops, unit: passes, higher_is_better: true}
"""
# Two nodes of two LLCs of 3 CPUs (LLCs of 3: two busy threads fit 80% of one).
TWO_NODE_2LLC = """name: two-node-2llc
description: Two nodes of 6 CPUs, each in two LLCs of 3.
nodes: 2
cpus_per_node: 6
memory_per_node: 512M
packages: 2
llcs_per_node: 2
distances: [[10, 21], [21, 10]]
"""


def _workload(tmp_path: Path, yaml_text: str) -> Path:
    """THREADS_C built static beside a workload file that runs it as the YAML says (threads.yaml)."""
    return static_workload(tmp_path, "threads", THREADS_C, yaml_text)


def _idle(tmp_path: Path, topology: str, *args: str) -> dict:
    out = tmp_path / Path(topology).stem
    proc = numalab("run", "--kernel", "v7.3", "--topology", topology, "--workload", "idle", "--duration", "1",
                   "--no-trace", "--out", str(out), "--json", "--timeout", "120", *args, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "ok" and m["guest_topology_ok"] is True, (topology, m["guest_topology"]["problems"])
    return m


@pytest.mark.vm
@pytest.mark.kernel_build
def test_73_says_cache_aware_scheduling_is_on_where_numalab_predicts(tmp_path, v73) -> None:
    """Known answer 1: on every machine of several CPUs an LLC and a wider parent (two nodes of one LLC each
    included: ring-2) the kernel logs ``enabling cache aware scheduling``; on one node whose one LLC is all of it,
    ``not supported on this platform``; the record holds the prediction beside the kernel's word, and the runs are
    ok, schedstat 17 read, the SNC-3 machine's NUMA levels those of 7.x's fix."""
    assert v73["release"].startswith("7.3.") and v73["release"].endswith("-numalab"), v73["release"]
    assert v73["source"]["debian"]["package"] == "linux-source-7.3", v73["source"]
    one = tmp_path / "one-node.yaml"
    one.write_text(ONE_NODE)
    runs = {Path(t).stem: _idle(tmp_path, t) for t in ("ring-2", "genoa-nps2", "spr-2s-2llc", "gnr-2s-snc3",
                                                       "memoryless-3", "tiered-2s-cxl", str(one))}  # fmt: skip
    said = {name: (m["guest_topology"]["sched_cache"]["predicted"], m["guest_topology"]["sched_cache"]["kernel"])
            for name, m in runs.items()}  # fmt: skip
    assert said == {"ring-2": ("enabling", "enabling"), "genoa-nps2": ("enabling", "enabling"),
                    "spr-2s-2llc": ("enabling", "enabling"), "gnr-2s-snc3": ("enabling", "enabling"),
                    "memoryless-3": ("enabling", "enabling"), "tiered-2s-cxl": ("enabling", "enabling"),
                    "one-node": ("not supported", "not supported")}, said  # fmt: skip
    # the CXL-like slow nodes came online (above 4 GiB: their whole SRAT range is kmem's) in the tier 6.7 and
    # later give them from the HMAT, not 6.1's default dax tier
    tiers = runs["tiered-2s-cxl"]["guest_topology"]["readback"]["memory_tiers"]["tiers"]
    assert tiers == {"memory_tier4": "0-1", "memory_tier28": "2-3"}, tiers
    domains = {p: [(d["name"], d["cpus"]) for d in m["guest_topology"]["sched_domains"]["0"]] for p, m in runs.items()}
    assert domains["genoa-nps2"] == [("MC", "0-1"), ("NODE", "0-3"), ("NUMA", "0-7")]  # (schedstat 17's own names)
    assert domains["one-node"] == [("MC", "0-3")]
    # the SNC-3 fix (commit 4d6dd05d07d0): the scheduler averages the other socket's distances, so 7.3 builds three
    # NUMA levels where 6.1 and 6.12 build five, and logs no complaint
    assert domains["gnr-2s-snc3"] == [("MC", "0-1"), ("NUMA", "0-3"), ("NUMA", "0-5"), ("NUMA", "0-11")]
    assert runs["gnr-2s-snc3"]["guest_topology"]["kernel_complaints"] == []
    # the LLC's size, as the guest's cacheinfo gives it (QEMU's CPU model's L3, the same for every machine here)
    assert set(runs["genoa-nps2"]["guest_topology"]["sched_cache"]["llc_sizes"]) == {"0-1", "2-3", "4-5", "6-7"}


@pytest.mark.vm
@pytest.mark.kernel_build
def test_73_traces_numa_balancing_with_cache_aware_scheduling_turned_off(tmp_path, v73) -> None:
    """A traced numa01 run on genoa-nps2 with ``--knob llc_balancing/enabled=0``: the knob holds from the workload's
    start to its end (the record's sched_cache start and end), /proc/sys is there (numa_balancing read back as
    set), NUMA balancing migrates pages and the trace is read."""
    out = tmp_path / "numa01"
    proc = numalab("run", "--kernel", "v7.3", "--topology", "genoa-nps2", "--workload", "numa01", "--duration", "4",
                   "--knob", "llc_balancing/enabled=0", "--out", str(out), "--json", "--timeout", "300",
                   timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "ok" and m["guest_topology_ok"] is True, m["guest_topology"]["problems"]
    cache = m["guest_topology"]["sched_cache"]
    assert cache["kernel"] == "enabling" and cache["start"]["enabled"] == 0 and cache["end"]["enabled"] == 0, cache
    assert set(cache["start"]) == {"enabled", "aggr_tolerance", "epoch_period", "epoch_affinity_timeout",
                                   "overaggr_pct", "imb_pct"}, cache  # fmt: skip
    assert "numa_balancing 1" in m["settings"]["readback"], m["settings"]["readback"]
    assert (out / "uname.txt").read_text().startswith("7.3.")
    vmstat = m["metrics"]["vmstat"]
    assert m["metrics"]["trace_records"] > 0 and vmstat["numa_pages_migrated"] > 0, vmstat


@pytest.mark.vm
@pytest.mark.kernel_build
def test_73_gathers_a_process_on_one_llc_only_with_llc_balancing_on(tmp_path, v73) -> None:
    """Known answer 2: two threads sharing 256 KiB, started on a node's two LLCs and then free, end on one LLC with
    ``llc_balancing/enabled`` 1 and stay spread with 0. Measured here (4 s runs, the share of the workload's time
    on the LLC it used most, each second): on 0.72 0.78 in the first second (0.3 s held apart), then 1.0 from the
    second on, 0.9998 and 1.0 over the second half; off 0.50 throughout, 0.5001 and 0.5001 (two runs each)."""
    workload = _workload(tmp_path, GATHER)
    machine = tmp_path / "one-node-2llc.yaml"
    machine.write_text(ONE_NODE_2LLC)
    shares, by_second = {}, {}
    for enabled in (1, 0):
        out = tmp_path / f"llc{enabled}"
        proc = numalab("run", "--kernel", "v7.3", "--topology", str(machine), "--workload", str(workload),
                       "--duration", "4", "--knob", f"llc_balancing/enabled={enabled}", "--out", str(out), "--json",
                       "--timeout", "300", timeout=600)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        m = json.loads(proc.stdout)
        assert m["status"] == "ok" and m["guest_topology_ok"] is True, m["guest_topology"]["problems"]
        assert m["guest_topology"]["sched_cache"]["kernel"] == "enabling"
        residency = m["metrics"]["numa"]["llc"]["residency"]
        assert residency["tasks"] == 2, residency  # (the main thread is a worker: no idle waiter)
        shares[enabled] = residency["one_llc_share_late"]
        by_second[enabled] = residency["one_llc_share"][1:]  # (the first second holds them apart 0.3 s)
        print(f"7.3 llc_balancing/enabled={enabled}: one-LLC share by second {residency['one_llc_share']}")
    # on: on one LLC over the second half, or gathered whole in some second after the first and more on one LLC over
    # the second half than off by a clear margin; off: spread. (The second way since 2026-11-29: a warm make test that
    # day gathered in the second second, [0.67, 1.0, 0.73, 0.85, 1.0], so 0.82 over the second half, under the
    # host's clock; under the model the same process stays gathered, tests/fidelity/test_fidelity_llc.py.)
    # (under load a gathered process may be pulled apart again for a while: a make test of 2026-11-29 saw 0.85, 0.97,
    # 0.85, 0.50 by second with it on, 0.50 throughout with it off)
    gathered = max(by_second[1]) >= 0.95 and shares[1] >= shares[0] + 0.2
    assert shares[1] >= 0.9 or gathered, (shares, by_second)
    assert shares[0] <= 0.6, (shares, by_second)


AB_PATCH = (
    Path(__file__).resolve().parents[2] / "kernel-configs" / "patches" / "known-answer-sched-cache-no-aggregation.patch"
)  # noqa: E501


@pytest.mark.vm
@pytest.mark.kernel_build
def test_ab_from_a_73_tree_decides_a_cache_aware_default_in_the_llc_view(tmp_path, kernel_repo_73) -> None:
    """Known answer 4: ``numalab ab`` from a git tree at 7.3 with a one-line patch to a cache-aware knob's default
    (``llc_aggr_tolerance`` 1 -> 0: no process fits an LLC, none is gathered) decides the A/B in the per-LLC view:
    the workload's one-LLC share over the second half is 100% on the base and 50% patched, "changed",
    significant. The base shares the v7.3 build's tree and warm build directory (the same files); the patch
    recompiles fair.c."""
    workload = _workload(tmp_path, GATHER)
    machine = tmp_path / "one-node-2llc.yaml"
    machine.write_text(ONE_NODE_2LLC)
    proc = numalab("ab", str(kernel_repo_73), "--base", "v7.3-debian", "--patch", str(AB_PATCH), "--topology",
                   str(machine), "--workload", str(workload), "--duration", "4", "--decide",
                   "llc.one_llc_share_late_pct", "--max-pairs", "4", "--out", str(tmp_path / "ab"),
                   timeout=3600)  # fmt: skip
    said = (proc.stdout + proc.stderr).splitlines()
    assert proc.returncode == 0, "\n".join(said[-40:])
    verdict = next(ln for ln in said if ln.startswith("verdict: llc.one_llc_share_late_pct: "))
    assert "changed" in verdict and "significant" in verdict and "not significant" not in verdict, verdict
    runs = sorted((tmp_path / "ab").glob("*/manifest.json"))
    shares = {}
    for path in runs:
        m = json.loads(path.read_text())
        assert m["status"] == "ok", m.get("reason")
        side = m["kernel"]["name"]
        shares.setdefault(side, []).append(m["metrics"]["numa"]["llc"]["residency"]["one_llc_share_late"])
    print(f"7.3 ab, one-LLC share over the second half: {shares}")
    assert len(shares) == 2, shares
    base = min(shares, key=len)  # (ab-BASE12 and ab-BASE12-PATCHES)
    patched = max(shares, key=len)
    # the base gathers the process on one LLC, the patched kernel never (two LLCs: 0.5); when the base gathers varies
    # with the host's load: one base run of a make test (2026-11-29) was on one LLC 0.8835 of the second half
    assert min(shares[base]) >= 0.75 and max(shares[patched]) <= 0.6, shares


@pytest.mark.vm
@pytest.mark.kernel_build
def test_73_numa_balancing_brings_the_memory_and_cache_aware_scheduling_gathers_the_threads(tmp_path, v73) -> None:
    """Known answer 3: two nodes of two LLCs; a process whose 4 MiB is on node 1 and whose two threads start on
    node 0's two LLCs (8 s runs). Measured here (docs/kernels.md has the table):

    * NUMA balancing off: the memory stays on node 1; with llc_balancing on the threads end on one LLC of node 0
      (0.995-1.0 of the second half), off they stay spread over two LLCs (0.500), on node 0 in 5 of 10 runs, one
      a node in 4, both moved to node 1 by the load balancer in 1.
    * NUMA balancing on: in 12 runs of 14 with llc_balancing on, it brought the memory to the threads (1,004-1,393
      pages migrated, most in the first second) and they were gathered on one LLC (0.909-1.0), later than without
      NUMA balancing (from the 3rd to the 6th second against the 2nd or 3rd); in 2 runs it also moved one thread
      to node 1 and the two stayed apart, one a node (0.500): get_pref_llc() drops a thread's LLC preference
      while its NUMA preferred node is not the LLC's, so the preferred node wins. With llc_balancing off they
      stayed spread every time (0.500, 13 runs).

    The test holds NUMA balancing off as measured, and with it on: off spread; on, gathered (over the second half,
    or in the last two seconds) unless NUMA balancing split the threads over the nodes (each node 15% or more of
    their time, after a sched_move_numa)."""
    workload = _workload(tmp_path, NUMALLC)
    machine = tmp_path / "two-node-2llc.yaml"
    machine.write_text(TWO_NODE_2LLC)
    for balancing in ("off", "on"):
        for enabled in (1, 0):
            out = tmp_path / f"numa-{balancing}-llc{enabled}"
            proc = numalab("run", "--kernel", "v7.3", "--topology", str(machine), "--workload", str(workload),
                           "--duration", "8", "--numa-balancing", balancing, "--knob",
                           f"llc_balancing/enabled={enabled}", "--out", str(out), "--json", "--timeout", "400",
                           timeout=600)  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-3000:]
            m = json.loads(proc.stdout)
            assert m["status"] == "ok" and m["guest_topology_ok"] is True, m["guest_topology"]["problems"]
            residency = m["metrics"]["numa"]["llc"]["residency"]
            migrated = m["metrics"]["vmstat"]["numa_pages_migrated"]
            moves = m["metrics"]["events"].get("sched_move_numa", 0)
            late, nodes = residency["one_llc_share_late"], residency["node_share"]
            said = (f"numa_balancing {balancing}, llc_balancing/enabled={enabled}: node share {nodes}, one-LLC "
                    f"share by second {residency['one_llc_share']}, pages migrated {migrated}, NUMA moves "
                    f"{moves}")  # fmt: skip
            print(f"7.3 {said}")
            assert residency["tasks"] == 2, said
            if balancing == "off":
                # (no NUMA balancing: the memory stays; the load balancer may still move a thread or both to the
                # idle node, as it did in 5 of 10 runs with llc_balancing off here, which decides nothing of the LLCs)
                assert migrated == 0 and ((late >= 0.85) if enabled else (late <= 0.6)), said
            elif not enabled:
                assert late <= 0.6, said
            else:
                # (gathered as late as the 6th of 8 seconds in the 14 measured runs: over the second half 0.909 at
                # the least, so 0.75; never gathered, 0.5. One make test run of 2026-11-28 gathered them in the 7th
                # second, after two NUMA moves: second half 0.74, its last two seconds 1.0; so gathered by the end
                # counts too)
                split = min(nodes) >= 0.15 and moves > 0  # (NUMA balancing's preferred node for one of them)
                gathered_by_end = min(residency["one_llc_share"][-2:]) >= 0.9
                assert late >= 0.75 or gathered_by_end or (split and late <= 0.6), said
