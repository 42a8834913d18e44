"""Views that see LLCs (lab.analysis.llc) on small fabricated traces whose answer is known by construction: the
workload's time per LLC, task migrations within an LLC / between LLCs of a node / between nodes, and wakeups
against the waker's LLC (sched_waking paired with the next sched_wakeup of the pid); their metrics (neutral
compare rows) and the report's table."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from lab.analysis.llc import llc_of, llc_view, llc_wakeups, llcs
from lab.analysis.metrics import METRIC_KEYS, NEUTRAL, metric_values
from lab.analysis.numa import ANALYSES, ANALYSIS_EVENTS, analyse_trace, default_events
from lab.events import MIGRATE_TASK, PROCESS_EXIT, WAKEUP, WAKEUP_NEW, WAKING
from lab.report.sections.views_section import run_views
from lab.topology.model.spec import load_topology
from lab.trace.tracedat import Event, TraceData, _parse_report, read_trace

RING4 = load_topology("ring-4")  # one LLC a node: node n is CPUs 2n, 2n+1
SPR = load_topology("spr-2s-2llc")  # 2 nodes x 2 LLCs: {0-1},{2-3} on node 0, {4-5},{6-7} on node 1
REAL = Path(__file__).parent.parent / "data" / "runs" / "ring4-numa01-views"


def new(ts: float, pid: int, cpu: int, comm: str = "pipe") -> Event:
    return Event(ts, 0, "sh", 1, WAKEUP_NEW.name, {"comm": comm, "pid": str(pid), "prio": "120",
                                                   "target_cpu": f"{cpu:03d}"})  # fmt: skip


def mig(ts: float, pid: int, a: int, b: int, comm: str = "pipe") -> Event:
    return Event(ts, a, comm, pid, MIGRATE_TASK.name, {"comm": comm, "pid": str(pid), "prio": "120",
                                                       "orig_cpu": str(a), "dest_cpu": str(b)})  # fmt: skip


def end(ts: float, pid: int) -> Event:
    return Event(ts, 0, "pipe", pid, PROCESS_EXIT.name, {"comm": "pipe", "pid": str(pid), "prio": "120"})


def waking(ts: float, pid: int, waker_cpu: int, prev: int) -> Event:
    """On the waker's CPU; target_cpu is the task's previous CPU."""
    return Event(ts, waker_cpu, "waker", 99, WAKING.name, {"comm": "pipe", "pid": str(pid), "prio": "120",
                                                           "target_cpu": f"{prev:03d}"})  # fmt: skip


def wakeup(ts: float, pid: int, chosen: int, on_cpu: int | None = None) -> Event:
    """target_cpu is the CPU chosen; the event fires on the waker's CPU, or on the chosen one (queued there)."""
    cpu = chosen if on_cpu is None else on_cpu
    return Event(ts, cpu, "<idle>", 0, WAKEUP.name, {"comm": "pipe", "pid": str(pid), "prio": "120",
                                                     "target_cpu": f"{chosen:03d}"})  # fmt: skip


def test_llcs_are_the_kernels_mc_spans() -> None:
    assert [(x["cpus"], x["node"], x["package"]) for x in llcs(SPR)] == [
        ("0-1", 0, 0), ("2-3", 0, 0), ("4-5", 1, 1), ("6-7", 1, 1)]  # fmt: skip
    assert [(x["cpus"], x["node"]) for x in llcs(RING4)] == [("0-1", 0), ("2-3", 1), ("4-5", 2), ("6-7", 3)]
    assert llc_of(SPR) == {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 3}
    genoa = llcs(load_topology("genoa-nps2"))  # one package of 2 nodes, 2 CCXs a node
    assert [(x["cpus"], x["node"], x["package"]) for x in genoa] == [
        ("0-1", 0, 0), ("2-3", 0, 0), ("4-5", 1, 0), ("6-7", 1, 0)]  # fmt: skip


