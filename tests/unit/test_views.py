"""Issue 37's views without a VM: per-node memory samples and their checks (lab.analysis.node_memory), the
report's residency strip, node memory charts and A/B overlays, neutral mechanism counters, and compare's
p-values and intervals; on the real record tests/data/runs/ring4-numa01-views and on records edited to
break one thing at a time."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from common import numalab
from test_analysis import OFF, ON

from lab.analysis import compare as cmp
from lab.analysis.metrics import METRIC_KEYS, NEUTRAL, metric_values, run_metrics
from lab.analysis.node_memory import node_memory
from lab.analysis.record import RunRecord
from lab.report import ab_table
from lab.report.report_model import build_report
from lab.report.sections.views_section import _binned, run_views
from lab.topology.model.spec import load_topology

DATA = Path(__file__).parent.parent / "data" / "runs"
VIEWS = DATA / "ring4-numa01-views"
RING4 = load_topology("ring-4")


def _t0(run: Path) -> float:
    return RunRecord.load(run).workload_start_uptime


def test_node_memory_of_a_real_run_adds_up() -> None:
    nm = node_memory(VIEWS, RING4, _t0(VIEWS))
    assert nm["problems"] == []
    assert len(nm["t"]) >= 3 and len(nm["used_mib"]) == len(nm["t"])
    # the guest's node sizes: at most what the topology gives each node, and most of it
    assert all(0.8 * n.memory_mib <= tot <= n.memory_mib for n, tot in zip(RING4.nodes, nm["total_mib"], strict=True))
    # numa01 touches its memory on every node while it runs; the workload is at most what each node uses
    busy = [row for row in nm["workload_mib"] if row and sum(row) > 100]
    assert busy, nm["workload_mib"]
    for row, used in zip(nm["workload_mib"], nm["used_mib"], strict=True):
        if row:
            assert all(w <= u + 1 for w, u in zip(row, used, strict=True))
    # and its processes (the two numa01 processes with memory) are there, per node
    assert len(nm["processes"]) >= 2


def _edited(tmp: Path, edit) -> Path:
    run = tmp / "run"
    shutil.copytree(VIEWS, run)
    series = run / "numa-nodes.series"
    series.write_text(edit(series.read_text()))
    return run


def test_a_node_that_does_not_add_up_is_a_problem(tmp_path: Path) -> None:
    # node 2's MemFree raised by 100 MiB in every sample: used + free is no longer its total
    def edit(text: str) -> str:
        out = []
        for line in text.splitlines():
            if line.startswith("Node 2 MemFree:"):
                kb = int(line.split()[3]) + 102400
                line = f"Node 2 MemFree:    {kb} kB"
            out.append(line)
        return "\n".join(out) + "\n"

    nm = node_memory(_edited(tmp_path, edit), RING4, _t0(VIEWS))
    assert nm["problems"] and all("node 2" in p for p in nm["problems"] if not p.startswith("..."))
    assert "is not MemTotal" in nm["problems"][0]


def test_a_workload_bigger_than_its_footprint_is_a_problem(tmp_path: Path) -> None:
    # a mapping of 512 MiB on node 0 added to the first process of every sample: more than its VmRSS, and more
    # than node 0 has in use
    def edit(text: str) -> str:
        out = []
        for line in text.splitlines():
            out.append(line)
            if line.endswith(" kernelpagesize_kB=4") and "file=/usr/bin" in line and "00400000" in line:
                out.append("7f0000000000 default anon=131072 dirty=131072 N0=131072 kernelpagesize_kB=4")
        return "\n".join(out) + "\n"

    nm = node_memory(_edited(tmp_path, edit), RING4, _t0(VIEWS))
    text = " ".join(nm["problems"])
    assert "against a VmRSS" in text and "more than its MemUsed" in text


def _exits_during_last_read(text: str, memory_gone: bool) -> str:
    """The last sample's last process, read as it exits (CI, stop 54: numa01's process 186 at the end of its run):
    numa_maps read empty and, with ``memory_gone``, its second status without VmRSS (its mm already released)."""
    lines = text.splitlines()
    second = max(i for i, line in enumerate(lines) if line.startswith("Name:\t"))
    first = max(i for i, line in enumerate(lines[:second]) if line.startswith("nonvoluntary_ctxt_switches:"))
    end = next(i for i in range(second, len(lines)) if lines[i].startswith("Node "))
    status = [x for x in lines[second:end] if not (memory_gone and x.startswith(("Vm", "Rss")))]
    return "\n".join(lines[: first + 1] + status + lines[end:]) + "\n"


def test_a_process_read_as_it_exits_is_not_checked_and_one_that_lost_its_pages_is(tmp_path: Path) -> None:
    exiting = node_memory(_edited(tmp_path / "a", lambda t: _exits_during_last_read(t, True)), RING4, _t0(VIEWS))
    assert exiting["problems"] == [] and exiting["t"]
    # numa_maps empty while both reads of its status had its memory: not an exit, a problem
    lost = node_memory(_edited(tmp_path / "b", lambda t: _exits_during_last_read(t, False)), RING4, _t0(VIEWS))
    assert len(lost["problems"]) == 1 and "add up to 0.0 MiB against a VmRSS" in lost["problems"][0], lost


def test_no_samples_no_series_and_damage_is_not_a_traceback(tmp_path: Path) -> None:
    assert node_memory(tmp_path, RING4, 0.0) == {}
    (tmp_path / "numa-nodes.series").write_bytes(b"@ nan\n@ zz\nNode 9 MemTotal: 1 kB\n\xff\xfe\n@ 1e999\n")
    assert node_memory(tmp_path, RING4, 0.0) == {}


def test_the_run_metrics_carry_residency_node_memory_and_the_task_figures() -> None:
    rec = RunRecord.load(VIEWS)
    m = run_metrics(VIEWS, rec.topology, rec.trace_events, rec.workload_start_uptime)
    res = m["numa"]["residency"]
    assert res["workload"]["tasks"] >= 8 and m["node_memory"]["t"]
    vals = metric_values({"metrics": m, "workload": rec.manifest["workload"]})
    assert vals["tasks.convergence_s"] == res["workload"]["convergence_s"] <= res["window_s"]
    assert vals["tasks.pingpong"] == res["workload"]["pingpong"]
    # older records, without the events, have no task figures (not zeros)
    old = RunRecord.load(ON[0])
    assert "tasks.convergence_s" not in metric_values(old.manifest)


def test_mechanism_counters_are_neutral_and_outcomes_are_judged() -> None:
    for key in ("vmstat.numa_pages_migrated", "vmstat.numa_hint_faults", "vmstat.autonuma_cost",
                "events.sched_move_numa", "events.sched_swap_numa", "events.sched_stick_numa"):  # fmt: skip
        assert METRIC_KEYS[key].better == NEUTRAL, key
    for key in ("vmstat.hint_local_pct", "tasks.convergence_s", "workload.gbps_per_vcpu_s"):
        assert METRIC_KEYS[key].better in ("higher", "lower"), key
    c = cmp.compare_runs([RunRecord.load(p) for p in OFF], [RunRecord.load(p) for p in ON])
    html = ab_table.to_html(c)
    for key in ("vmstat.numa_pages_migrated", "vmstat.numa_hint_faults", "events.sched_stick_numa"):
        row = c.row(key)
        assert row is not None and row.verdict() in ("changed", "same", "undecided", "unknown"), (key, row.verdict())
    # no green or red for a counter: every coloured cell is a judged metric's
    assert 'class="better"' not in html.split("vmstat.numa_pages_migrated")[1].split("</tr>")[0]
    assert "shown, not judged" in html and "neutral" in ab_table.to_text(c)


def test_compare_json_has_p_values_and_intervals() -> None:
    proc = numalab("compare", "--baseline", *map(str, OFF), "--new", *map(str, ON), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["metric"]: r for r in json.loads(proc.stdout)["metrics"]}
    pm = rows["vmstat.numa_pages_migrated"]
    assert 0 <= pm["p_value"] < 0.05 and pm["significant"] is True and pm["verdict"] == "changed"
    lo, hi = pm["ci95_diff"]
    assert 0 < lo <= pm["abs_diff"] <= hi  # more pages migrated with balancing on: the interval excludes 0
    for r in rows.values():  # the interval excludes 0 exactly when Welch calls it significant
        if r["ci95_diff"] is not None and r["p_value"] is not None:
            assert (r["p_value"] < 0.05) == (not r["ci95_diff"][0] <= 0 <= r["ci95_diff"][1]), r["metric"]


def test_binned_series_interpolate_between_samples() -> None:
    assert _binned([0.4, 2.4], [0.0, 20.0]) == {1: pytest.approx(6.0), 2: pytest.approx(16.0)}
    assert _binned([0.0, 1.0, 2.0], [1.0, None, 3.0]) == {0: 1.0, 2: 3.0}  # a gap (no hint faults) stays one


@pytest.fixture(scope="module")
def ab_report(tmp_path_factory) -> tuple[dict, str]:
    """A report of OFF against the views run and a copy of it under another run id and folder name r1, as two
    parents' r1 would be: the overlay must find each by its id, not its folder."""
    tmp = tmp_path_factory.mktemp("ab")
    copies = []
    for i, src in enumerate((VIEWS, VIEWS)):
        dst = tmp / f"p{i}" / "r1"
        shutil.copytree(src, dst)
        mf = json.loads((dst / "manifest.json").read_text())
        mf["run_id"] = f"{mf['run_id']}-copy{i}"
        (dst / "manifest.json").write_text(json.dumps(mf))
        copies.append(dst)
    paths = build_report([*OFF, *copies], tmp / "report.html")
    return paths.data, (tmp / "report.html").read_text()


