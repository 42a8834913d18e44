"""Placement from the generic scheduler events alone, for any scheduler (issue 51): when the tasks that changed
node settled (lab.analysis.residency.settling, ``tasks.settled_s``) and their migrations between nodes and within
a node, on synthetic traces whose answer is known by construction (every edge of the definition), and on a real
run with NUMA balancing off (no NUMA-balancing event at all: what a sched_ext run's trace looks like)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_residency import RING4, end, mig, new

from lab.analysis.metrics import METRIC_KEYS, NEUTRAL, metric_values
from lab.analysis.numa import ANALYSIS_EVENTS
from lab.analysis.residency import SETTLED_MIN_S, residency
from lab.events import MIGRATE_TASK
from lab.trace.tracedat import Event, TraceData, read_trace

OFF_RUN = Path(__file__).parent.parent / "data" / "runs" / "ring4x1-numa01-off"


def _run(ev: list[Event], topo=RING4, t0: float = 0.0) -> tuple[dict, dict, dict[str, float]]:
    """Per pid its task, the workload's figures, and the tasks.* metrics compare reads."""
    r = residency(TraceData(ev), topo, t0)
    vals = metric_values({"metrics": {"numa": {"residency": r}}})
    return {t["pid"]: t for t in r["tasks"]}, r["workload"], {k: v for k, v in vals.items() if k.startswith("tasks.")}


def test_a_task_that_moved_and_stayed_settled_when_it_arrived() -> None:
    # node n has CPUs 2n, 2n+1. Task 10 starts on node 0, the scheduler puts it on node 1 at 1.3 s and on node 2 at
    # 2.6 s, where it stays to 6 s: settled at 2.6 (the event's time, not the interval's). No NUMA event anywhere.
    by, w, vals = _run([new(0.0, 10, 0), mig(1.3, 10, 0, 2), mig(2.6, 10, 2, 4), mig(4.0, 10, 4, 5), end(6.0, 10)])
    t = by[10]
    assert t["settle"] == "settled" and t["settled_s"] == 2.6 and t["converged_s"] is None
    assert t["node_changes"] == 2 and t["migrations_within_node"] == 1  # 4 -> 5 is within node 2
    assert w["settled_s"] == 2.6 and w["settled"] == 1 and w["convergence_s"] is None
    assert vals["tasks.settled_s"] == 2.6 and "tasks.convergence_s" not in vals
    assert vals["tasks.migrations_between_nodes"] == 2.0 and vals["tasks.migrations_within_node"] == 1.0


def test_a_short_visit_elsewhere_does_not_unsettle_a_task() -> None:
    """A task that spends 0.2 s of one interval on another node and comes back has not moved for good: it settled
    where it was (at its start, 0.5 s), as convergence's rule has it; the two migrations are still counted."""
    by, w, _vals = _run([new(0.5, 10, 0), mig(3.1, 10, 0, 2), mig(3.3, 10, 2, 0), end(6.0, 10)])
    assert by[10]["settle"] == "settled" and by[10]["settled_s"] == 0.5 and by[10]["node_changes"] == 2
    assert w["settled_s"] == 0.5


def test_a_task_that_never_changed_node_has_no_settling_time() -> None:
    """Nothing to settle: n/a, not 0 (which would reward a scheduler that leaves a misplaced task where it is); a
    workload none of whose tasks changed node has none either."""
    by, w, vals = _run([new(0.0, 10, 0), new(0.0, 11, 2), mig(1.0, 10, 0, 1), end(5.0, 10), end(5.0, 11)])
    assert by[10]["settle"] == by[11]["settle"] == "stayed" and by[10]["settled_s"] is None
    assert w["settled_s"] is None and w["stayed"] == 2 and w["settled"] == w["moving"] == 0
    assert "tasks.settled_s" not in vals and vals["tasks.migrations_within_node"] == 1.0


def test_a_short_lived_task_is_left_out() -> None:
    """A task that lived less than SETTLED_MIN_S cannot show it stayed anywhere that long: n/a, and not counted
    in the workload's figure either way (not as settled, not as the window's end)."""
    assert SETTLED_MIN_S == 2.0
    ev = [new(0.0, 10, 0), mig(0.5, 10, 0, 2), end(1.9, 10), new(0.0, 11, 0), mig(1.0, 11, 0, 6), end(6.0, 11)]
    by, w, _vals = _run(ev)
    assert by[10]["settle"] == "short" and by[10]["settled_s"] is None and by[10]["node_changes"] == 1
    assert by[11]["settle"] == "settled" and w["settled_s"] == 1.0 and w["short"] == 1