def test_one_llc_a_node_has_no_migrations_between_llcs() -> None:
    ev = [new(0.0, 10, 0), mig(1.0, 10, 0, 1), mig(2.0, 10, 1, 2), mig(3.0, 10, 2, 7), mig(3.5, 5, 6, 7),
          end(4.0, 10)]  # fmt: skip
    out = llc_view(TraceData(ev), RING4, 0.0)
    m = out["migrations"]
    assert {k: m["all"][k] for k in ("within_llc", "between_llcs", "between_nodes")} == {
        "within_llc": 2, "between_llcs": 0, "between_nodes": 2}  # fmt: skip
    # pid 5 was never created in the trace: not a task of the workload
    assert m["workload"] == {"within_llc": 1, "between_llcs": 0, "between_nodes": 2}
    # the LLC x LLC matrix: LLC 0 -> 0 once, 0 -> 1, 1 -> 3, 3 -> 3
    assert m["all"]["matrix"][0][0] == 1 and m["all"]["matrix"][0][1] == 1 and m["all"]["matrix"][1][3] == 1
    assert m["all"]["matrix"][3][3] == 1 and sum(map(sum, m["all"]["matrix"])) == 4
    # with an LLC a node, the time per LLC is the time per node
    res = out["residency"]
    assert res["seconds"] == res["node_seconds"] == [2.0, 1.0, 0.0, 1.0]
    assert res["share"] == pytest.approx([0.5, 0.25, 0.0, 0.25])


def test_a_node_of_two_llcs_splits_within_and_between_llcs() -> None:
    # task 10: starts on CPU 0 (LLC 0), -> 1 (within), -> 2 (between LLCs of node 0), -> 6 (between nodes)
    # task 11: on CPU 4 (LLC 2) from 0 to 4 s
    t0 = 0.0
    ev = [new(0.0, 10, 0), new(0.0, 11, 4), mig(1.0, 10, 0, 1), mig(1.5, 10, 1, 2), mig(3.0, 10, 2, 6),
          end(4.0, 10), end(4.0, 11)]  # fmt: skip
    out = llc_view(TraceData(ev), SPR, t0)
    assert out["migrations"]["workload"] == {"within_llc": 1, "between_llcs": 1, "between_nodes": 1}
    assert out["migrations"]["unplaced"] == 0
    res = out["residency"]
    assert res["tasks"] == 2
    assert res["seconds"] == [1.5, 1.5, 4.0, 1.0]  # LLC 0: 0-1.5 s; LLC 1: 1.5-3; LLC 2: task 11; LLC 3: 3-4
    assert res["node_seconds"] == [3.0, 5.0]
    assert sum(res["share"]) == pytest.approx(1.0) and res["share"][2] == pytest.approx(0.5)
    assert res["node_share"] == pytest.approx([3 / 8, 5 / 8])
    # over time (1 s intervals): task 10 on LLC 0, 0, then 1 (1.5-3 s), then LLC 3; task 11 on LLC 2 throughout
    assert res["by_interval"] == [[1.0, 0.0, 1.0, 0.0], [0.5, 0.5, 1.0, 0.0], [0.0, 1.0, 1.0, 0.0],
                                  [0.0, 0.0, 1.0, 1.0]]  # fmt: skip
    assert res["one_llc_share"] == [0.5, 0.5, 0.5, 0.5]  # (two tasks on two LLCs: never together)
    assert res["one_llc_share_late"] == 0.5
    assert res["tasks_llc"] == [{"pid": 10, "llc": [0, 0, 1, 3]}, {"pid": 11, "llc": [2, 2, 2, 2]}]  # (4 s each)


def test_threads_gathered_on_one_llc_read_as_one_llc_share_one() -> None:
    """Cache-aware scheduling's view (issue 65): two tasks started on two LLCs of a node, one moved to the other's
    LLC at 1.2 s: each interval's share of the workload's time on its most-used LLC goes from 0.5 to 1."""
    ev = [new(0.0, 10, 0), new(0.0, 11, 2), mig(1.2, 11, 2, 1), end(4.0, 10), end(4.0, 11)]
    res = llc_view(TraceData(ev), SPR, 0.0)["residency"]
    assert res["one_llc_share"] == [0.5, 0.9, 1.0, 1.0] and res["one_llc_share_late"] == 1.0


