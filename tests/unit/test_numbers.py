"""Issue 17: every number right, checked on real run records (tests/data/runs).

Each figure is recomputed here independently of lab.analysis: per-CPU buffer
stats and trace-cmd's DROPPED notices are grepped from the files, vmstat
deltas subtracted by hand, mmtests' cidiff written out from its Stat.pm.
"""

from __future__ import annotations

import io
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from common import REPO, numalab

from lab.analysis import compare as cmp
from lab.analysis import stats
from lab.analysis.ab_plan import ABPlan
from lab.analysis.display import percent
from lab.analysis.kernel_complaints import complaints, read_complaints
from lab.analysis.metrics import run_metrics
from lab.analysis.record import RunRecord
from lab.report import ab_table
from lab.report.report_model import build_report
from lab.run.summary import print_summary
from lab.topology.model.spec import load_topology, preset_names
from lab.topology.predictions.kernel_warnings import predicted_warnings

DATA = REPO / "tests" / "data" / "runs"
ON = sorted(DATA.glob("ring4-numa01-on-*"))
OFF = sorted(DATA.glob("ring4-numa01-off-*"))
TINY = DATA / "ring4-numa01-tinybuf"  # --trace-buffer-kb 16 --event sched:sched_stat_runtime
ASYM = DATA / "asym3-idle"  # an asymmetric 3-node SLIT, idle
ASYM_SPEC = REPO / "tests" / "data" / "topologies" / "warn-asymmetric-slit.yaml"


def _metrics(run: Path) -> dict:
    r = RunRecord.load(run)
    return run_metrics(run, r.topology, tuple(r.manifest["settings"]["trace_events"]), r.workload_start_uptime)


def _stat_by_cpu(run: Path, key: str) -> dict[int, int]:
    """grep -H "" per_cpu/cpu*/stats, read back by hand."""
    out = {}
    for line in (run / "trace-stats.txt").read_text().splitlines():
        m = re.match(rf".*/cpu(\d+)/stats:{key}: (\d+)$", line)
        if m:
            out[int(m.group(1))] = int(m.group(2))
    return out


def _dropped_notices(run: Path) -> dict[int, int]:
    text = subprocess.run(
        ["trace-cmd", "report", "-i", str(run / "trace.dat")], capture_output=True, text=True, check=True
    ).stdout
    out: dict[int, int] = {}
    for cpu, n in re.findall(r"CPU:(\d+) \[(\d+) EVENTS DROPPED\]", text):
        out[int(cpu)] = out.get(int(cpu), 0) + int(n)
    return out


def _vmstat_delta(run: Path, key: str) -> int:
    def val(name: str) -> int:
        line = next(ln for ln in (run / name).read_text().splitlines() if ln.split()[0] == key)
        return int(line.split()[1])

    return val("vmstat.end") - val("vmstat.start")


# --- 1. lost events counted once ------------------------------------------------------------


def test_tiny_buffer_record_loses_the_same_events_in_stats_and_notices() -> None:
    """The record's premise: both sources see the same per-CPU losses (so their sum counts them twice)."""
    overrun = _stat_by_cpu(TINY, "overrun")
    assert sum(overrun.values()) == 2020
    assert _dropped_notices(TINY) == {c: n for c, n in overrun.items() if n}


def test_lost_events_counted_once_per_cpu() -> None:
    m = _metrics(TINY)
    overrun = _stat_by_cpu(TINY, "overrun")
    assert m["lost_events"] == sum(overrun.values()) == 2020  # was 4,040: stats + notices
    assert m["lost_per_cpu"] == {str(c): n for c, n in overrun.items() if n}
    # the record's own manifest was written before the fix: it has the double count
    assert RunRecord.load(TINY).manifest["metrics"]["lost_events"] == 4040


def test_perfetto_timeline_counts_each_loss_once() -> None:
    from lab.report.perfetto import perfetto_trace

    assert perfetto_trace(RunRecord.load(TINY))["otherData"]["lost_events"] == 2020


@pytest.mark.parametrize("run", ON + OFF, ids=lambda p: p.name)
def test_whole_runs_lose_nothing(run: Path) -> None:
    m = _metrics(run)
    assert m["lost_events"] == 0 and m["trace_incomplete"] is False