def test_a_task_still_moving_counts_as_the_window() -> None:
    """A task that changed node for most of its last second never stayed on its final node for 2 s: still moving, and
    the workload's settling time is the trace's end, as for a convergence that never came."""
    ev = [new(0.0, 10, 0), mig(1.0, 10, 0, 2), mig(4.2, 10, 2, 4), end(5.0, 10),
          new(0.0, 11, 0), mig(0.4, 11, 0, 6), end(5.0, 11)]  # fmt: skip
    by, w, vals = _run(ev)
    assert by[10]["settle"] == "moving" and by[10]["settled_s"] is None
    assert by[11]["settle"] == "settled" and by[11]["settled_s"] == 0.4
    assert w["moving"] == 1 and w["settled"] == 1 and w["settled_s"] == 5.0 and vals["tasks.settled_s"] == 5.0


def test_one_node_has_no_settling_and_no_migrations_between_nodes() -> None:
    from lab.topology.model.spec import load_spec

    one = load_spec({"name": "one", "nodes": 1, "cpus_per_node": 2, "memory_per_node": "512M",
                     "distances": [[10]]}, "one", name="one")  # fmt: skip
    by, w, vals = _run([new(0.0, 10, 0), mig(1.0, 10, 0, 1), mig(2.0, 10, 1, 0), end(5.0, 10)], one)
    assert by[10]["settle"] == "stayed" and w["settled_s"] is None and w["migrations_between_nodes"] is None
    assert vals == {"tasks.migrations_within_node": 2.0}


def test_the_generic_figures_are_declared_neutral() -> None:
    """Shown, not judged: settling early on the wrong node is not better, and fewer migrations is not better in
    itself. NUMA balancing's convergence stays a lower-is-better figure of the fair class's."""
    for key in ("tasks.settled_s", "tasks.migrations_between_nodes", "tasks.migrations_within_node"):
        assert METRIC_KEYS[key].better == NEUTRAL and not METRIC_KEYS[key].fair_only
    assert METRIC_KEYS["tasks.convergence_s"].better == "lower" and METRIC_KEYS["tasks.convergence_s"].fair_only
    assert not METRIC_KEYS["tasks.pingpong"].fair_only and METRIC_KEYS["tasks.pingpong_numa"].fair_only


@pytest.mark.skipif(not OFF_RUN.is_dir(), reason="no recorded run")
def test_real_run_without_numa_balancing() -> None:
    """A real numa01 run on ring-2 with balancing off (stock 6.1, TCG): no NUMA-balancing event, so no convergence;
    the placement is still read: every migration of the workload's tasks is between nodes or within one, as
    the trace's own sched_migrate_task records of those pids say, and each task that changed node either settled
    (at a time inside its life) or is still moving."""
    m = json.loads((OFF_RUN / "manifest.json").read_text())
    assert m["settings"]["numa_balancing"] == "0" and not any(m["metrics"]["events"].get(e) for e in
                                                              ("sched_move_numa", "sched_swap_numa"))  # fmt: skip
    t0 = next(s["uptime"] for s in m["stages"] if s["name"] == "workload-start")
    data = read_trace(OFF_RUN / "trace.dat", ANALYSIS_EVENTS)
    from lab.topology.model.topology import topology_from_dict

    topo = topology_from_dict(m["topology"])
    r = residency(data, topo, t0)
    w = r["workload"]
    assert w["convergence_s"] is None and w["targeted"] == 0 and w["tasks"] >= 2
    pids = {t["pid"] for t in r["tasks"]}
    node = {c: n for n, cpus in enumerate(topo.node_cpus()) for c in cpus}
    between = within = 0
    for e in data.named(MIGRATE_TASK.name):
        if e.int("pid") in pids:
            same = node[e.int("orig_cpu")] == node[e.int("dest_cpu")]
            within += same
            between += not same
    assert (w["migrations_between_nodes"], w["migrations_within_node"]) == (between, within)
    assert w["settled"] + w["moving"] + w["stayed"] + w["short"] == w["tasks"]
    for t in r["tasks"]:
        if t["settle"] == "settled":
            assert t["start_s"] <= t["settled_s"] <= t["end_s"]
        assert (t["settle"] == "stayed") == (t["node_changes"] == 0) or t["settle"] == "short"
    if w["settled"] + w["moving"]:
        assert 0 <= w["settled_s"] <= r["window_s"]
    else:
        assert w["settled_s"] is None