def test_wakeups_in_the_wakers_llc_its_node_and_another_node() -> None:
    ev = [
        new(0.0, 10, 1),
        new(0.0, 11, 0),
        waking(1.0, 10, 0, 1),
        wakeup(1.0001, 10, 1, on_cpu=1),  # queued on the chosen CPU: in the waker's LLC
        waking(2.0, 10, 0, 1),
        wakeup(2.0001, 10, 0, on_cpu=0),  # on the waker's own CPU (a sync wakeup)
        waking(3.0, 10, 0, 1),
        wakeup(3.0001, 10, 3),  # another LLC of node 0
        waking(4.0, 11, 5, 0),
        wakeup(4.0001, 11, 6),  # the waker on node 1, the task put on node 1's other LLC
        waking(5.0, 11, 2, 6),
        wakeup(5.0001, 11, 7),  # another node
        waking(6.0, 12, 4, 4),
        wakeup(6.0001, 12, 4),
    ]  # (pid 12: not a task of the workload)
    out = llc_wakeups(TraceData(ev), SPR, 0.0)
    w = out["workload"]
    assert (w["wakeups"], w["waker_llc"], w["waker_node"], w["other_node"]) == (5, 2, 2, 1)
    assert w["on_waker_cpu"] == 1 and w["on_previous_cpu"] == 1
    assert w["waker_llc_pct"] == pytest.approx(40.0) and w["other_node_pct"] == pytest.approx(20.0)
    a = out["all"]
    assert (a["wakeups"], a["waker_llc"]) == (6, 3) and a["on_waker_cpu"] == 2
    assert out["waking_unpaired"] == out["wakeup_unpaired"] == out["unplaced"] == 0
    # the waker CPU x chosen CPU matrix re-partitions: e.g. by half-node, which on this machine is the LLC
    m = w["matrix"]
    assert m[0][1] == m[0][0] == m[0][3] == m[5][6] == m[2][7] == 1 and sum(map(sum, m)) == 5
    same_half = sum(m[a][b] for a in range(8) for b in range(8) if a // 2 == b // 2)
    assert same_half == w["waker_llc"]


def test_one_llc_a_node_has_every_wakeup_of_the_node_in_the_wakers_llc() -> None:
    ev = [new(0.0, 10, 1), waking(1.0, 10, 0, 1), wakeup(1.1, 10, 3), waking(2.0, 10, 0, 3), wakeup(2.1, 10, 4)]
    w = llc_wakeups(TraceData(ev), RING4, 0.0)["workload"]
    assert (w["waker_llc"], w["waker_node"], w["other_node"]) == (0, 0, 2)  # ring-4: CPUs 0-1 are node 0
    w = llc_wakeups(TraceData(ev[:3]), SPR, 0.0)["workload"]
    assert (w["waker_llc"], w["waker_node"]) == (0, 1)


def test_a_waking_without_its_wakeup_is_not_paired_with_a_later_one() -> None:
    ev = [
        new(0.0, 10, 1),
        waking(1.0, 10, 4, 1),  # no wakeup follows this one (lost, or the task was running already)
        waking(2.0, 10, 0, 1),
        wakeup(2.1, 10, 1),  # this pair: from CPU 0, not CPU 4
        wakeup(3.0, 10, 2),  # a wakeup without a waking before it
        waking(4.0, 10, 0, 1),
    ]  # the trace ends before its wakeup
    out = llc_wakeups(TraceData(ev), SPR, 0.0)
    w = out["workload"]
    assert w["wakeups"] == 1 and w["waker_llc"] == 1 and w["matrix"][0][1] == 1
    assert out["waking_unpaired"] == 2 and out["wakeup_unpaired"] == 1


def test_a_reused_pid_does_not_pair_the_old_tasks_waking_with_the_new_tasks_wakeup() -> None:
    ev = [
        new(0.0, 10, 1),
        waking(1.0, 10, 4, 1),  # the old task 10: woken from CPU 4, then it exits with no wakeup traced
        end(1.5, 10),
        new(2.0, 10, 0),  # a new task with the old one's pid
        wakeup(2.5, 10, 6),  # and a wakeup whose waking was lost: not the old task's (CPU 4 -> 6)
        waking(3.0, 10, 0, 0),
        wakeup(3.1, 10, 1),
        waking(4.0, 20, 2, 2),
        new(4.5, 20, 3),
        wakeup(5.0, 20, 3),
    ]  # the same, by a new task's start
    out = llc_wakeups(TraceData(ev), SPR, 0.0)
    a = out["all"]
    assert a["wakeups"] == 1 and a["matrix"][0][1] == 1 and a["matrix"][4][6] == 0
    assert out["waking_unpaired"] == 2 and out["wakeup_unpaired"] == 2


def test_the_wakeup_events_are_decoded_as_trace_cmd_prints_them() -> None:
    """sched_waking as the kernel's format prints it; sched_wakeup as trace-cmd's sched plugin does."""
    lines = [
        "  sched-pipe-176   [004]     6.503587: sched_waking:   comm=sched-pipe pid=177 prio=120 target_cpu=006",
        "          <idle>-0     [006]     6.503601: sched_wakeup:         sched-pipe:177 [120] CPU:006",
        "          <idle>-0     [007]     6.439412: sched_wakeup:         kworker/7:2:132 [120] CPU:007",
    ]  # fmt: skip
    events: list[Event] = []
    _parse_report(lines, {WAKING.name, WAKEUP.name}, events, Counter(), {})
    assert [(e.name, e.cpu, e.int("pid"), e.int("target_cpu")) for e in events] == [
        (WAKING.name, 4, 177, 6), (WAKEUP.name, 6, 177, 6), (WAKEUP.name, 7, 132, 7)]  # fmt: skip
    out = llc_wakeups(TraceData(events[:2]), SPR, 0.0)
    assert out["all"]["waker_node"] == 1  # from CPU 4 to CPU 6: node 1's other LLC


def test_the_wakeup_events_are_asked_for_not_traced_by_default() -> None:
    names = {e.full for e in default_events()}
    assert WAKING.full not in names and WAKEUP.full not in names
    assert {WAKING.name, WAKEUP.name} <= set(ANALYSIS_EVENTS)  # decoded when a run traced them
    by = {a.name: a for a in ANALYSES}
    assert by["llc"].default and not by["llc_wakeups"].default
    out = analyse_trace(TraceData([]), SPR, {e.name for e in default_events()}, 0.0)
    assert "llc" in out and "llc_wakeups" not in out and out["skipped"] == {}  # (not asked for: not skipped)
    half = analyse_trace(TraceData([]), SPR, {e.name for e in default_events()} | {WAKING.name}, 0.0)
    assert "sched_wakeup" in half["skipped"]["llc_wakeups"]  # (asked for in part: skipped, and why)
    out = analyse_trace(TraceData([]), SPR, {e.name for e in default_events()} | {WAKING.name, WAKEUP.name}, 0.0)
    assert out["llc_wakeups"]["all"]["wakeups"] == 0 and out["llc_wakeups"]["all"]["waker_llc_pct"] is None


def _manifest(topo, ev: list[Event]) -> dict:
    recorded = {e.name for e in default_events()} | {WAKING.name, WAKEUP.name}
    return {"metrics": {"numa": analyse_trace(TraceData(ev), topo, recorded, 0.0)}}


# task 10 moves between node 0's LLCs, then is woken in the waker's LLC twice and onto the other node once
WAKEUPS = [new(0.0, 10, 1), mig(0.5, 10, 1, 2), waking(1.0, 10, 0, 2), wakeup(1.1, 10, 1), waking(2.0, 10, 0, 1),
           wakeup(2.1, 10, 5), waking(3.0, 10, 1, 5), wakeup(3.1, 10, 0), end(4.0, 10)]  # fmt: skip


def test_the_metrics_are_neutral_compare_rows() -> None:
    v = metric_values(_manifest(SPR, WAKEUPS))
    assert v["llc.wakeups_waker_llc_pct"] == pytest.approx(200 / 3) and v["llc.wakeups_other_node_pct"] == 100 / 3
    assert v["llc.wakeups_waker_node_pct"] == 0.0
    assert v["llc.migrations_between_llcs"] == 1.0 and v["llc.migrations_within_llc"] == 0.0
    assert 0.0 < v["llc.one_llc_share_late_pct"] <= 100.0
    keys = [k for k in METRIC_KEYS if k.startswith("llc.")]
    assert len(keys) == 6 and all(METRIC_KEYS[k].better == NEUTRAL for k in keys)
    # one LLC a node: no migration rows (between LLCs is 0 by construction), the wakeup rows stay
    v = metric_values(_manifest(RING4, WAKEUPS))
    assert not any(k.startswith("llc.migrations") for k in v) and "llc.wakeups_waker_llc_pct" in v
    assert "llc.one_llc_share_late_pct" not in v  # (an LLC a node: the node residency says it)
    # ... and no "another LLC of the waker's node" row: with one LLC a node it is 0 by construction, not a share
    assert "llc.wakeups_waker_node_pct" not in v and "llc.wakeups_other_node_pct" in v
    # not traced: no wakeup rows (never 0)
    v = metric_values({"metrics": {"numa": analyse_trace(TraceData(WAKEUPS), SPR, {e.name for e in
                                                         default_events()}, 0.0)}})  # fmt: skip
    assert not any(k.startswith("llc.wakeups") for k in v) and "llc.migrations_within_llc" in v


def test_the_report_shows_the_llcs_next_to_the_nodes() -> None:
    html = run_views(_manifest(SPR, WAKEUPS) | {"run_id": "r"})
    assert "By LLC" in html and "The workload&#x27;s time per LLC" in html and "Where a wakeup put the task" in html
    assert "in the waker&#x27;s LLC" in html and ">66.7<" in html
    # without the wakeup events: the table says how to get them
    m = {"metrics": {"numa": analyse_trace(TraceData(WAKEUPS), SPR, {e.name for e in default_events()}, 0.0)}}
    html = run_views(m | {"run_id": "r"})
    assert "By LLC" in html and f"--event {WAKING.full} --event {WAKEUP.full}" in html
    # one LLC a node and no wakeups: nothing more than the per-node views
    m = {"metrics": {"numa": analyse_trace(TraceData(WAKEUPS), RING4, {e.name for e in default_events()}, 0.0)}}
    assert "By LLC" not in run_views(m | {"run_id": "r"})


def test_the_report_shows_each_second_on_one_llc_and_what_a_cache_aware_kernel_said() -> None:
    ev = [new(0.0, 10, 0), new(0.0, 11, 2), mig(1.2, 11, 2, 1), end(4.0, 10), end(4.0, 11)]
    m = {"metrics": {"numa": analyse_trace(TraceData(ev), SPR, {e.name for e in default_events()}, 0.0)}}
    html = run_views(m | {"run_id": "r"})
    assert "Second by second" in html and "on one LLC %" in html and ">90.0<" in html
    assert "Over the second half: 100.0% on one LLC." in html and "Cache-aware scheduling" not in html
    said = {"configured": True, "predicted": "enabling", "kernel": "enabling", "start": {"enabled": 0},
            "end": {"enabled": 0}}  # fmt: skip
    html = run_views(m | {"run_id": "r", "sched_cache": said})
    assert ("Cache-aware scheduling (SCHED_CACHE): the kernel said enabling at boot (numalab predicted enabling); "
            "llc_balancing/enabled 0 at the workload&#x27;s start, 0 at its end.") in html  # fmt: skip


@pytest.mark.skipif(not REAL.is_dir(), reason="no recorded run")
def test_a_real_run_of_one_llc_a_node_has_no_migrations_between_llcs() -> None:
    """A real default run of numa01 on ring-4 (an LLC a node): every migration is within an LLC or between
    nodes, and those between nodes are the cross-node load-balancer analysis's."""
    t0 = json.loads((REAL / "manifest.json").read_text())["metrics"]["numa"]["rates"]["start_uptime"]
    data = read_trace(REAL / "trace.dat", ANALYSIS_EVENTS)
    out = analyse_trace(data, RING4, {e.name for e in default_events()}, t0)
    m, lb = out["llc"]["migrations"], out["cross_node_lb"]
    assert m["all"]["between_llcs"] == 0 and m["workload"]["between_llcs"] == 0
    assert m["all"]["between_nodes"] == lb["cross_node"] > 0
    assert m["all"]["within_llc"] + m["all"]["between_nodes"] + m["unplaced"] == lb["migrations"]
    res = out["llc"]["residency"]
    assert res["tasks"] >= RING4.total_cpus // 2 and res["seconds"] == res["node_seconds"]
    assert sum(res["share"]) == pytest.approx(1.0)


def test_one_node_of_two_llcs_has_no_rows_between_nodes() -> None:
    """On one node, migrations between nodes and wakeups on another node are 0 by construction: left out."""
    from lab.topology.model.spec import load_spec

    one = load_spec({"name": "one", "nodes": 1, "cpus_per_node": 4, "memory_per_node": "512M", "packages": 1,
                     "llcs_per_node": 2, "distances": [[10]]}, "one", name="one")  # fmt: skip
    ev = [new(0.0, 10, 0), mig(0.5, 10, 0, 2), waking(1.0, 10, 0, 2), wakeup(1.1, 10, 3), end(2.0, 10)]
    v = metric_values(_manifest(one, ev))
    assert v["llc.migrations_between_llcs"] == 1.0 and "llc.wakeups_waker_node_pct" in v
    assert "llc.migrations_between_nodes" not in v and "llc.wakeups_other_node_pct" not in v


def test_migrations_between_nodes_are_one_row_the_tasks_one(tmp_path: Path) -> None:
    """On a machine with several LLCs a node the LLC split's migrations between nodes are the residency's
    tasks.migrations_between_nodes: one figure, one row (the tasks.* one, any machine's). A record that carries
    the LLC split (every record with several LLCs a node) loads and compares with the figure once."""
    import shutil

    from lab.analysis import compare as cmp
    from lab.analysis.record import RunRecord
    from lab.report import ab_table

    ev = [new(0.0, 10, 0), new(0.0, 11, 4), mig(1.0, 10, 0, 1), mig(1.5, 10, 1, 2), mig(3.0, 10, 2, 6),
          mig(3.5, 11, 4, 0), end(4.0, 10), end(4.0, 11)]  # fmt: skip
    m = _manifest(SPR, ev)
    v = metric_values(m)
    assert m["metrics"]["numa"]["llc"]["migrations"]["workload"]["between_nodes"] == 2  # (the LLC split has it)
    assert v["tasks.migrations_between_nodes"] == 2.0 and "llc.migrations_between_nodes" not in v
    assert v["llc.migrations_between_llcs"] == 1.0 and v["llc.migrations_within_llc"] == 1.0
    assert "llc.migrations_between_nodes" not in METRIC_KEYS
    # a real record (ring-4, an LLC a node, tasks.migrations_between_nodes 7) with a two-LLCs-a-node split in it
    runs = []
    for side in ("a", "b"):
        d = tmp_path / side
        shutil.copytree(REAL.parent / "ring4x1-numa01-off", d)
        mf = json.loads((d / "manifest.json").read_text())
        mf["run_id"] += side
        mf["metrics"]["numa"]["llc"] = {
            "llcs": [{"node": n} for n in (0, 0, 1, 1, 2, 2, 3, 3)],
            "residency": {"tasks": 2},
            "migrations": {"workload": {"within_llc": 3, "between_llcs": 4, "between_nodes": 7}},
        }
        (d / "manifest.json").write_text(json.dumps(mf))
        runs.append(RunRecord.load(d))
    text = ab_table.to_text(cmp.compare_runs(runs[:1], runs[1:]))
    assert "llc.migrations_between_llcs" in text and "tasks.migrations_between_nodes" in text
    assert {w for w in text.split() if w.endswith("migrations_between_nodes")} == {"tasks.migrations_between_nodes"}
