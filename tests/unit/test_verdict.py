"""--repeat auto: the power estimate, the stopping rule, verdict lines, matrix auto rounds, reproduction checks.

No VMs: the figures below are the seed's and ones with the spread TCG repeats show, and the matrix
rounds run over a fake execute_matrix that writes manifests.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from common import assert_one_line_error, numalab

from lab.analysis import verdict as vd
from lab.analysis.ab_plan import ABPlan
from lab.analysis.expectations import outcome_of
from lab.analysis.stats import ci_overlap_margin, repeats_needed
from lab.errors import LabError
from lab.matrix import auto_cells as mauto
from lab.matrix.definition import load_matrix, parse_matrix
from lab.matrix.schedule import MatrixOutcome, RunResult, run_dir

# Figures with the spread TCG repeats of one ring-4 numa01 run show (numa_pages_migrated, CoeffVar ~40%).
TCG_A = [1811.0, 904.0, 1522.0, 2410.0, 1210.0]
TCG_B = [1650.0, 2105.0, 890.0, 1402.0, 2230.0]

# --- power -------------------------------------------------------------------


def test_repeats_needed_follows_the_normal_approximation() -> None:
    base, new = [10.0, 12.0, 14.0], [20.0, 22.0, 24.0]  # sd 2 each, delta 10
    est = repeats_needed(base, new)
    # (1.96 + 0.8416)^2 * (4 + 4) / 100 = 0.63 -> at least 3 a side
    assert est.per_side == 3
    base, new = [10.0, 12.0, 14.0], [11.0, 13.0, 15.0]  # delta 1: 7.85 * 8 / 1 = 62.8 -> 63
    assert repeats_needed(base, new).per_side == 63
    assert repeats_needed(base, new).effect == pytest.approx(0.5)


def test_repeats_needed_grows_with_noise_and_is_none_without_a_difference() -> None:
    quiet = repeats_needed([100.0, 101.0, 99.0], [110.0, 111.0, 109.0]).per_side
    noisy = repeats_needed(TCG_A, TCG_B).per_side
    assert quiet == 3 and noisy is not None and noisy > 50  # means within 1% at CoeffVar ~40%
    assert repeats_needed([5.0, 5.0, 5.0], [5.0, 5.0, 5.0]).per_side is None
    with pytest.raises(ValueError):
        repeats_needed([], [1.0])


def test_ci_overlap_margin() -> None:
    assert ci_overlap_margin([10.0, 12.0, 14.0], [20.0, 22.0, 24.0]) == pytest.approx(10 / (1.96 * 4))
    assert ci_overlap_margin([1.0, 1.0], [2.0, 2.0]) is None


# --- verdicts and the stopping rule --------------------------------------------


def test_seed003_figures_give_a_significant_worse_verdict_for_the_revert() -> None:
    # hint local percent, baseline (with the allowance) vs the revert, from runs shaped like the seed's figures
    base, new = [99.3, 98.7, 99.6, 99.1], [52.2, 61.0, 47.5, 55.9]
    v = vd.verdict_of(
        "vmstat.hint_local_pct",
        base,
        new,
        ABPlan(significance="welch"),
        vd.Sides("tcg", ("baseline", "seed003-revert"), "ring-2"),
    )
    assert v.direction == "worse" and v.significant is True and v.decided
    assert v.pct_diff == pytest.approx((sum(new) / 4 - len(base) / sum(1 / x for x in base)) * 100 /
                                       (len(base) / sum(1 / x for x in base)), rel=0.02)  # fmt: skip
    line = v.line()
    for part in ("vmstat.hint_local_pct", "seed003-revert vs baseline", "worse", "%", "significant (welch)",
                 "4+4 runs", "tcg", "ring-2"):  # fmt: skip
        assert part in line, line


def test_noisy_tcg_counts_are_not_significant_and_say_what_they_would_need() -> None:
    v = vd.verdict_of("vmstat.numa_pages_migrated", TCG_A, TCG_B, ABPlan(significance="welch"), vd.Sides("tcg"))
    # (issue 71: "undecided", not "same": not significant does not show the sides the same)
    assert v.direction == "undecided" and v.significant is False and not v.decided and v.equivalent is False
    assert v.needed_per_side is not None and v.needed_per_side > 50
    assert f"~{v.needed_per_side}/side needed" in v.line()
    # a mechanism counter has no better: its means moved higher, not worse
    assert ": undecided (higher by the Amean), " in v.line() and v.moved == "higher"
    few = vd.verdict_of(
        "vmstat.numa_pages_migrated", TCG_A[:2], TCG_B[:2], ABPlan(significance="welch"), vd.Sides("tcg")
    )
    assert few.direction == "unknown" and "not judged" in few.line()
    none = vd.verdict_of("vmstat.hint_local_pct", [], [50.0], ABPlan(significance="welch"), vd.Sides("tcg"))
    assert none.direction == "unknown" and none.pct_diff is None


def test_the_significance_rule_keeps_its_json_name_and_place() -> None:
    """Verdict.significance is "rule" in the JSON (verdict.json, auto.json, bisect's state), where it always was:
    right after "significant"."""
    plan = ABPlan(significance="ci-overlap")
    v = vd.verdict_of("vmstat.hint_local_pct", [99.3, 98.7, 99.6], [52.2, 61.0, 47.5], plan)
    keys = list(v.to_dict())
    assert v.to_dict()["rule"] == v.significance == "ci-overlap" and "significance" not in keys
    assert keys[keys.index("significant") + 1] == "rule"


def _v(direction: str, n: int = 3) -> vd.Verdict:
    return vd.Verdict("vmstat.numa_pages_migrated", "lower", direction, 1.0, direction in ("better", "worse"),
                      "welch", n, n, 1.0, 1.0, "tcg", 9, 0.5)  # fmt: skip


def test_stopping_rule() -> None:
    plan = ABPlan(min_pairs=3, max_pairs=8)
    # never before the minimum
    assert not vd.should_stop([_v("better")], 2, plan).stop
    # every chosen metric significant, either way
    s = vd.should_stop([_v("better"), _v("worse")], 3, plan)
    assert s.stop and s.reason == "decided"
    # shown the same (the equivalence test) decides too
    assert vd.should_stop([_v("better"), _v("same")], 3, plan).stop
    # one not yet: go on, then stop at the budget of pairs
    assert not vd.should_stop([_v("better"), _v("undecided")], 4, plan).stop
    s = vd.should_stop([_v("better"), _v("undecided")], 8, plan)
    assert s.stop and s.reason == "max-repeats" and "vmstat.numa_pages_migrated" in s.detail
    assert "still undecided" in s.detail
    # a time budget the next pair would overrun
    budget = ABPlan(min_pairs=3, max_pairs=8, time_budget=120)
    s = vd.should_stop([_v("undecided")], 4, budget, elapsed_s=100, pair_s=30)
    assert s.stop and s.reason == "time-budget"
    assert not vd.should_stop([_v("undecided")], 4, budget, elapsed_s=50, pair_s=30).stop
    # a metric with no values on a side does not hold the loop
    absent = vd.Verdict("vmstat.hint_local_pct", "higher", "unknown", None, None, "welch", 0, 3, None, None, "tcg",
                        None, None)  # fmt: skip
    s = vd.should_stop([absent, _v("worse")], 3)
    assert s.stop and s.reason == "decided"
    s = vd.should_stop([absent], 3)
    assert s.stop and s.reason == "no-data" and "vmstat.hint_local_pct" in s.detail


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--kernel", "stock"], "exactly two kernels"),
        (["--kernel", "stock", "--kernel", "stock2", "--max-pairs", "0"], "--max-pairs"),
        (["--kernel", "stock", "--kernel", "stock2", "--decide", "vmstat.nope"], "--decide"),
        (["--kernel", "stock", "--kernel", "stock2", "--min-pairs", "9"], "--min-pairs"),
        # the old spellings, hidden aliases for one release, set the same options
        (["--kernel", "stock", "--kernel", "stock2", "--max-repeats", "0"], "--max-pairs: must be 1..1000"),
        (["--kernel", "stock", "--kernel", "stock2", "--min-repeats", "9"], "--min-pairs: must be between"),
        (["--repeat", "3", "--decide", "vmstat.hint_local_pct"], "--decide: only with --repeat auto"),
    ],
)
def test_bad_auto_options_are_one_line_errors(args, needle) -> None:
    proc = numalab("run", "--repeat", "auto", "--workload", "idle", *args, timeout=60)
    assert proc.returncode == 2
    assert_one_line_error(proc, needle)


# --- outcomes of a reproduction -------------------------------------------------


def test_outcomes() -> None:
    sig_worse = vd.verdict_of("vmstat.hint_local_pct", [99.0, 99.5, 98.9], [52.0, 55.0, 50.0])
    assert outcome_of("worse", sig_worse) == "reproduced"
    assert outcome_of("better", sig_worse) == "contradicted"
    assert outcome_of("same", sig_worse) == "contradicted"
    noisy = vd.verdict_of("vmstat.numa_pages_migrated", TCG_A, TCG_B)  # B's mean is higher, not significant
    assert outcome_of("higher", noisy) == "same direction, not significant"
    assert outcome_of("lower", noisy) == "not reproduced"
    assert outcome_of("same", noisy) == "not reproduced"  # undecided is not the same (issue 71)
    assert outcome_of("worse", vd.verdict_of("vmstat.hint_local_pct", [], [1.0])) == "no data"


# --- matrix specs with repeats: auto and expect ---------------------------------

BASE = """
name: t
topologies: [ring-2]
kernels: [stock, {name: other, path: /bin/true}]
workloads: [{name: idle, duration: 1}]
"""


@pytest.mark.parametrize(
    "extra,needle",
    [
        ("repeats: 3\nauto: {max: 4}\n", "auto: only with repeats: auto"),
        ("repeats: auto\nauto: {min: 4, max: 3}\n", "auto.min: must be between 1 and auto.max (3), got 4"),
        ("repeats: auto\nauto: {min_pairs: 9}\n", "auto.min_pairs: must be between 1 and auto.max_pairs (8), got 9"),
        ("repeats: auto\nauto: {max: 4, max_pairs: 5}\n", "auto.max_pairs: the same as auto.max; give one"),
        ("repeats: auto\nauto: {time_budget: -1}\n", "auto.time_budget"),
        ("repeats: auto\nauto: {decide: [x.y]}\n", "auto.decide[0]"),
        ("repeats: auto\nauto: {significance: t}\n", "auto.significance"),
        ("repeats: auto\nauto: {budget_s: -1}\n", "auto.budget_s"),
        ("repeats: auto\nauto: {maxx: 3}\n", "auto.maxx: unknown field"),
        ("repeats: auto\nexpect: [{metric: vmstat.hint_local_pct, direction: up}]\n", "expect[0].direction"),
        ("repeats: auto\nexpect: [{metric: nope, direction: worse}]\n", "expect[0].metric"),
        (
            "repeats: auto\nexpect: [{metric: vmstat.hint_local_pct, direction: worse, workloads: [numa01]}]\n",
            "expect[0].workloads",
        ),
        ("repeats: many\n", "repeats: must be a whole number 1..1000 or auto"),
    ],
)
def test_bad_auto_specs_are_one_line_errors(tmp_path: Path, extra: str, needle: str) -> None:
    p = tmp_path / "m.yaml"
    p.write_text(BASE + extra)
    with pytest.raises(LabError) as err:
        load_matrix(str(p))
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_seed_examples_carry_their_directions() -> None:
    for name in ("seed000-perf-numa", "seed003-small-imbalance", "seed004-numa-has-capacity"):
        spec = load_matrix(name)
        assert spec.auto is not None and spec.expect, name
        assert all(e.seed for e in spec.expect), name
        assert {r.repeat for r in spec.runs} == set(range(1, spec.auto.min_pairs + 1))
    s3 = load_matrix("seed003-small-imbalance")
    assert {e.metric: e.direction for e in s3.expect}["vmstat.hint_local_pct"] == "worse"


def _fake_execute(values: dict[tuple[str, str], list[float]], calls: list[int]):
    """execute_matrix that writes a manifest per run: numa_pages_migrated from ``values[(cell side)]``."""

    def execute(spec, runs, out, kernel_args, progress=None, **_kw):
        results = []
        new = 0
        for r in runs:
            d = run_dir(out, r)
            if not (d / "manifest.json").exists():
                new += 1
                vals = values[(r.topology.label, r.kernel.name)]
                d.mkdir(parents=True)
                m = {"format": "numalab-run/1", "status": "ok", "accelerator": {"name": "tcg"},
                     "metrics": {"vmstat": {"numa_pages_migrated": vals[(r.repeat - 1) % len(vals)]}}}  # fmt: skip
                (d / "manifest.json").write_text(json.dumps(m))
                results.append(RunResult(r.id, "ok", "", 1.0, 1.0))
            else:
                results.append(RunResult(r.id, "ok", "", resumed=True))
        calls.append(new)
        return MatrixOutcome(results, 1.0, 1.0, 2)

    return execute


def test_auto_matrix_adds_repeats_only_where_undecided(tmp_path: Path, monkeypatch) -> None:
    spec = parse_matrix(
        {"topologies": ["ring-2", "ring-4"], "kernels": ["a", {"name": "b", "path": "/bin/true"}],
         "workloads": [{"name": "idle", "duration": 1}], "repeats": "auto",
         "auto": {"min_pairs": 3, "max_pairs": 6, "decide": ["vmstat.numa_pages_migrated"]}},
        "t.yaml", "t")  # fmt: skip
    values = {
        ("ring-2", "a"): [100.0, 102.0, 98.0],  # clear difference: decided after 3
        ("ring-2", "b"): [300.0, 310.0, 290.0],
        ("ring-4", "a"): TCG_A,  # noise: runs to max
        ("ring-4", "b"): TCG_B,
    }
    calls: list[int] = []
    monkeypatch.setattr(mauto, "execute_matrix", _fake_execute(values, calls))
    out = mauto.run_auto_matrix(spec, tmp_path, {"a": "a", "b": "b"}, lambda _m: None)
    cells = {c.key: c for c in out.cells}
    assert cells["ring-2/idle/default"].stop.reason == "decided" and cells["ring-2/idle/default"].pairs == 3
    assert cells["ring-4/idle/default"].stop.reason == "max-repeats" and cells["ring-4/idle/default"].pairs == 6
    assert calls == [12, 2, 2, 2]  # 3 pairs of both cells, then one pair of ring-4 at a time
    (v,) = cells["ring-2/idle/default"].verdicts["b"]
    assert v.direction == "changed" and v.moved == "higher" and v.n_base == 3  # (a mechanism counter)
    assert len(out.runs) == 12 + 6
    # resuming recomputes the same rounds from the records and runs nothing
    calls.clear()
    again = mauto.run_auto_matrix(spec, tmp_path, {"a": "a", "b": "b"}, lambda _m: None)
    assert calls == [0, 0, 0, 0] and [c.pairs for c in again.cells] == [3, 6]
    data = json.loads(mauto.write_auto_json(tmp_path, again).read_text())
    assert {c["cell"]: c["stopped"] for c in data["cells"]} == {"ring-2/idle/default": "decided",
                                                                "ring-4/idle/default": "max-repeats"}  # fmt: skip


# --- numalab reproduce ------------------------------------------------------------


def test_reproduce_help_and_bad_seeds() -> None:
    proc = numalab("reproduce", "--help", timeout=60)
    assert proc.returncode == 0 and "SEED" in proc.stdout and "expect" in proc.stdout
    proc = numalab("reproduce", "7", timeout=60)
    assert proc.returncode == 2
    assert_one_line_error(proc, "SEED 7: unknown seed", "000, 001, 003, 004")
    proc = numalab("reproduce", "seed002", timeout=60)
    assert proc.returncode == 2
    assert_one_line_error(proc, "seed 002", "sched-group")
    proc = numalab("reproduce", "3", "--max-pairs", "1", timeout=60)
    assert proc.returncode == 2
    assert_one_line_error(proc, "--max-pairs: must be >= the matrix's auto.min_pairs")
    proc = numalab("reproduce", "3", "--max-repeats", "1", timeout=60)  # (the old spelling: a hidden alias)
    assert proc.returncode == 2
    assert_one_line_error(proc, "--max-pairs: must be >= the matrix's auto.min_pairs")
    proc = numalab("reproduce", "3", "--matrix", "seed000-remote-latency", "--report-only", timeout=60)
    assert proc.returncode == 2
    assert_one_line_error(proc, "--matrix seed000-remote-latency: not a matrix of seed 003", "seed003-remote-latency")


def test_reproduce_another_matrix_of_the_seed_is_named_after_it() -> None:
    from lab.seeds.reproduce import find_seed, seed_spec, with_matrix

    seed = find_seed("000")
    assert seed.stem == "seed000"
    rl = with_matrix(seed, "seed000-remote-latency")
    assert rl.stem == "seed000-remote-latency" and rl.default_matrix == seed.matrix
    assert with_matrix(seed, seed.matrix).stem == "seed000"
    assert {s.setting.remote_latency for s in seed_spec(rl).runs} == {"slit"}


def test_reproduce_report_from_recorded_runs(tmp_path: Path, monkeypatch) -> None:
    """--report-only over run records: the seed's expectations checked, markdown/HTML/JSON written."""
    from lab.seeds.reproduce import evaluate, find_seed, seed_spec
    from lab.seeds.reproduction_report import write_reproduction

    seed = find_seed("3")
    assert seed.id == "003" and find_seed("seed003") == seed and find_seed("003") == seed
    spec = seed_spec(seed)
    out = tmp_path / "runs"
    hint = {"baseline": [99.1, 98.8, 99.5, 99.0], "seed003-revert": [55.0, 61.2, 48.9, 52.3]}
    for r in spec.runs + [mauto.with_repeat(r, 4) for r in spec.runs if r.repeat == 3]:
        d = run_dir(out, r)
        d.mkdir(parents=True)
        m = {"format": "numalab-run/1", "status": "ok", "accelerator": {"name": "tcg"},
             "workload": {"result": {"round_trips_per_s": 1000.0 + r.repeat}},
             "metrics": {"vmstat": {"hint_local_pct": hint[r.kernel.name][r.repeat - 1], "numa_hint_faults": 1000,
                                    "numa_hint_faults_local": round(10 * hint[r.kernel.name][r.repeat - 1]),
                                    "numa_pages_migrated": 5}}}  # fmt: skip
        (d / "manifest.json").write_text(json.dumps(m))
    rep = evaluate(seed, spec, out, {"wall_s": 1.0})
    by = {(cell, c.expectation.metric): c for cell, c in rep.checks}
    c = by[("ring-4/pairs/default", "vmstat.hint_local_pct")]
    assert c.outcome == "reproduced" and c.verdict.n_base == 4 and c.verdict.n_new == 4
    assert by[("ring-2/pairs/default", "vmstat.numa_pages_migrated")].outcome == "not reproduced"  # no change
    assert [x["repeats"] for x in rep.cells] == [4, 4]
    paths = write_reproduction(rep, tmp_path / "reports")
    md = paths[0].read_text()
    assert "99.30%" in md and "reproduced" in md and "4+4" in md and "seed003-revert vs baseline" in md
    assert "<table>" in paths[1].read_text() and "TCG" in paths[1].read_text()
    data = json.loads(paths[2].read_text())
    assert data["seed"] == "003" and data["tally"]["reproduced"] >= 2
    assert not math.isnan(data["checks"][0]["verdict"]["pct_diff"])


def test_a_run_with_a_wrong_guest_clock_is_left_out_and_its_pair_redone(tmp_path: Path) -> None:
    from test_tcg_clock import BAD, GOOD

    from lab.seeds.reproduce import evaluate, find_seed, seed_spec, set_aside_clock_failures

    seed = find_seed("004")
    spec = seed_spec(seed)
    out = tmp_path / "runs"
    for r in spec.runs:
        d = run_dir(out, r)
        d.mkdir(parents=True)
        m = {"format": "numalab-run/1", "status": "ok", "accelerator": {"name": "tcg"},
             "workload": {"result": {"gbps": 1.0 + r.repeat}},
             "metrics": {"events": {"sched_stick_numa": r.repeat}}}  # fmt: skip
        (d / "manifest.json").write_text(json.dumps(m))
        bad = r.repeat == 2 and r.kernel.name == "baseline"
        (d / "dmesg-boot.txt").write_text(BAD if bad else GOOD)
    rep = evaluate(seed, spec, out)
    (cell,) = rep.cells
    assert len(cell["excluded"]) == 1 and "51.7x too fast" in cell["excluded"][0]
    stick = next(c for _k, c in rep.checks if c.expectation.metric == "events.sched_stick_numa")
    assert (stick.verdict.n_base, stick.verdict.n_new) == (2, 3)
    moved = set_aside_clock_failures(spec, out)
    assert len(moved) == 2 and "51.7x" in moved[0] + moved[1]
    assert sorted(p.name for p in (out / "clock-excluded").iterdir()) == [
        "ring-4-c1.baseline.numa01.default.r2",
        "ring-4-c1.seed004-capacity.numa01.default.r2",
    ]
    assert not run_dir(out, spec.runs[2]).exists() and run_dir(out, spec.runs[0]).exists()
