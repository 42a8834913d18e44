"""Seed 002 on real VMs: the group check passes on the baseline 6.1 kernel and catches the old construction.

The baseline kernel (``numalab kernel build``) and the same kernel with
``seed002-groups-from-one-cpu.patch`` boot ring-4 (one CPU a node) with
``nodes13`` (two CPU-bound tasks per CPU of nodes 1 and 3, all started on
node 1) and grid-2x4 idle. Baseline: status ok, the guest's groups are the
prediction, node 3 busy. Patched: topology-mismatch naming the overlap, and
node 3 idle while node 1 is busy.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import REPO, numalab, require_setup_package

from lab.topology.model.spec import load_topology
from lab.topology.predictions.sched_groups import predict_groups

PATCH = REPO / "kernel-configs" / "patches" / "seed002-groups-from-one-cpu.patch"
HAVE_SOURCE = Path("/usr/src/linux-source-6.1.tar.xz").exists()

pytestmark = [pytest.mark.vm, pytest.mark.kernel_build]


@pytest.fixture(autouse=True)
def _needs_source() -> None:
    require_setup_package(HAVE_SOURCE, "/usr/src/linux-source-6.1.tar.xz", "linux-source-6.1")


def _build(*args: str) -> dict:
    proc = numalab("kernel", "build", "--json", *args, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def kernels() -> dict[str, dict]:
    return {
        "baseline": _build("--name", "baseline"),
        "seed002": _build("--name", "seed002-groups-from-one-cpu", "--patch", str(PATCH)),
    }


def _run(tmp_path: Path, kernel: str, topology: str, workload: str, duration: str, *extra: str) -> dict:
    out = tmp_path / f"{topology}-{kernel}-{workload}"
    proc = numalab("run", "--topology", topology, "--kernel", kernel, "--workload", workload, "--duration", duration,
                   "--out", str(out), "--json", *extra, timeout=900)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert (out / "manifest.json").is_file()
    return m


RING4 = ("--cpus-per-node", "1", "--mem-per-node", "256M")


def test_ring4_baseline_groups_match_and_nodes_1_and_3_are_both_used(tmp_path, kernels) -> None:
    m = _run(tmp_path, "baseline", "ring-4", "nodes13", "8", *RING4)
    assert m["status"] == "ok", m["reason"]
    groups = m["guest_topology"]["sched_groups"]
    assert groups["checked"] and groups["unchecked_cpus"] == []
    # the stored guest view is the prediction (what was compared)
    for cpu, doms in groups["predicted"].items():
        assert [d["groups"] for d in groups["guest"][cpu]] == [d["groups"] for d in doms]
    assert [d["groups"] for d in groups["guest"]["1"]] == [["1", "2", "0"], ["0-2", "0,2-3"]]
    busy = m["metrics"]["node_cpu"]["busy_s"]
    assert busy["3"] > 0.5 * busy["1"] > 0, busy  # the balancer moved tasks from node 1 to node 3
    assert m["workload"]["result"]["balance_pct"] > 50


def test_ring4_old_construction_is_caught_and_leaves_node_3_idle(tmp_path, kernels) -> None:
    m = _run(tmp_path, "seed002-groups-from-one-cpu", "ring-4", "nodes13", "8", *RING4)
    assert m["status"] == "topology-mismatch"
    assert m["kernel"]["guest_release"] == kernels["seed002"]["release"]
    assert m["reason"].startswith("cpu 1 NUMA domain-1 (span 0-3): sched groups {0-1,3} {1-3} != predicted")
    assert "overlap on CPUs 1,3 (nodes 1,3)" in m["reason"]
    problems = [p for p in m["guest_topology"]["problems"] if "sched groups" in p]
    assert [p.split()[1] for p in problems] == ["1", "3"]  # nodes 0 and 2 keep their groups
    # what the patched guest built is the old construction, as lab.topology.predictions.sched_groups models it
    old = predict_groups(load_topology("ring-4").with_overrides(1, None, None), "first-cpu")
    guest = m["guest_topology"]["sched_groups"]["guest"]
    assert {c: [d["groups"] for d in doms] for c, doms in guest.items()} == {
        str(c): [d["groups"] for d in doms] for c, doms in old.items()
    }
    busy = m["metrics"]["node_cpu"]["busy_s"]
    assert busy["1"] > 2.0 and busy["3"] < 0.2 * busy["1"], busy  # one node busy, the other idle
    assert m["workload"]["result"]["balance_pct"] < 20


def test_grid_2x4_baseline_passes_and_old_construction_is_caught(tmp_path, kernels) -> None:
    base = _run(tmp_path, "baseline", "grid-2x4", "idle", "1")
    assert base["status"] == "ok", base["reason"]
    assert base["guest_topology"]["sched_groups"]["checked"]
    bad = _run(tmp_path, "seed002-groups-from-one-cpu", "grid-2x4", "idle", "1")
    assert bad["status"] == "topology-mismatch"
    assert "sched groups" in bad["reason"] and "groups, which overlap on CPUs" in bad["reason"], bad["reason"]
    old = predict_groups(load_topology("grid-2x4"), "first-cpu")
    guest = bad["guest_topology"]["sched_groups"]["guest"]
    assert {c: [(d["groups"], d["masks"]) for d in doms] for c, doms in guest.items()} == {
        str(c): [(d["groups"], d["masks"]) for d in doms] for c, doms in old.items()
    }


def test_known_answer_k1_the_model_gives_each_vcpu_its_capacity(tmp_path, kernels) -> None:
    """Issue 66's K1, CPU capacity: nodes13 on ring-4, one vCPU a node, the baseline against seed 002's old
    construction, on the modelled machine m1 (--model m1: parallel guest time). The old construction leaves node 3
    idle, so its tasks share node 1's one CPU: half the loops a guest second (0.50 +- 0.05). Under the one shared
    guest clock (m1 with --quantum 0) the busy vCPU gets the idle one's instructions and the loss disappears (1.0):
    the check can fail, and the record says that machine is not m1. Measured (2026-11-28, 4 s each): 0.501 under
    m1, 1.000 under the shared clock. On 2026-11-29 the shared clock gave 1.953 on another machine: its guest's
    address-space layout (seed 0's; seeds 1-3 and norandmaps gave 1.000) put a worker's 64 KiB buffer in the sets
    of other lines it touched each pass (even a worker alone on its vCPU), and the direct-mapped modelled cache then
    missed about 3 % of its lines on every pass. The cache has 8 ways since (lab.vm.tcg.latency_model.DEFAULT_WAYS):
    seed 0 gives 1.0 again. The runs are 2 guest s since 2026-11-29 (make test's time): 0.506 under m1, 0.999 under
    the shared clock, in 274 host s for the four where 4 s took 389 in stop 76's CI."""
    runs = {}
    for machine, extra in (("m1", ()), ("shared", ("--quantum", "0"))):
        (tmp_path / machine).mkdir()
        for kernel in ("baseline", "seed002-groups-from-one-cpu"):
            runs[machine, kernel] = _run(tmp_path / machine, kernel, "ring-4", "nodes13", "2", *RING4, "--model",
                                         "m1", "--no-trace", *extra)  # fmt: skip
    for (machine, kernel), m in runs.items():
        assert m["status"] == ("ok" if kernel == "baseline" else "topology-mismatch"), (machine, kernel, m["reason"])
        assert m["workload"]["result"]["gbps"] > 0
    assert runs["m1", "baseline"]["model"] == {
        "name": "m1",
        "differs": [],
        "known_answers": ["K1 CPU capacity", "K2 locality pays"],
    }
    assert runs["shared", "baseline"]["model"]["differs"] == ["quantum 0 (m1: 2000)"]
    busy = runs["m1", "seed002-groups-from-one-cpu"]["metrics"]["node_cpu"]["busy_s"]
    assert busy["3"] < 0.2 * busy["1"], busy  # node 3 idle under the old construction

    def ratio(machine: str) -> float:
        bad, good = (runs[machine, k]["workload"]["result"]["gbps"] for k in ("seed002-groups-from-one-cpu",
                                                                              "baseline"))  # fmt: skip
        return bad / good

    shared = runs["shared", "baseline"]["remote_latency"]["window"]["per_vcpu"]
    print(
        f"K1: m1 {ratio('m1'):.3f}, shared clock {ratio('shared'):.3f}; the shared baseline's vCPUs' misses "
        f"{[sum(r['misses']) for r in shared]}, charged ms {[r['charged_ns'] // 10**6 for r in shared]}"
    )
    assert 0.45 <= ratio("m1") <= 0.55, ratio("m1")
    assert 0.95 <= ratio("shared") <= 1.05, ratio("shared")
