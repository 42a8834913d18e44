"""Per-task node residency, convergence and ping-pong (lab.analysis.residency) on synthetic traces whose answer
is known by construction, and on a real run record of this lab (tests/data/runs/ring4-numa01-views)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.analysis.numa import ANALYSIS_EVENTS, analyse_trace, default_events
from lab.analysis.residency import HELPERS, PINGPONG_WINDOW_S, pingpongs, residency
from lab.events import MIGRATE_TASK, PROCESS_EXIT, WAKEUP_NEW
from lab.topology.model.spec import load_topology
from lab.trace.tracedat import Event, TraceData, read_trace

RING4 = load_topology("ring-4")  # 2 CPUs a node: node n has CPUs 2n, 2n+1
REAL = Path(__file__).parent.parent / "data" / "runs" / "ring4-numa01-views"


def new(ts: float, pid: int, cpu: int, comm: str = "numa01") -> Event:
    return Event(ts, 0, "sh", 1, WAKEUP_NEW.name, {"comm": comm, "pid": str(pid), "prio": "120",
                                                   "target_cpu": f"{cpu:03d}"})  # fmt: skip


def mig(ts: float, pid: int, a: int, b: int, comm: str = "numa01") -> Event:
    return Event(ts, a, comm, pid, MIGRATE_TASK.name, {"comm": comm, "pid": str(pid), "prio": "120",
                                                       "orig_cpu": str(a), "dest_cpu": str(b)})  # fmt: skip


def move(ts: float, pid: int, s: int, d: int) -> Event:
    f = {"pid": pid, "tgid": pid, "ngid": 0, "src_cpu": 2 * s, "src_nid": s, "dst_cpu": 2 * d, "dst_nid": d}
    return Event(ts, 0, "numa01", pid, "sched_move_numa", {k: str(v) for k, v in f.items()})


def end(ts: float, pid: int) -> Event:
    return Event(ts, 0, "numa01", pid, PROCESS_EXIT.name, {"comm": "numa01", "pid": str(pid), "prio": "120"})


def test_residency_is_traced_by_default_and_decoded():
    names = {e.full for e in default_events()}
    assert {"sched:sched_migrate_task", "sched:sched_wakeup_new", "sched:sched_process_exit"} <= names
    assert {"sched_migrate_task", "sched_wakeup_new", "sched_process_exit"} <= set(ANALYSIS_EVENTS)


def test_time_on_each_node_per_interval_and_convergence():
    # t0 = 100. Task 10 starts on node 0, moves to node 1 at 101.5, NUMA balancing moves it to node 2 at 102.25
    # and it stays to 105. Task 11 starts on node 3 and never moves, and no decision names it: it had nowhere
    # to converge to. A shell (a helper) is not a task of the workload.
    t0 = 100.0
    ev = [new(100.0, 10, 0), new(100.0, 11, 6), new(100.1, 12, 0, "sh"), mig(101.5, 10, 1, 3),
          move(102.25, 10, 1, 2), mig(102.25, 10, 3, 4), mig(102.5, 12, 0, 2, "sh"), end(105.0, 10),
          end(105.0, 11)]  # fmt: skip
    r = residency(TraceData(ev), RING4, t0)
    by = {t["pid"]: t for t in r["tasks"]}
    assert set(by) == {10, 11} and "sh" in HELPERS
    a = by[10]
    assert a["seconds"][0] == [1.0, 0.0, 0.0, 0.0]
    assert a["seconds"][1] == [0.5, 0.5, 0.0, 0.0]
    assert a["seconds"][2] == [0.0, 0.25, 0.75, 0.0]
    assert a["seconds"][3] == [0.0, 0.0, 1.0, 0.0] and a["seconds"][4] == [0.0, 0.0, 1.0, 0.0]
    assert a["node"] == [0, 0, 2, 2, 2] and a["final_node"] == 2 and a["node_changes"] == 2
    # from interval 2 on its node is its final node; it arrived there at 2.25 s (the event's time, not the bin's)
    assert a["converged_s"] == 2.25 and a["target"]
    assert by[11]["converged_s"] is None and not by[11]["target"] and by[11]["node"] == [3] * 5
    w = r["workload"]
    assert w["convergence_s"] == 2.25 and w["converged"] == 1 and w["targeted"] == 1 and w["tasks"] == 2
    # each task's time adds up to its life
    assert sum(map(sum, a["seconds"])) == pytest.approx(5.0)


def test_a_task_that_never_settles_counts_as_the_window():
    t0 = 0.0
    ev = [new(0.0, 10, 0), mig(1.25, 10, 0, 2), move(1.25, 10, 0, 1), mig(2.25, 10, 2, 0), mig(3.25, 10, 0, 2),
          mig(4.25, 10, 2, 4), Event(5.0, 0, "x", 1, "sched_move_numa", {})]  # fmt: skip
    r = residency(TraceData(ev), RING4, t0)
    (t,) = r["tasks"]
    assert t["node"] == [0, 1, 0, 1, 2] and t["converged_s"] is None  # node 2 for its last interval only
    assert r["workload"]["convergence_s"] == r["window_s"] == 5.0


def test_pingpong_counts_returns_within_the_window_only():
    # 0 -> 1 at t=1, back to 0 at t=1.5 (a ping-pong), 0 -> 1 at 3, back at 3 + window + 0.5 (not one)
    seq = [(0.0, 0), (1.0, 1), (1.5, 0), (3.0, 1), (3.0 + PINGPONG_WINDOW_S + 0.5, 0)]
    assert pingpongs(seq) == 1
    assert pingpongs([(0.0, 0), (1.0, 1), (1.2, 2), (1.4, 0)]) == 0  # 0 -> 1 -> 2 -> 0: a round, not a return
    ev = [new(0.0, 10, 0), mig(1.0, 10, 0, 2), move(1.0, 10, 0, 1), mig(1.5, 10, 2, 0), move(1.5, 10, 1, 0),
          mig(3.0, 10, 0, 2), mig(4.9, 10, 2, 0), end(6.0, 10)]  # fmt: skip
    r = residency(TraceData(ev), RING4, 0.0)
    (t,) = r["tasks"]
    assert t["pingpong"] == 1 and t["pingpong_numa"] == 1
    assert [m[1] for m in t["marks"]] == ["move", "move"]


def test_skipped_without_its_events():
    out = analyse_trace(TraceData([]), RING4, {"sched_move_numa"}, 0.0)
    assert "residency" not in out and "sched_migrate_task" in out["skipped"]["residency"]


@pytest.mark.skipif(not REAL.is_dir(), reason="no recorded run")
def test_real_record():
    """A real default run of numa01 on ring-4 (stock 6.1, TCG): every numa01 thread has a residency, its
    seconds add up to its life, and migrate events the trace holds are the node changes counted (or more:
    moves within a node are not node changes)."""
    import json

    m = json.loads((REAL / "manifest.json").read_text())
    t0 = m["metrics"]["numa"]["rates"]["start_uptime"]
    data = read_trace(REAL / "trace.dat", ANALYSIS_EVENTS)
    r = residency(data, RING4, t0)
    tasks = [t for t in r["tasks"] if t["comm"] == "numa01"]
    assert len(tasks) >= RING4.total_cpus // 2
    for t in tasks:
        assert sum(map(sum, t["seconds"])) == pytest.approx(t["end_s"] - t["start_s"], abs=0.01)
        assert all(n is None or 0 <= n < RING4.n_nodes for n in t["node"])
    migrations = sum(1 for e in data.named(MIGRATE_TASK.name) if e.fields.get("comm") == "numa01")
    assert 0 < sum(t["node_changes"] for t in tasks) <= migrations
    assert r["workload"]["convergence_s"] <= r["window_s"]


def _figures(ev: list[Event], topo=RING4) -> tuple[dict, dict[str, float]]:
    """The residency's workload figures and the task metrics compare reads from them."""
    from lab.analysis.metrics import metric_values

    r = residency(TraceData(ev), topo, 0.0)
    return r["workload"], {k: v for k, v in metric_values({"metrics": {"numa": {"residency": r}}}).items()
                           if k.startswith("tasks.")}  # fmt: skip