# --- 2. a run that lost most of its events is marked ----------------------------------------


def test_incomplete_trace_is_marked_in_the_metrics() -> None:
    m = _metrics(TINY)
    entries = sum(_stat_by_cpu(TINY, "entries").values())
    assert m["trace_records"] == entries == 2751  # trace.dat holds what the buffers held
    assert m["lost_share"] == pytest.approx(2020 / (2751 + 2020))
    assert m["trace_incomplete"] is True


def test_incomplete_trace_on_the_cli_line() -> None:
    manifest = json.loads((TINY / "manifest.json").read_text())
    manifest["metrics"] = _metrics(TINY)
    out = io.StringIO()
    print_summary(manifest, out)
    text = out.getvalue()
    events_line = next(ln for ln in text.splitlines() if "mm_migrate_pages=" in ln)
    assert "INCOMPLETE" in events_line and "42.3% of its records" in events_line
    assert "LOST EVENTS: 2,020 of 4,771 trace records lost (42.3%)" in text
    assert "4,040" not in text and "4040" not in text


def test_incomplete_trace_in_report_markdown_and_json(tmp_path: Path) -> None:
    paths = build_report([ON[0], TINY], tmp_path / "r.html")
    md = paths.markdown.read_text()
    header = next(ln for ln in md.splitlines() if ln.startswith("| run |"))
    assert "| lost |" in header
    tiny_row = next(ln for ln in md.splitlines() if ln.startswith("| 20261123-073801"))
    assert "**2,020 (42.3%)**" in tiny_row
    assert "trace incomplete: 2,020 of 4,771 trace records lost (42.3%)" in md
    data = json.loads(paths.json.read_text())
    by_id = {r["run_id"]: r for r in data["runs"]}
    assert by_id["20261123-073801-ring-4-stock-numa01-dbaf"]["trace_incomplete"] is True
    assert by_id[RunRecord.load(ON[0]).run_id]["trace_incomplete"] is False
    assert paths.json == tmp_path / "r.json" and paths.markdown == tmp_path / "r.md"  # named after --out


def test_compare_leaves_incomplete_runs_out_unless_asked() -> None:
    base = [RunRecord.load(p) for p in ON[:2]]
    new = [RunRecord.load(ON[2]), RunRecord.load(TINY)]
    c = cmp.compare_runs(base, new)
    assert c.new_runs == [ON[2].name]
    assert any("ring4-numa01-tinybuf (trace incomplete: 2,020 of 4,771" in x for x in c.excluded)
    assert any("--include-incomplete" in n for n in c.notes)
    assert "excluded: ring4-numa01-tinybuf" in ab_table.to_text(
        c
    ) and "excluded: ring4-numa01-tinybuf" in ab_table.to_markdown(c)
    c2 = cmp.compare_runs(base, new, include_incomplete=True)
    assert c2.new_runs == [ON[2].name, TINY.name]
    assert c2.row("events.mm_migrate_pages").new.n == 2


def test_compare_cli_include_incomplete() -> None:
    args = ["compare", "--baseline", *map(str, ON[:2]), "--new", str(ON[2]), str(TINY), "--json"]
    left_out = json.loads(numalab(*args).stdout)
    counted = json.loads(numalab(*args, "--include-incomplete").stdout)
    assert left_out["new_runs"] == [ON[2].name]
    assert counted["new_runs"] == [ON[2].name, TINY.name]


# --- 3. hint-local rounded once -----------------------------------------------------------------


def test_percent_rounds_once_and_never_to_a_false_100() -> None:
    exact = 5537 * 100 / 5540  # 99.9458...
    assert percent(exact, 2) == "99.95"
    assert percent(exact, 1) == "99.9"  # round(exact, 2) = 99.95 and then .1f gave "100.0"
    assert percent(99.97, 1) == "99.9" and percent(100.0, 1) == "100.0"
    assert percent(0.02, 1) == "0.1" and percent(0.0, 1) == "0.0"