def test_the_report_draws_residency_node_memory_and_overlays(ab_report) -> None:
    report, page = ab_report
    views_run = next(r for r in report["runs"] if r["run_id"].endswith("-copy0"))
    part = run_views(views_run)
    tasks = views_run["metrics"]["numa"]["residency"]["tasks"]
    assert part.count('class="res"') == sum(len(t["segments"]) for t in tasks)
    assert "Memory per node over time" in part and "do not add up" not in part
    assert page.count('class="views residency"') == 2  # the two views runs (OFF has no residency events)
    assert '<div class="ab-overlays">' in page and page.count('class="chart band"') >= 2
    # both views runs are on the new side of every overlay
    assert "(3 and 2 runs)" in page


def test_a_run_without_the_events_says_how_to_get_residency() -> None:
    rec = RunRecord.load(ON[0])
    run = {"run_id": rec.run_id, "metrics": run_metrics(ON[0], rec.topology, rec.trace_events, 0.0),
           "topology": rec.manifest["topology"], "workload": rec.manifest["workload"]}  # fmt: skip
    text = run_views(run)
    assert "No per-task residency" in text and "sched:sched_migrate_task" in text


def test_decide_defaults_to_the_workloads_own_figure(tmp_path: Path) -> None:
    from lab.analysis.ab_plan import ABPlan
    from lab.analysis.verdict import NO_FIGURE, resolve_decide, workload_figure
    from lab.workloads.registry import WORKLOADS

    figures = {n: workload_figure(w) for n, w in WORKLOADS.items()}
    assert figures["numa01"] == "workload.gbps_per_vcpu_s" and figures["pairs"] == "workload.round_trips_per_vcpu_s"
    assert figures["nodes13"] == "workload.balance_pct" and figures["perf-numa01"] == "workload.converged_s"
    for name, key in figures.items():  # each a judged metric of its workload, never a mechanism counter
        assert METRIC_KEYS[key].better in ("higher", "lower"), (name, key)
    assert resolve_decide([*ABPlan().decide, "vmstat.numa_pages_migrated"], WORKLOADS["numa01"]) == [
        "workload.gbps_per_vcpu_s", "vmstat.numa_pages_migrated"]  # fmt: skip
    assert figures["idle"] == NO_FIGURE == "workload.elapsed_s"
    # a default that names a metric the registry does not know would fail every --repeat auto: it does not
    assert NO_FIGURE in METRIC_KEYS
    proc = numalab("run", "--repeat", "auto", "--kernel", "stock", "--kernel", "stock2", "--decide", "nope.x",
                   "--workload", "idle", timeout=60)  # fmt: skip
    assert proc.returncode == 2 and "--decide" in proc.stderr and "Traceback" not in proc.stderr


