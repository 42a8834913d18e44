"""Issue 66's K5: seed 003's decisions in guest time, on nodes with room (make test-fidelity; not in make test).

Seed 003 (Mel Gorman, "sched/fair: Allow a small load imbalance between low utilisation SD_NUMA domains") let the
load balancer leave up to two tasks' imbalance between nodes, so a communicating pair stays where its wakeups put it.
numalab runs it as its revert (6.1 has the allowance; kernel-configs/patches/seed003-revert-numa-imbalance-min.patch
sets NUMA_IMBALANCE_MIN to 0) on ring-2 with 4 CPUs a node, ``pairs-heavy-one-node`` (two pairs, each side writing
1 MiB of its working set a 4 KiB message, every side started on node 0's CPUs with its 89 MiB working set written
there, then free), under the modelled machine m1 with coherence on, 10 guest seconds a run, A/B until the hint-local
share decides (3 to 4 pairs).

Why the pairs start on node 0, with their memory: the seed asks what the load balancer does with a node's
communicating pairs. Left to fork balancing, the four sides are placed by how many tasks happen to be running at each
fork (6.1's find_idlest_group allows the imbalance only while the node runs at most imb_numa_nr tasks), and on
2026-11-29 that coin, not the allowance, decided where the pairs were: both kernels could start a pair a node and
have nothing left to decide. Started on node 0 with their memory written as they went, the revert's move raced the
first touch (14,522-34,036 pages, 64-88% hint local). The seed's netperf pair had run on its node.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from common import REPO, numalab

from lab.paths import cache_dir, file_lock

pytestmark = [pytest.mark.fidelity, pytest.mark.vm, pytest.mark.kernel_build]

REVERT = REPO / "kernel-configs" / "patches" / "seed003-revert-numa-imbalance-min.patch"
CPUS_PER_NODE = 4
K5 = ("--topology", "ring-2", "--cpus-per-node", str(CPUS_PER_NODE), "--workload", "pairs-heavy-one-node",
      "--duration", "10", "--model", "m1", "--coherence", "on", "--event", "sched:sched_waking",
      "--event", "sched:sched_wakeup")  # fmt: skip


def _kernel(*args: str) -> str:
    with file_lock(cache_dir("test-trees") / ".fidelity-build.lock"):
        proc = numalab("kernel", "build", "--json", *args, timeout=5400)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    return json.loads(proc.stdout)["name"]


def _tasks(m: dict) -> list[dict]:
    return m["workload"]["result"]["per_task"]


def _pairs_nodes(m: dict) -> list[tuple[int, int]]:
    """Each pair's two sides' nodes at the workload's end (ring-2's node of a CPU is CPU // 4)."""
    tasks = _tasks(m)
    sides: dict[int, list[int]] = {}
    for t in sorted(tasks, key=lambda t: t["role"]):
        sides.setdefault(t["pair"], []).append(t["cpu_end"] // CPUS_PER_NODE)
    return [(a, b) for a, b in sides.values()]


def _figures(runs: list[dict]) -> dict:
    vm = [m["metrics"]["vmstat"] for m in runs]
    numa = [m["metrics"]["numa"] for m in runs]
    events = [m["metrics"]["events"] for m in runs]
    return {
        "runs": len(runs),
        "hint_local_pct": [round(v["hint_local_pct"], 2) for v in vm],
        "pages_migrated": [v["numa_pages_migrated"] for v in vm],
        "numa_moves_swaps": [e["sched_move_numa"] + e["sched_swap_numa"] for e in events],
        "workload_moves_between_nodes": [n["llc"]["migrations"]["workload"]["between_nodes"] for n in numa],
        "wakeups_in_wakers_llc_pct": [round(n["llc_wakeups"]["workload"]["waker_llc_pct"], 2) for n in numa],
        "pairs_end_nodes": [_pairs_nodes(m) for m in runs],
        "start_nodes": sorted({t["cpu_start"] // CPUS_PER_NODE for m in runs for t in _tasks(m)}),
        "round_trips_per_s": [round(m["workload"]["result"]["round_trips_per_s"]) for m in runs],
        "host_s": [round(m["timings"]["total_s"]) for m in runs],
    }


def test_known_answer_k5_seed003_decisions_in_guest_time(tmp_path: Path) -> None:
    base = _kernel()  # numalab's 6.1 with the default fragments: "baseline"
    revert = _kernel("--patch", str(REVERT), "--name", "seed003-revert")
    out = tmp_path / "k5"
    proc = numalab("run", "--kernel", base, "--kernel", revert, *K5, "--repeat", "auto", "--decide",
                   "vmstat.hint_local_pct", "--max-pairs", "4", "--out", str(out), "--json", timeout=7200)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    runs = [json.loads(p.read_text()) for p in sorted(out.glob("*/manifest.json"))]
    assert runs and all(m["status"] == "ok" for m in runs), [(m["label"], m["reason"]) for m in runs]
    assert all(m["model"]["name"] == "m1" and m["model"]["differs"] == ["coherence on (m1: off)"] for m in runs)
    with_allowance = _figures([m for m in runs if m["kernel"]["name"] == base])
    without = _figures([m for m in runs if m["kernel"]["name"] == revert])
    print(f"\nK5 with the allowance ({base}): {json.dumps(with_allowance)}")
    print(f"K5 without it ({revert}): {json.dumps(without)}")
    print("K5 verdicts: " + " | ".join(v["line"] for v in result["verdicts"]))
    assert with_allowance["start_nodes"] == without["start_nodes"] == [0], (with_allowance, without)
    # The decision: hint-local worse without the allowance, significant (Welch), and the seed's sizes.
    (v,) = result["verdicts"]
    assert v["direction"] == "worse" and v["significant"] is True, v["line"]
    assert statistics.mean(with_allowance["hint_local_pct"]) >= 95, with_allowance
    assert statistics.mean(without["hint_local_pct"]) <= 85, without
    assert statistics.mean(without["pages_migrated"]) >= 1000 > 10 * statistics.mean(with_allowance["pages_migrated"])
    # The path: each pair's sides together at the end on both kernels (the wakeups keep them in one LLC); without the
    # allowance the pairs spread, a pair a node, in most runs; the memory follows the pair (page migrations), not the
    # tasks their memory (no NUMA move or swap).
    for fig in (with_allowance, without):
        assert all(a == b for pairs in fig["pairs_end_nodes"] for a, b in pairs), fig
        assert min(fig["wakeups_in_wakers_llc_pct"]) >= 99, fig
    spread = sum(len({a for a, _ in pairs}) == 2 for pairs in without["pairs_end_nodes"])
    assert spread > without["runs"] / 2, without
    assert sum(without["numa_moves_swaps"]) == 0, without