@pytest.mark.parametrize("run", [*ON, TINY], ids=lambda p: p.name)
def test_hint_local_stored_exact_and_printed_from_it(run: Path) -> None:
    faults = _vmstat_delta(run, "numa_hint_faults")
    local = _vmstat_delta(run, "numa_hint_faults_local")
    exact = local * 100 / faults
    m = _metrics(run)
    assert m["vmstat"]["hint_local_pct"] == exact  # not pre-rounded
    assert m["mmtests"]["NUMA hint local percent"] == exact
    manifest = json.loads((run / "manifest.json").read_text()) | {"metrics": m}
    out = io.StringIO()
    print_summary(manifest, out)
    assert f"hint-local={exact:.2f}%" in out.getvalue()


def test_no_hint_faults_is_not_printed_as_100_percent() -> None:
    manifest = json.loads((OFF[0] / "manifest.json").read_text()) | {"metrics": _metrics(OFF[0])}
    out = io.StringIO()
    print_summary(manifest, out)
    assert "hint-local=-" in out.getvalue()


# --- 4. which mean ------------------------------------------------------------------------------


def _hint_values(runs: list[Path]) -> list[float]:
    return [_vmstat_delta(r, "numa_hint_faults_local") * 100 / _vmstat_delta(r, "numa_hint_faults") for r in runs]


def test_percentages_use_the_arithmetic_mean() -> None:
    base, new = ON[:2], [ON[2], TINY]
    c = cmp.compare_runs([RunRecord.load(p) for p in base], [RunRecord.load(p) for p in new], include_incomplete=True)
    row = c.row("vmstat.hint_local_pct")
    assert row.mean_name == "Amean"
    for side, runs in ((row.base, base), (row.new, new)):
        vals = _hint_values(runs)
        assert side.mean_of("amean") == pytest.approx(sum(vals) / len(vals))
        assert row.mean(side) == pytest.approx(sum(vals) / len(vals))
    assert c.row("workload.gbps").mean_name == "Hmean"  # a rate
    assert c.row("vmstat.autonuma_cost").mean_name == "Amean"


def test_one_near_zero_run_does_not_dominate_a_percentage() -> None:
    """The issue's figures: Hmean 7.16 against Amean 37.5 made %diff read -92% instead of about -59%."""
    base = stats.Stats.of([89.0, 90.0, 89.5])
    new = stats.Stats.of([2.5, 60.0, 50.0])
    pct = cmp.Metric("vmstat.hint_local_pct", "", "%", "higher")
    rate = cmp.Metric("workload.gbps", "", "GB/s", "higher", "hmean")
    row = cmp.Row(pct, base, new, None)
    assert row.mean_name == "Amean" and row.mean(new) == pytest.approx(37.5)
    assert cmp.pct_better(row.mean(base), row.mean(new), "higher") == pytest.approx(-58.1, abs=0.1)
    assert cmp.Row(rate, base, new, None).mean(new) == pytest.approx(3 / (1 / 2.5 + 1 / 60 + 1 / 50))


def test_every_rendering_names_its_mean_and_markdown_has_coeffvar() -> None:
    c = cmp.compare_runs([RunRecord.load(p) for p in ON[:2]], [RunRecord.load(ON[2])])
    text, md, html = ab_table.to_text(c), ab_table.to_markdown(c), ab_table.to_html(c)
    assert re.search(r"^Amean\s+vmstat\.hint_local_pct", text, re.M)
    assert re.search(r"^Hmean\s+workload\.gbps", text, re.M)
    assert not re.search(r"\bmean\b", md.split("| metric |")[1].splitlines()[0])  # no bare "mean" column
    assert "| vmstat.hint_local_pct | higher | Amean |" in md
    assert "CoeffVar" in md.split("| metric |")[1].splitlines()[0]
    assert "<td>Amean</td>" in html and "<td>Hmean</td>" in html
    assert ">mean<" not in html


# --- 5. the significance rule -------------------------------------------------------------------


def _mmtests_cidiff_significant(b: list[float], n: list[float], hmean: bool) -> bool:
    """mmtests Stat.pm, written out: meanci = mean -/+ qnorm(0.975, sd=stddev-<mean>), cidiff > 1."""

    def mean_sd(x: list[float]) -> tuple[float, float]:
        if hmean:
            h = len(x) / sum(1 / v for v in x)
            return h, math.sqrt(sum((1 / v - 1 / h) ** 2 for v in x) * h**4 / len(x))
        a = sum(x) / len(x)
        return a, math.sqrt(sum((v - a) ** 2 for v in x) / (len(x) - 1))

    (mb, sb), (mn, sn) = mean_sd(b), mean_sd(n)
    q = 1.959963984540054
    cisum = q * sn + q * sb
    ratio = (mn - mb) / cisum if cisum else (mn - mb)
    return abs(ratio) > 1