def test_the_default_figure_of_a_workload_without_its_own_is_defined_in_every_ok_run(tmp_path: Path) -> None:
    """Idle decides on its run time, which every ok idle record has with a direction (tasks.convergence_s, the
    old default, is n/a without NUMA balancing's decisions, so an idle A/B ended in "no-data"); the same record
    said to have run under scx_simple (no sched_ext record is checked in) has it too. --workload-cmd's numbers
    are the command's: no default, refused up front, naming --decide."""
    from lab.analysis.ab_plan import ABPlan
    from lab.analysis.verdict import resolve_decide, should_stop, verdicts_of
    from lab.errors import LabError
    from lab.workloads.registry import WORKLOADS
    from lab.workloads.user_workload import resolve_workload

    (key,) = resolve_decide(ABPlan().decide, WORKLOADS["idle"])
    scx = {"asked": "scx_simple", "kind": "sched_ext", "start": {"state": "enabled", "ops": "simple"},
           "end": {"state": "enabled", "ops": "simple"}, "ejected": False, "reason": None}  # fmt: skip
    records = [json.loads((DATA / name / "manifest.json").read_text()) for name in ("ring2-idle", "asym3-idle")]
    assert {m["workload"]["name"] for m in records} == {"idle"} and {m["status"] for m in records} == {"ok"}
    for m in [*records, *(r | {"scheduler": scx} for r in records)]:
        assert key in metric_values(m) and "tasks.convergence_s" not in metric_values(m), m["run_id"]
    assert METRIC_KEYS[key].better in ("higher", "lower") and not METRIC_KEYS[key].fair_only
    fair, ext = records[:1] * 3, [records[0] | {"scheduler": scx}] * 3
    assert should_stop(verdicts_of(fair, ext, [key]), 3).reason != "no-data"
    with pytest.raises(LabError, match=r"^--decide: --workload-cmd has no figure of its own.*--decide METRIC"):
        resolve_decide(ABPlan().decide, resolve_workload("", "echo hi", ()))
    assert resolve_decide(["workload.ops"], resolve_workload("", "echo hi", ())) == ["workload.ops"]
    proc = numalab("run", "--repeat", "auto", "--kernel", "stock", "--kernel", "stock2", "--workload-cmd", "echo hi",
                   "--out", str(tmp_path / "out"), timeout=60)  # fmt: skip
    assert proc.returncode == 2 and "--decide METRIC" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_each_process_memory_per_node_is_drawn_next_to_the_nodes() -> None:
    """The per-process series of node_memory (its numa_maps per sample) is drawn, a chart a process, the largest
    first, in the per-node view; a record without it, or with a damaged one, draws none and says nothing false."""
    from lab.report.sections.views_section import PROCESS_CHARTS, process_memory

    m = json.loads((VIEWS / "manifest.json").read_text())
    nm = m["metrics"]["node_memory"]
    procs = nm["processes"]
    html = run_views(m | {"run_id": "r"})
    section = html.split("Memory per node over time")[1]
    for pid in procs:
        assert f"Process {pid}: its memory per node" in section
    colors = {f"node {i}": "#000" for i in range(4)}
    figs = process_memory(nm, 4, colors)
    assert len(figs) == len(procs) <= PROCESS_CHARTS
    biggest = max(procs, key=lambda p: max(sum(row) for row in procs[p]["mib"]))
    assert f"Process {biggest}:" in figs[0]
    many = {str(i): {"t": [0.0, 1.0], "mib": [[float(i), 0.0], [float(i), 1.0]]} for i in range(PROCESS_CHARTS + 2)}
    figs = process_memory({"t": [0.0, 1.0], "processes": many}, 2, colors)
    assert len(figs) == PROCESS_CHARTS + 1 and "2 smaller processes not drawn" in figs[-1]
    assert f"Process {PROCESS_CHARTS + 1}:" in figs[0]  # the largest first
    for junk in ({}, {"processes": []}, {"processes": {"1": None}, "t": None}, {"processes": {"1": {"mib": "x"}}}):
        assert isinstance(process_memory(junk, 2, colors), list)