def test_balancing_off_has_no_convergence_but_counts_its_pingpongs():
    """With balancing off no decision names a task: nothing had a node to converge to, so convergence is n/a
    (None, and no tasks.convergence_s for compare), not the 'settled at once' that rewards never moving; the
    load balancer's ping-pongs are still counted (they happen either way)."""
    ev = [new(0.0, 10, 0), new(0.0, 11, 2), mig(1.0, 10, 0, 2), mig(1.5, 10, 2, 0), end(4.0, 10), end(4.0, 11)]
    w, vals = _figures(ev)
    assert w["convergence_s"] is None and w["targeted"] == 0 and w["converged"] == 0
    assert w["pingpong"] == 1 and w["pingpong_numa"] is None
    assert vals["tasks.pingpong"] == 1.0 and "tasks.convergence_s" not in vals and "tasks.pingpong_numa" not in vals
    # the generic figures are there with balancing off (lab.analysis.residency.settling: test_settled.py)
    assert vals["tasks.migrations_between_nodes"] == 2.0 and vals["tasks.migrations_within_node"] == 0.0


def test_no_moves_at_all_gives_zero_pingpongs_and_no_convergence():
    ev = [new(0.0, 10, 0), new(0.0, 11, 2), end(3.0, 10), end(3.0, 11)]
    w, vals = _figures(ev)
    assert w["convergence_s"] is None and w["pingpong"] == 0 and w["node_changes"] == 0
    # no task changed node: none settled anywhere (n/a), and the migrations are counted as 0
    assert w["settled_s"] is None and w["stayed"] == 2
    assert vals == {"tasks.pingpong": 0.0, "tasks.migrations_between_nodes": 0.0, "tasks.migrations_within_node": 0.0}