def _values(runs: list[Path], key: str) -> list[float]:
    from lab.analysis.metrics import metric_values

    return [v[key] for r in runs if key in (v := metric_values(RunRecord.load(r).manifest))]


def test_ci_overlap_is_what_mmtests_computes() -> None:
    c = cmp.compare_runs(
        [RunRecord.load(p) for p in OFF], [RunRecord.load(p) for p in ON], ABPlan(significance="ci-overlap")
    )
    assert len(c.rows) > 8
    for row in c.rows:
        b, n = _values(OFF, row.metric.key), _values(ON, row.metric.key)
        assert row.significant == _mmtests_cidiff_significant(b, n, row.mean_name == "Hmean"), row.metric.key


def test_welch_is_the_default_and_ci_overlap_is_stricter() -> None:
    assert stats.DEFAULT_SIGNIFICANCE == "welch"
    base, new = [RunRecord.load(p) for p in OFF], [RunRecord.load(p) for p in ON]
    assert cmp.compare_runs(base, new).significance == "welch"
    # Equal spread, 6 a side: Welch marks a 2-sigma shift, mmtests' rule (3.92 sigma) does not.
    a = stats.Stats.of([10.0, 11.0, 12.0, 10.0, 11.0, 12.0])
    b = stats.Stats.of([v + 2 * a.stddev for v in (10.0, 11.0, 12.0, 10.0, 11.0, 12.0)])
    assert stats.significant(a, b, "welch") is True
    assert stats.significant(a, b, "ci-overlap") is False
    help_text = numalab("compare", "--help").stdout
    assert "welch" in help_text and "(default)" in help_text


# --- 6. the guest kernel's complaints -------------------------------------------------------------


def test_asymmetric_slit_complaints_read_from_the_real_boot_log() -> None:
    found = read_complaints(ASYM)
    assert [c["message"] for c in found] == [
        "ERROR: Node-distance not symmetric",
        "ERROR: groups don't span domain->span",
    ]
    assert found[1]["cpus"] == [0] and found[1]["where"] == ["CPU0 domain-1 (NUMA, span 0-2)"]
    # ... which the run's own verdict said nothing about: it was made before the fix
    manifest = json.loads((ASYM / "manifest.json").read_text())
    assert manifest["guest_topology_ok"] is True and "kernel_complaints" not in manifest["guest_topology"]


@pytest.mark.parametrize("run", [*ON, *OFF, TINY], ids=lambda p: p.name)
def test_symmetric_presets_boot_without_complaints(run: Path) -> None:
    assert read_complaints(run) == []


def test_complaints_each_once_with_their_cpus() -> None:
    log = "\n".join(
        [
            "[    0.1] CPU0 attaching sched-domain(s):",
            "[    0.1]  domain-0: span=0-3 level=NUMA",
            "[    0.1] ERROR: groups don't span domain->span",
            "[    0.2] CPU2 attaching sched-domain(s):",
            "[    0.2]  domain-0: span=0-3 level=NUMA",
            "[    0.2] ERROR: groups don't span domain->span",
            "[    0.3] SRAT: SRAT not used.",
            "[    0.3] ACPI: SRAT 0x00000000000D24E1 0001A0 (v01 BOCHS  BXPC     00000001 BXPC 00000001)",
        ]
    )
    found = complaints(log)
    assert [(c["source"], c["count"], c["cpus"]) for c in found] == [("sched-domains", 2, [0, 2]), ("srat", 1, [])]


def test_run_verdict_carries_the_complaints() -> None:
    manifest = json.loads((ASYM / "manifest.json").read_text())
    manifest["guest_topology"]["kernel_complaints"] = read_complaints(ASYM)
    out = io.StringIO()
    print_summary(manifest, out)
    text = out.getvalue()
    assert "guest topology ok, but the kernel complained (2)" in text
    assert "KERNEL: ERROR: Node-distance not symmetric" in text


