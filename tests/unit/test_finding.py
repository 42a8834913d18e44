"""Verdicts that carry their own caveat (lab.analysis.caveats) and the finding compare closes with
(lab.analysis.finding), on the recorded numa01 A/B of this lab (balancing off against on, ring-4, plain TCG)
and on the same records said to have run under the remote-latency model."""

from __future__ import annotations

import copy
import json

import pytest
from common import numalab
from test_analysis import OFF, ON

from lab.analysis import compare as cmp
from lab.analysis import finding
from lab.analysis.caveats import FREE_REMOTE, MODELLED_FLAGS, free_remote, free_remote_why, row_caveat
from lab.analysis.record import RunRecord
from lab.analysis.verdict import verdicts_of
from lab.report import ab_table

MODEL = {"model": {"source": "slit", "local_ns": 100.0, "ratios": [[1.0, 2.0], [2.0, 1.0]]}}


def _ab() -> tuple[list[RunRecord], list[RunRecord]]:
    return [RunRecord.load(p) for p in OFF], [RunRecord.load(p) for p in ON]


def _modelled(m: dict) -> dict:
    return copy.deepcopy(m) | {"remote_latency": MODEL}


def test_which_records_say_remote_memory_costs_nothing() -> None:
    tcg = {"accelerator": {"name": "tcg"}}
    assert free_remote_why(tcg) == "plain TCG, no --remote-latency model"
    assert free_remote_why(tcg | {"remote_latency": MODEL}) is None  # the model charges it
    assert free_remote_why(tcg | {"remote_latency": {"model": None}}) == "plain TCG, no --remote-latency model"
    kvm = {"accelerator": {"name": "kvm"}}
    assert free_remote_why(kvm | {"placement": {"memory_host_nodes": [0, 1]}}) is None
    assert "host node 0" in free_remote_why(kvm | {"placement": {"memory_host_nodes": [0, 0]}})
    assert free_remote_why(kvm | {"placement": {"memory_host_nodes": [0]}}) is None  # one guest node: no remote
    for junk in ({}, [], {"accelerator": "tcg"}, {"accelerator": {"name": 3}}, None):
        assert free_remote_why(junk) is None  # a record that cannot say is not given a caveat it did not earn
    assert free_remote([tcg, kvm]) == "plain TCG, no --remote-latency model" and free_remote([kvm]) is None
    # only the workload's own rows measure what remote memory costs
    assert row_caveat("workload.gbps", "GB/s", "x") == f"{FREE_REMOTE} (x)"
    for key, unit in (("workload.elapsed_s", "s"), ("workload.round_trips_per_vcpu_s", "1/vCPU-s"),
                      ("workload.pipe_usecs_per_op", "us"), ("workload.remote_ratio", "x"),
                      ("workload.stressng_ops_per_cpu_s", "1/CPU-s"), ("workload.mine", "ops / s")):  # fmt: skip
        assert row_caveat(key, unit, "x"), key
    # a share of where memory or tasks ended up is not a speed: the VM does not change it
    assert row_caveat("workload.local_pct", "%", "x") == row_caveat("workload.balance_pct", "%", "x") == ""
    assert row_caveat("vmstat.numa_pages_migrated", "pages", "x") == row_caveat("workload.gbps", "GB/s", None) == ""


def test_under_plain_tcg_each_throughput_row_says_so_in_every_rendering() -> None:
    c = cmp.compare_runs(*_ab())
    gbps = c.row("workload.gbps")
    assert gbps is not None and gbps.verdict() == "worse"  # what the records say: balancing cost 73% here
    assert FREE_REMOTE in gbps.verdict_text() and gbps.verdict_text().startswith("worse: ")
    assert not c.row("vmstat.numa_pages_migrated").caveat and not c.row("timings.boot_s").caveat
    text = ab_table.to_text(c)
    line = next(ln for ln in text.splitlines() if ln.startswith("Hmean") and "workload.gbps" in ln)
    assert FREE_REMOTE in line  # in the row itself, not only in a note
    assert any(MODELLED_FLAGS in n for n in c.notes)
    md = next(ln for ln in ab_table.to_markdown(c).splitlines() if ln.startswith("| workload.gbps |"))
    assert FREE_REMOTE in md
    html_row = ab_table.to_html(c).split("workload.gbps")[1].split("</tr>")[1]
    assert FREE_REMOTE in html_row
    rows = {m["metric"]: m for m in ab_table.to_dict(c)["metrics"]}
    assert FREE_REMOTE in rows["workload.gbps"]["caveat"] and rows["vmstat.numa_hint_faults"]["caveat"] == ""
    # the verdict lines of ab, bisect and the matrix's auto cells
    base, new = ([r.manifest for r in side] for side in _ab())
    (v, w) = verdicts_of(base, new, ["workload.gbps", "vmstat.numa_pages_migrated"])
    assert FREE_REMOTE in v.line() and FREE_REMOTE not in w.line()