def test_one_node_has_no_task_figures():
    """On one node a task cannot change node: its ping-pongs are not 0 of something possible, they are n/a."""
    from lab.topology.model.spec import load_spec

    one = load_spec(
        {"name": "one", "nodes": 1, "cpus_per_node": 2, "memory_per_node": "512M", "distances": [[10]]},
        "one",
        name="one",
    )
    ev = [new(0.0, 10, 0), mig(1.0, 10, 0, 1), end(3.0, 10)]
    w, vals = _figures(ev, one)
    assert w["tasks"] == 1 and w["convergence_s"] is None and w["pingpong"] is None
    # nor can it settle on a node or migrate between nodes; within its node it did, once
    assert w["settled_s"] is None and w["migrations_between_nodes"] is None
    assert vals == {"tasks.migrations_within_node": 1.0}


def _stick(ts: float, pid: int, s: int, d: int) -> Event:
    return Event(ts, 0, "numa01", pid, "sched_stick_numa", {"src_pid": str(pid), "src_nid": str(s),
                                                             "dst_nid": str(d)})  # fmt: skip


def test_convergence_is_the_arrival_time_not_the_interval():
    """A task balancing moved at 1.7 s settled there: 1.7, not the 2.0 of the interval it settled in. A task
    balancing wanted on node 0 but could not move (a stick) never reached its target: it did not converge,
    and counts as the window's end; one it wanted where it already was converged at its start."""
    from lab.analysis.residency import arrival

    ev = [new(0.0, 10, 0), new(0.3, 11, 2), mig(1.7, 10, 0, 2), move(1.7, 10, 0, 1), _stick(1.0, 11, 1, 0),
          end(5.0, 10), end(5.0, 11)]  # fmt: skip
    r = residency(TraceData(ev), RING4, 0.0)
    by = {t["pid"]: t for t in r["tasks"]}
    assert by[10]["converged_s"] == 1.7 and by[10]["target_node"] == 1
    assert by[11]["converged_s"] is None and by[11]["target_node"] == 0 and by[11]["target"]
    w, vals = _figures(ev)
    assert w["convergence_s"] == 5.0 == r["window_s"] and w["targeted"] == 2 and w["converged"] == 1
    assert w["pingpong_numa"] == 0 and vals["tasks.pingpong_numa"] == 0.0
    ev[4] = _stick(1.0, 11, 1, 1)  # wanted where it was
    w, vals = _figures(ev)
    assert w["convergence_s"] == 1.7 and w["converged"] == 2 and vals["tasks.convergence_s"] == 1.7
    # a task there from before the window arrived at the window's start, one that came back at its start
    assert arrival([(-1.0, 1)], 0, -1.0, 0.0) == 0.0
    assert arrival([(0.0, 0), (0.4, 1), (2.6, 0), (2.8, 1)], 2, 0.0, 0.0) == 2.8


def test_an_older_record_is_read_by_the_same_rule():
    """A record made before convergence needed a target (no 'targeted'): n/a when none of its tasks carries a
    NUMA mark and its events counted no decision; its figure as recorded otherwise."""
    from lab.analysis.metrics import metric_values

    task = {"pid": 10, "seconds": [[1.0, 0.0]], "marks": []}
    res = {"workload": {"tasks": 1, "convergence_s": 0.19, "pingpong": 0, "pingpong_numa": 0}, "tasks": [task]}
    off = metric_values({"metrics": {"numa": {"residency": res}, "events": {"sched_move_numa": 0}}})
    assert "tasks.convergence_s" not in off and off["tasks.pingpong"] == 0.0
    on = metric_values({"metrics": {"numa": {"residency": res}, "events": {"sched_move_numa": 3}}})
    assert on["tasks.convergence_s"] == 0.19