def test_report_shows_the_complaints(tmp_path: Path) -> None:
    paths = build_report([ASYM], tmp_path / "r.html")
    assert "guest kernel: ERROR: Node-distance not symmetric" in paths.markdown.read_text()
    html = paths.html.read_text()
    assert "matches, kernel complained" in html and "Node-distance not symmetric" in html


def test_topo_check_warns_about_an_asymmetric_slit() -> None:
    proc = numalab("topo", "check", str(ASYM_SPEC))
    assert proc.returncode == 0
    assert proc.stderr.startswith("numalab: warning: ") and "Node-distance not symmetric" in proc.stderr
    assert predicted_warnings(load_topology(str(ASYM_SPEC)))
    assert "warning: asymmetric SLIT" in numalab("topo", "show", str(ASYM_SPEC)).stdout


@pytest.mark.parametrize("name", preset_names())
def test_presets_predict_no_complaints(name: str) -> None:
    # (but gnr-2s-snc3, whose asymmetric SLIT is the point: the machine of commit 4d6dd05d07d0)
    warnings = predicted_warnings(load_topology(name))
    if name == "gnr-2s-snc3":
        assert len(warnings) == 1 and "asymmetric SLIT" in warnings[0], warnings
    else:
        assert warnings == []


# --- 7. small wrong things ------------------------------------------------------------------------


def test_ring4_overlap_is_in_the_30_level_domain_as_documented() -> None:
    """From the real boot log of ring-4: CPU 0's 20-level groups are disjoint, its 30-level ones overlap."""
    log = (ON[0] / "dmesg-boot.txt").read_text()
    block = log.split("CPU0 attaching sched-domain(s):")[1].split("CPU1 attaching")[0]
    groups = re.findall(r"domain-(\d+): span=(\S+) level=NUMA\n.*?groups: (.*)\n", block)
    spans = {int(d): re.findall(r"span=([\d,-]+)", g) for d, _, g in groups}
    assert spans == {1: ["0-1", "2-3", "6-7"], 2: ["0-3,6-7", "2-7"]}
    readme = (REPO / "topologies" / "README.md").read_text()
    row = next(ln for ln in readme.splitlines() if ln.startswith("| `ring-4`"))
    assert "30-level domain" in row and "{0-3,6-7} and {2-7}" in row and "at the 20 level" not in row


def test_docs_name_the_json_after_the_html() -> None:
    readme = (REPO / "docs" / "reports.md").read_text()
    assert "`--out r.html` gives `r.json`" in readme


def test_a_timed_out_run_prints_no_minus_s() -> None:
    manifest = json.loads((ON[0] / "manifest.json").read_text())
    manifest["timings"] |= {"workload_s": None, "boot_s": None}
    out = io.StringIO()
    print_summary(manifest, out)
    assert "-s" not in out.getvalue().split("\n")[2]
    assert "boot -  workload -  total" in out.getvalue()


def test_topo_show_without_description(tmp_path: Path) -> None:
    spec = tmp_path / "plain.yaml"
    shutil.copy(ASYM_SPEC, spec)
    spec.write_text("\n".join(ln for ln in spec.read_text().splitlines() if not ln.startswith("description")))
    first = numalab("topo", "show", str(spec)).stdout.splitlines()[0]
    assert first == "asym-3"


def test_links_print_cpulists() -> None:
    out = numalab("topo", "show", "ring-8").stdout
    assert "cpus 0-0" not in out and "[0] (cpus 0, 256M)" in out
    assert "[0] (cpus 0-1, 512M)" in numalab("topo", "show", "ring-4").stdout


# --- 4, on a real A/B with near-zero hint-local runs ----------------------------------------------

AB_A = sorted(DATA.glob("ring4x1-pairs-ab-a*"))
AB_B = sorted(DATA.glob("ring4x1-pairs-ab-b*"))