def test_under_the_model_no_row_carries_it() -> None:
    base, new = _ab()
    for r in base + new:
        r.manifest = _modelled(r.manifest)
    c = cmp.compare_runs(base, new)
    assert not any(FREE_REMOTE in r.caveat for r in c.rows) and not any(FREE_REMOTE in n for n in c.notes)
    assert FREE_REMOTE not in ab_table.to_text(c)
    f = finding.finding(c)
    assert f is not None and f.cannot_show is None and FREE_REMOTE not in (f.workload_row or "")


def test_a_metric_undefined_on_one_side_gets_no_verdict() -> None:
    """With balancing off there are no hint faults, so no hint-fault locality: the row says n/a, never a
    significant difference against the other side."""
    c = cmp.compare_runs(*_ab())
    assert c.row("vmstat.hint_local_pct") is None
    ((key, side, stats),) = [u for u in c.undefined if u[0] == "vmstat.hint_local_pct"]
    assert side == "baseline" and stats.n == 3
    assert any(ln.startswith("n/a") and key in ln for ln in ab_table.to_text(c).splitlines())
    undefined = {"metric": key, "missing_on": "baseline", "verdict": "n/a", "fair_class_only": False}
    assert undefined in ab_table.to_dict(c)["undefined"]
    assert f"| {key} |" in ab_table.to_markdown(c) and key in ab_table.to_html(c)


def test_the_finding_is_computed_from_the_runs() -> None:
    c = cmp.compare_runs(*_ab())
    f = finding.finding(c)
    assert f is not None
    by = {r["metric"]: r for r in f.rows}
    assert by["vmstat.hint_local_pct"]["baseline"] == "none (no hint faults)"
    assert by["vmstat.hint_local_pct"]["verdict"].startswith("n/a")
    migrated = c.row("vmstat.numa_pages_migrated")
    assert by["vmstat.numa_pages_migrated"]["new"].startswith(f"{migrated.mean(migrated.new):,.0f}")
    assert by["vmstat.numa_pages_migrated"]["verdict"] == "changed (significant)"
    assert f.acted.startswith(f"With {c.new_label}, NUMA balancing") and c.base_label in f.acted
    assert f.cannot_show is not None and MODELLED_FLAGS in f.cannot_show and "ring-4" in f.cannot_show
    assert f.workload_row is not None and FREE_REMOTE in f.workload_row
    # the sides swapped: the other side acted, and the finding says so
    s = cmp.compare_runs(*reversed(_ab()))
    assert finding.finding(s).acted.startswith(f"With {s.base_label}, NUMA balancing")
    # balancing on both sides: the sentence compares their locality by numalab's verdict (2 + 1 runs: not judged)
    on = _ab()[1]
    both = finding.finding(cmp.compare_runs(on[:2], on[2:]))
    assert both.acted.startswith("NUMA balancing acted on both sides; their hint-fault locality was not told apart")
    assert both.acted.endswith("not judged (fewer than 3 runs a side).")
    # the same runs on both sides of nothing: no side acted
    off = _ab()[0]
    same = finding.finding(cmp.compare_runs(off[:2], off[2:]))
    assert same is not None and "did nothing measurable on either side" in same.acted


def test_no_mechanism_rows_no_finding() -> None:
    c = cmp.compare_runs(*_ab())
    c.rows = [r for r in c.rows if r.metric.key.startswith("workload.")]
    c.undefined = []
    assert finding.finding(c) is None and finding.to_text(c) == "" and finding.to_dict(c) is None


@pytest.mark.parametrize("fmt", ["text", "md", "html"])
def test_compare_closes_with_the_finding(fmt: str) -> None:
    args = ["compare", "--baseline", *map(str, OFF), "--new", *map(str, ON), "--format", fmt]
    out = numalab(*args).stdout
    table_ends = out.rindex("timings.boot_s")  # the table's last row
    assert table_ends < out.rindex("inding") < out.rindex(MODELLED_FLAGS)  # then the finding, to the end


def test_compare_json_has_the_finding() -> None:
    out = numalab("compare", "--json", "--baseline", *map(str, OFF), "--new", *map(str, ON)).stdout
    d = json.loads(out)
    assert d["finding"]["free_remote_memory"] is True and d["finding"]["mechanism"]
    assert any(m["caveat"] for m in d["metrics"])


def test_the_report_carries_the_caveat_and_the_finding(tmp_path) -> None:
    from lab.report.report_model import build_report

    paths = build_report([*OFF, *ON], tmp_path / "report.html")
    report = paths.data
    (comp,) = report["comparisons"]
    rows = {m["metric"]: m for m in comp["metrics"]}
    assert FREE_REMOTE in rows["workload.gbps"]["caveat"] and comp["finding"]["cannot_show"]
    md = (tmp_path / "report.md").read_text()
    assert "**Finding**" in md and MODELLED_FLAGS in md.split("**Finding**")[1]
    assert FREE_REMOTE in next(ln for ln in md.splitlines() if ln.startswith("| workload.gbps |"))
    page = (tmp_path / "report.html").read_text()
    assert '<div class="finding">' in page and 'class="caveat"' in page  # the dot plots' verdicts too