def test_real_ab_hint_local_uses_the_arithmetic_mean() -> None:
    """B has two runs at about 0.6% hint-local: the Hmean (1.14) made %diff read -98.6%; the Amean gives -62.8%."""
    a, b = _hint_values(AB_A), _hint_values(AB_B)
    assert sorted(round(v, 2) for v in b) == [0.57, 0.58, 50.0, 66.67]
    c = cmp.compare_runs([RunRecord.load(p) for p in AB_A], [RunRecord.load(p) for p in AB_B])
    row = c.row("vmstat.hint_local_pct")
    assert row.mean_name == "Amean"
    assert row.mean(row.base) == pytest.approx(sum(a) / 4) and row.mean(row.new) == pytest.approx(sum(b) / 4)
    pct = ab_table.to_dict(c)["metrics"][[r.metric.key for r in c.rows].index("vmstat.hint_local_pct")]["pct_diff"]
    assert pct == pytest.approx((sum(b) - sum(a)) * 100 / sum(a))
    assert round(pct, 1) == -62.8
    assert row.new.hmean == pytest.approx(1.14, abs=0.01)  # what the table showed before
    rt = c.row("workload.round_trips_per_s")
    assert rt.mean_name == "Hmean"  # a rate keeps mmtests' Hmean
    rates = [json.loads((p / "manifest.json").read_text())["workload"]["result"]["round_trips_per_s"] for p in AB_B]
    assert rt.mean(rt.new) == pytest.approx(len(rates) / sum(1 / v for v in rates))


def test_real_ab_ci_overlap_is_what_mmtests_computes() -> None:
    c = cmp.compare_runs(
        [RunRecord.load(p) for p in AB_A], [RunRecord.load(p) for p in AB_B], ABPlan(significance="ci-overlap")
    )
    for row in c.rows:
        b, n = _values(AB_A, row.metric.key), _values(AB_B, row.metric.key)
        assert row.significant == _mmtests_cidiff_significant(b, n, row.mean_name == "Hmean"), row.metric.key


def test_ci_overlap_edges_follow_mmtests() -> None:
    """Both sigma 0: mmtests' cidiff returns the bare difference, significant above 1 (not above 0)."""
    same = stats.Stats.of([5.0, 5.0, 5.0])
    assert stats.significant(same, stats.Stats.of([5.5, 5.5, 5.5]), "ci-overlap") is False
    assert stats.significant(same, stats.Stats.of([6.5, 6.5, 6.5]), "ci-overlap") is True
    # Hmean rows: the interval is about the Hmean, with mmtests' stddev-hmean.
    a, b = [1.0, 2.0, 4.0], [3.0, 4.0, 5.0]
    sa, sb = stats.Stats.of(a), stats.Stats.of(b)
    assert sa.hstddev == pytest.approx(math.sqrt(sum((1 / v - 1 / sa.hmean) ** 2 for v in a) * sa.hmean**4 / 3))
    for mean in ("amean", "hmean"):
        assert stats.significant(sa, sb, "ci-overlap", mean) == _mmtests_cidiff_significant(a, b, mean == "hmean")


def test_asymmetry_towards_a_cpuless_node_draws_no_warning(tmp_path: Path) -> None:
    """sched_init_numa() compares distances between nodes with CPUs only."""
    spec = tmp_path / "cpuless-asym.yaml"
    spec.write_text(
        "name: cpuless-asym\nnodes:\n  - {id: 0, cpus: 1, memory: 256M}\n  - {id: 1, cpus: 1, memory: 256M}\n"
        "  - {id: 2, cpus: 0, memory: 256M}\n"
        "distances:\n  - [10, 20, 30]\n  - [20, 10, 30]\n  - [40, 40, 10]\n"
    )
    assert predicted_warnings(load_topology(str(spec))) == []
    proc = numalab("topo", "check", str(spec))
    assert proc.returncode == 0 and proc.stderr == ""


def test_compare_notes_runs_under_different_remote_latency_models() -> None:
    base = [RunRecord.load(p) for p in ON[:2]]
    new = [RunRecord.load(p) for p in ON[2:3]]
    # (the note of the rows' caveat, lab.analysis.caveats, names --remote-latency too: not this one)
    assert not any("remote-latency models" in n for n in cmp.compare_runs(base, new).notes)
    model = {"source": "slit", "local_ns": 200.0, "ratios": [[1.0, 2.0], [2.0, 1.0]]}
    new[0].manifest["remote_latency"] = {"model": model}
    (note,) = [n for n in cmp.compare_runs(base, new).notes if "remote-latency models" in n]
    assert "different remote-latency models (off; slit, L 200.0 ns, ratios 1/2)" in note
    assert "not a kernel change" in note
