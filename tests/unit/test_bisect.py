"""numalab bisect's search and decisions with a fake step runner: synthetic metric distributions per prefix,
no kernels, no VMs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from common import numalab

from lab.analysis.ab_plan import ABPlan
from lab.analysis.stats import Stats, significant, welch_interval
from lab.analysis.verdict import values
from lab.bisect.bisect_report import write_report
from lab.bisect.engine import COUNTED_STATUSES, Bisect, Config, log_text, next_prefix, replay
from lab.bisect.step_rule import Rule, decide_step
from lab.errors import LabError
from lab.paths import write_json_atomic
from lab.record_files import RUN_FORMAT

METRIC = "vmstat.numa_pte_updates"


class Killed(Exception):
    """A simulated kill of the bisect process."""


class FakeRunner:
    """Prefix k's runs are normal with ``means[k]`` and ``sd[k]`` (seeded by prefix and run index, so the same
    run gives the same value in any session); ``broken`` prefixes do not build; ``kill_after`` runs raise."""

    def __init__(self, means: list[float], sd: float | list[float] = 20.0, broken: tuple[int, ...] = (),
                 kill_after: int | None = None, seed: int = 1, no_boot: tuple[int, ...] = (),
                 mismatch: tuple[int, ...] = ()) -> None:  # fmt: skip
        self.means, self.broken, self.kill_after, self.seed = means, broken, kill_after, seed
        self.no_boot, self.mismatch = no_boot, mismatch
        self.sd = sd if isinstance(sd, list) else [sd] * len(means)
        self.runs: list[int] = []
        self.builds: list[int] = []

    def build(self, prefix: int) -> str:
        self.builds.append(prefix)
        if prefix in self.broken:
            raise LabError(f"kernel build failed: fair.c:1: error (prefix {prefix})")
        return f"k{prefix}"

    def run(self, prefix: int, kernel: str, out: Path) -> dict:
        if self.kill_after is not None and len(self.runs) >= self.kill_after:
            raise Killed
        assert kernel == f"k{prefix}"
        self.runs.append(prefix)
        index = int(out.name.rsplit("-r", 1)[1])
        rng = random.Random(f"{self.seed}-{prefix}-{index}")
        value = max(0.0, rng.gauss(self.means[prefix], self.sd[prefix]))
        status = "boot-failed" if prefix in self.no_boot else "topology-mismatch" if prefix in self.mismatch else "ok"
        manifest = {
            "format": RUN_FORMAT,  # (the bisect reads its runs as run records)
            "status": status,
            "reason": "cpu 1 NUMA domain-1 (span 0-3): groups overlap" if status == "topology-mismatch" else "",
            "accelerator": {"name": "tcg"},
            "metrics": {"vmstat": {"numa_pte_updates": value}},
        }
        partial = out.parent / f".{out.name}.partial"
        partial.mkdir(parents=True)
        write_json_atomic(partial / "manifest.json", manifest)
        partial.rename(out)
        return manifest


def _cfg(n: int, **kw) -> Config:
    """A Config of ``n`` patches; ``kw``: the A/B plan's fields (max_pairs, time_budget...) and Config's own."""
    plan = ABPlan((METRIC,), **{k: kw.pop(k) for k in ABPlan.names() if k in kw})
    return Config(plan, tuple(f"{i:04d}-p.patch" for i in range(1, n + 1)), **kw)


def _bisect(tmp_path: Path, runner: FakeRunner, n: int, name: str = "b", **kw) -> tuple[dict, Bisect]:
    b = Bisect(tmp_path / name, _cfg(n, **kw), runner, lambda msg: None)
    return b.run(), b


def _planted(n: int, bad: int, good_mean: float = 1000.0, bad_mean: float = 0.0) -> list[float]:
    return [good_mean if k < bad else bad_mean for k in range(n + 1)]


@pytest.mark.parametrize(("n", "bad"), [(4, 3), (4, 1), (4, 4), (7, 5), (12, 2)])
def test_planted_bad_patch_is_found_in_log2_steps(tmp_path: Path, n: int, bad: int) -> None:
    runner = FakeRunner(_planted(n, bad))
    result, b = _bisect(tmp_path, runner, n)
    assert result["status"] == "found" and result["first_bad_patch"] == bad, result
    assert result["patch"] == f"{bad:04d}-p.patch"
    # the blamed patch's own A/B, from the runs already made: its prefix against the one before
    assert result["confirmation"].startswith(f"vmstat.numa_pte_updates: prefix {bad} vs prefix {bad - 1}: ")
    assert "significant (welch)" in result["confirmation"]
    tested = sorted({p for p in runner.runs} - {0, n})
    assert len(tested) <= (n - 1).bit_length(), tested  # a binary search, not a walk
    steps = b.steps()
    assert all(steps[f"p{k}"].verdict == ("bad" if k >= bad else "good") for k in tested)
    assert steps["endpoints"].verdict == "differ"
    assert steps["endpoints"].lines[0].endswith(", tcg")  # the runs' accelerator, from their manifests
    # every step has at least the minimum of runs, and no prefix was built twice in one session
    assert all(s.runs_step >= 3 for s in steps.values())
    assert len(runner.builds) == len(set(runner.builds))


def test_a_bad_patch_that_raises_the_metric_is_found_too(tmp_path: Path) -> None:
    result, _ = _bisect(tmp_path, FakeRunner(_planted(6, 2, 100.0, 400.0)), 6)
    assert result["status"] == "found" and result["first_bad_patch"] == 2


def test_endpoints_that_do_not_differ_leave_nothing_to_bisect(tmp_path: Path) -> None:
    runner = FakeRunner([1000.0] * 5, sd=50.0)
    result, b = _bisect(tmp_path, runner, 4, max_pairs=5)
    assert result["status"] == "nothing-to-bisect", result
    assert "not significantly different" in result["reason"]
    assert set(runner.runs) == {0, 4} and runner.runs.count(0) == 5  # only the endpoints ran, to --max-pairs
    assert json.loads((tmp_path / "b" / "result.json").read_text())["status"] == "nothing-to-bisect"
    assert "nothing to bisect" in log_text(_log(tmp_path / "b"))


def test_endpoints_moving_the_other_way_than_asked_leave_nothing_to_bisect(tmp_path: Path) -> None:
    # numa_pte_updates is a mechanism counter (no better): 1000 -> 0 is "lower"; asking for "higher" finds nothing.
    result, _ = _bisect(tmp_path, FakeRunner(_planted(4, 2)), 4, direction="higher")
    assert result["status"] == "nothing-to-bisect" and "moved lower, not higher" in result["reason"]
    result, _ = _bisect(tmp_path, FakeRunner(_planted(4, 2)), 4, name="c", direction="lower")
    assert result["status"] == "found" and result["first_bad_patch"] == 2
    with pytest.raises(LabError, match="takes higher or lower"):  # better/worse mean nothing for it
        _cfg(4, direction="better").check()


def test_endpoints_that_moved_less_than_the_threshold_leave_nothing_to_bisect(tmp_path: Path) -> None:
    result, _ = _bisect(tmp_path, FakeRunner(_planted(4, 2, 1000.0, 800.0)), 4, threshold_pct=30.0)
    assert result["status"] == "nothing-to-bisect" and "less than the threshold (30%)" in result["reason"]
    result, _ = _bisect(tmp_path, FakeRunner(_planted(4, 2, 1000.0, 800.0)), 4, name="c", threshold_pct=10.0)
    assert result["status"] == "found" and result["first_bad_patch"] == 2


def test_an_undecided_step_is_skipped_and_stepped_around(tmp_path: Path) -> None:
    # Prefix 2 sits at the threshold (half way) with a wide spread: neither bad nor good in 5 runs.
    means = [1000.0, 1000.0, 500.0, 0.0, 0.0]
    runner = FakeRunner(means, sd=[20.0, 20.0, 400.0, 20.0, 20.0])
    result, b = _bisect(tmp_path, runner, 4, max_pairs=5)
    steps = b.steps()
    assert steps["p2"].verdict == "skip" and steps["p2"].stopped == "max-pairs", steps["p2"]
    assert runner.runs.count(2) == 5
    assert steps["p1"].verdict == "good" and steps["p3"].verdict == "bad"
    # as git's "only skipped commits left": the first bad patch is 2 or 3
    assert result["status"] == "undetermined" and result["candidates"] == ["0002-p.patch", "0003-p.patch"]
    assert "numalab bisect skip 2" in log_text(_log(tmp_path / "b"))


def test_a_step_over_its_budget_share_is_skipped(tmp_path: Path) -> None:
    now = [0.0]

    class Slow(FakeRunner):
        def run(self, prefix: int, kernel: str, out: Path) -> dict:
            now[0] += 10.0  # every run takes 10 s
            return super().run(prefix, kernel, out)

    runner = Slow([1000.0, 1000.0, 500.0, 0.0, 0.0], sd=[20.0, 20.0, 400.0, 20.0, 20.0])
    b = Bisect(tmp_path / "b", _cfg(4, time_budget=200.0), runner, lambda m: None, clock=lambda: now[0])
    b.run()
    s = b.steps()["p2"]
    assert s.verdict == "skip" and s.stopped == "time-budget" and "share of the budget" in s.reason
    assert s.runs_step < 8


def test_a_prefix_that_does_not_build_is_skipped(tmp_path: Path) -> None:
    runner = FakeRunner(_planted(6, 5), broken=(3,))
    result, b = _bisect(tmp_path, runner, 6)
    assert b.steps()["p3"].verdict == "skip" and "does not build" in b.steps()["p3"].reason
    assert 3 not in runner.runs
    assert result["status"] == "found" and result["first_bad_patch"] == 5
    # a skipped prefix next to the answer leaves it open, as git does
    result, _ = _bisect(tmp_path, FakeRunner(_planted(6, 4), broken=(3,)), 6, name="c")
    assert result["status"] == "undetermined" and result["candidates"] == ["0003-p.patch", "0004-p.patch"]


def test_a_prefix_that_does_not_boot_is_skipped(tmp_path: Path) -> None:
    runner = FakeRunner(_planted(6, 5), no_boot=(3,))
    result, b = _bisect(tmp_path, runner, 6)
    s = b.steps()["p3"]
    assert s.verdict == "skip" and s.stopped == "no-data" and runner.runs.count(3) == 3, s
    assert result["status"] == "found" and result["first_bad_patch"] == 5


def test_topology_mismatch_runs_count_and_are_named(tmp_path: Path) -> None:
    # Seed 002's bad construction makes every run of the bad prefixes topology-mismatch; their workload ran and
    # its metric is what moved, so the bisect counts them (compare leaves them out) and says so in the lines.
    runner = FakeRunner(_planted(6, 4), mismatch=(4, 5, 6))
    result, b = _bisect(tmp_path, runner, 6)
    assert result["status"] == "found" and result["first_bad_patch"] == 4, result
    steps = b.steps()
    ends = steps["endpoints"].lines
    assert ends[1].startswith("prefix 6: 3 of 3 runs topology-mismatch (counted): cpu 1 NUMA domain-1"), ends
    assert all("topology-mismatch" not in ln for ln in steps["p3"].lines), steps["p3"].lines  # prefix 0's are ok
    assert any(ln.startswith("prefix 4: ") and "topology-mismatch" in ln for ln in steps["p4"].lines)
    runs = b.runs_of(6)
    assert values(runs, METRIC) == [] and len(values(runs, METRIC, COUNTED_STATUSES)) == len(runs) >= 3


def _log(out: Path) -> list[dict]:
    return [json.loads(ln) for ln in (out / "log.jsonl").read_text().splitlines()]


def test_resume_after_a_kill_does_not_rerun_finished_steps(tmp_path: Path) -> None:
    means = _planted(8, 6)
    whole = FakeRunner(means)
    expected, _ = _bisect(tmp_path, whole, 8, name="whole")
    killed = FakeRunner(means, kill_after=len(whole.runs) - 2)  # dies in the last step
    with pytest.raises(Killed):
        _bisect(tmp_path, killed, 8)
    done = {s for s in Bisect(tmp_path / "b", _cfg(8), killed, lambda m: None).steps()}
    assert "endpoints" in done and len(done) >= 2
    again = FakeRunner(means)
    result, b = _bisect(tmp_path, again, 8)
    assert result == expected | {"wall_s": result["wall_s"]}
    finished_prefixes = {int(s[1:]) for s in done if s != "endpoints"}
    assert not finished_prefixes & set(again.runs), (finished_prefixes, again.runs)  # no finished step reran
    assert len(killed.runs) + len(again.runs) == len(whole.runs)  # the killed step's runs were kept too
    assert sorted(again.runs) == sorted(whole.runs[len(killed.runs) :])


def test_resume_with_other_options_is_refused(tmp_path: Path) -> None:
    _bisect(tmp_path, FakeRunner(_planted(4, 2)), 4)
    with pytest.raises(LabError, match=r"holds a bisect with another threshold_pct"):
        _bisect(tmp_path, FakeRunner(_planted(4, 2)), 4, threshold_pct=30.0)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x").write_text("")
    with pytest.raises(LabError, match=r"not a bisect state directory"):
        _bisect(tmp_path, FakeRunner(_planted(4, 2)), 4, name="other")


def test_replay_rederives_the_answer_and_catches_a_tampered_verdict(tmp_path: Path) -> None:
    result, _ = _bisect(tmp_path, FakeRunner(_planted(6, 4)), 6)
    again, problems = replay(tmp_path / "b")
    assert problems == [] and again == {k: result[k] for k in again}
    step = tmp_path / "b" / "steps" / "p3.json"
    d = json.loads(step.read_text())
    assert d["verdict"] == "good"
    d["verdict"] = "bad"
    step.write_text(json.dumps(d))
    again, problems = replay(tmp_path / "b")
    assert any("prefix 3: recorded bad, its values say good" in p for p in problems), problems
    # with 3 bad the search would have gone below it next, not to 4: said, and the answer is left open
    assert any("prefix 4: the search would have tested prefix 1" in p for p in problems), problems
    assert again["status"] == "unfinished"
    assert numalab("bisect", "replay", str(tmp_path / "b")).returncode == 1


def test_report_has_every_step_with_intervals(tmp_path: Path) -> None:
    _bisect(tmp_path, FakeRunner(_planted(4, 3)), 4)
    paths = write_report(tmp_path / "b")
    md = paths["md"].read_text()
    assert "first bad patch: [3] 0003-p.patch" in md
    evidence = md.split("## Evidence", 1)[1]
    assert "prefix 3 (0003-p.patch): bad" in evidence and "  bad: moved +" in evidence
    rows = json.loads(paths["json"].read_text())["steps"]
    assert [r["prefix"] for r in rows] == [0, 4, 2, 3]
    for r in rows:
        lo, hi = r["ci95"]
        assert lo <= r["mean"] <= hi
    assert rows[3]["verdict"] == "bad" and rows[3]["shift_pct"] > 50
    assert paths["svg"].read_text().startswith("<svg")


def test_next_prefix_steps_around_skips() -> None:
    assert next_prefix(8, {}) == (4, 0, 8)
    assert next_prefix(8, {4: "skip"}) == (3, 0, 8)
    assert next_prefix(8, {4: "skip", 3: "skip"}) == (5, 0, 8)
    assert next_prefix(8, {4: "good", 6: "bad"}) == (5, 4, 6)
    assert next_prefix(8, {4: "good", 5: "bad"}) == (None, 4, 5)


def test_step_rule_good_bad_undecided() -> None:
    rule = Rule(METRIC, -1, 500.0, 50.0)  # bad means lower; a shift of 500 (50% of 1000) is bad
    good = [1000.0, 990.0, 1010.0, 1005.0]
    assert decide_step(good, [10.0, 0.0, 5.0], rule).verdict == "bad"
    assert decide_step(good, [1000.0, 1003.0, 995.0], rule).verdict == "good"
    assert decide_step(good, [1500.0, 1490.0, 1510.0], rule).verdict == "good"  # moved away from bad
    # significant and toward bad, but by less than the threshold, with a CI reaching past it: undecided
    d = decide_step(good, [700.0, 100.0, 900.0], rule)
    assert d.verdict == "undecided" and d.shift_ci is not None and d.shift_ci[1] > 500, d
    assert decide_step(good, [1000.0, 990.0], rule).verdict == "unknown"
    assert "toward bad" in decide_step(good, [10.0, 0.0, 5.0], rule).line()


# Seed 003's series on ring-2 with pairs, vmstat.hint_local_pct, as recorded by a real bisect (max-pairs 14):
# the revert's runs are bimodal, and five runs of prefix 3 (the revert) that all missed the low mode had an
# interval under the threshold. The interval alone called it good and blamed the comment patch after it.
S003_GOOD = [80.0, 75.0, 80.0, 99.4, 80.0, 99.5, 94.7, 94.7, 72.0, 94.7]
S003_BAD = [94.7, 1.7, 95.7, 99.1, 2.3, 78.3, 44.5, 79.2, 1.8, 1.9]
S003_P3 = [77.3, 75.0, 94.7, 75.0, 78.3]


def test_a_good_step_must_be_apart_from_the_bad_endpoint() -> None:
    sign = -1
    rule = Rule("vmstat.hint_local_pct", sign, abs(Stats.of(S003_BAD).amean - Stats.of(S003_GOOD).amean) / 2, None)
    alone = decide_step(S003_GOOD, S003_P3, rule)
    assert alone.verdict == "good"  # what the interval alone says (the wrong answer)
    d = decide_step(S003_GOOD, S003_P3, rule, S003_BAD)
    assert d.verdict == "undecided" and d.p_bad is not None and d.p_bad > 0.05 and d.held_by_bad, d
    assert "like the bad endpoint (10 runs) with p=0.14" in d.line()
    # a step like the good endpoint, with enough runs, is told apart from the bimodal bad endpoint
    like_good = [80.0, 75.0, 94.7, 99.4, 80.0, 72.0, 94.7, 80.0]
    assert decide_step(S003_GOOD, like_good, rule, S003_BAD + [1.5, 2.0]).verdict == "good"
    # and one that hit the low mode is bad
    assert decide_step(S003_GOOD, [1.9, 2.2, 75.0, 1.7, 80.0, 2.0], rule, S003_BAD).verdict == "bad"


# A fresh seed 003 bisect (max-pairs 20, 2026-11-24) as recorded: prefix 2 (a comment and a compiled-out
# pr_debug) was Welch-significant after 14 runs, +8.8% toward bad with the threshold at 5.7%, and was called
# bad, blaming a harmless patch. The good endpoint gave 4 of its 14 runs on the bad side itself.
S003B_RULE = Rule("vmstat.hint_local_pct", -1, 5.230542184230735, 5.745576440624587)
S003B_GOOD = [94.1, 76.2, 100.0, 98.7, 80.0, 94.1, 94.1, 76.2, 99.4, 94.1, 99.2, 95.0, 76.2, 99.2]
S003B_P2 = [72.7, 100.0, 80.0, 72.7, 76.2, 94.1, 76.2, 94.1, 99.4, 94.1, 76.2, 76.2, 76.2, 76.2]
S003B_BAD = [76.2, 78.3, 78.3, 84.8, 76.2, 94.1, 76.2]


def test_a_bad_step_must_be_apart_from_the_good_endpoint() -> None:
    d = decide_step(S003B_GOOD, S003B_P2, S003B_RULE, S003B_BAD)
    assert d.significant and d.shift is not None and d.shift >= S003B_RULE.threshold  # the old rule: bad
    assert d.verdict == "undecided" and d.p_good is not None and 0.05 < d.p_good < 0.1, d
    assert "like the good endpoint with p=0.096 (bad needs <0.05)" in d.line()
    # a step whose runs sit on the bad side far more often than the good endpoint's is bad
    assert decide_step(S003B_GOOD, [76.2, 72.7, 76.2, 78.3, 76.2, 72.7], S003B_RULE, S003B_BAD).verdict == "bad"
    # a clean shift needs no more runs than before once the good endpoint has 4: 3 runs, all on the bad side
    rule = Rule(METRIC, 1, 4.0, 200.0)
    assert decide_step([1.7, 2.1, 2.2, 1.5], [9.4, 9.2, 9.8], rule).verdict == "bad"
    assert decide_step([1.7, 2.1, 2.2], [9.4, 9.2, 9.8], rule).verdict == "undecided"  # 3 good runs: p=0.07


class BimodalRunner(FakeRunner):
    """Seed 003's shape: prefixes from ``bad`` on give ~2 with probability 0.4 and ~85 otherwise."""

    def __init__(self, n: int, bad: int, seed: int) -> None:
        super().__init__([85.0] * (n + 1), 8.0, seed=seed)
        self.bad = bad

    def run(self, prefix: int, kernel: str, out: Path) -> dict:
        man = super().run(prefix, kernel, out)
        rng = random.Random(f"mode-{self.seed}-{out.name}")
        if prefix >= self.bad and rng.random() < 0.4:
            man["metrics"]["vmstat"]["numa_pte_updates"] = max(0.0, rng.gauss(2.0, 0.5))
            write_json_atomic(out / "manifest.json", man)
        return man


def test_a_bimodal_bad_patch_is_not_blamed_on_its_neighbour(tmp_path: Path) -> None:
    wrong = []
    for seed in range(8):
        result, _ = _bisect(tmp_path, BimodalRunner(4, 3, seed), 4, name=f"s{seed}", max_pairs=14)
        if result["status"] == "found" and result["first_bad_patch"] != 3:
            wrong.append((seed, result))
    assert not wrong, wrong


def test_welch_interval_excludes_zero_exactly_when_welch_is_significant() -> None:
    rng = random.Random(7)
    for _ in range(300):
        a = [rng.gauss(10, 2) for _ in range(rng.randint(3, 8))]
        b = [rng.gauss(10 + rng.uniform(-4, 4), rng.uniform(0.5, 4)) for _ in range(rng.randint(3, 8))]
        sa, sb = Stats.of(a), Stats.of(b)
        lo, hi = welch_interval(sa, sb) or (0, 0)
        assert (lo > 0 or hi < 0) == significant(sa, sb, "welch")


def test_cli_log_replay_and_one_line_errors(tmp_path: Path) -> None:
    _bisect(tmp_path, FakeRunner(_planted(4, 3)), 4)
    proc = numalab("bisect", "log", str(tmp_path / "b"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-2] == "# first bad patch: [3] 0003-p.patch"
    assert lines[-1].startswith("# confirmation: vmstat.numa_pte_updates: prefix 3 vs prefix 2: ")
    assert "numalab bisect good 2" in lines and "numalab bisect bad 3" in lines
    proc = numalab("bisect", "replay", str(tmp_path / "b"), "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["result"]["first_bad_patch"] == 3
    for args, what in [
        (("bisect", "log"), "give the bisect's directory"),
        (("bisect", "frob", "x"), "bisect frob: unknown"),
        (("bisect", "--series", "s", "--decide", METRIC), "--out: required"),
        (("bisect", "--series", "s", "--decide", "nope", "--out", str(tmp_path / "o")), "--decide: "),
        (("bisect", "--series", "s", "--metric", "nope", "--out", str(tmp_path / "o")), "--decide: "),  # old name
        (("bisect", "--series", str(tmp_path / "none"), "--decide", METRIC, "--out", str(tmp_path / "o")),
         "--series"),
    ]:  # fmt: skip
        proc = numalab(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        err = proc.stderr.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("numalab: error: ") and what in err[0], (args, err)


def _git(repo: Path, *args: str) -> str:
    import subprocess

    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo), *args], check=True,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip


def test_a_git_range_becomes_a_series_of_its_commits(tmp_path: Path, monkeypatch) -> None:
    from lab.kernel.git_tree import range_series
    from lab.kernel.patches import load_patches

    repo = tmp_path / "linux"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "fair.c").write_text("".join(f"line {i}\n" for i in range(30)))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    good = _git(repo, "rev-parse", "HEAD")
    for i in (3, 13, 23):
        text = (repo / "fair.c").read_text().replace(f"line {i}\n", f"line {i} changed\n")
        (repo / "fair.c").write_text(text)
        _git(repo, "commit", "-qam", f"change line {i}")
    series, g = range_series(str(repo), good[:8], "HEAD", tmp_path / "out" / "range")
    assert g == good
    patches = load_patches(None, str(series))
    assert [p.kind for p in patches] == ["mbox"] * 3
    assert [p.data.decode().split("Subject: [PATCH ", 1)[1].split("\n")[0] for p in patches] == [
        "1/3] change line 3", "2/3] change line 13", "3/3] change line 23"]  # fmt: skip
    # bad input: one line naming the option
    with pytest.raises(LabError, match=r"^--good nope: not a commit of"):
        range_series(str(repo), "nope", "HEAD", tmp_path / "r2")
    with pytest.raises(LabError, match=r"^--good HEAD: not an ancestor of --bad"):
        range_series(str(repo), "HEAD", good, tmp_path / "r2")
    with pytest.raises(LabError, match=r"need a local git repository"):
        range_series(str(tmp_path / "out"), good, "HEAD", tmp_path / "r2")
    # a relative destination (bisect's --out b1) is the caller's directory, never a path inside the repository
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    series, _ = range_series(str(repo), good, "HEAD", Path("b1") / "range")
    assert series == tmp_path / "cwd" / "b1" / "range" and len(load_patches(None, str(series))) == 3
    assert _git(repo, "status", "--porcelain", "--ignored") == "" and not (repo / "b1").exists()
    proc = numalab("bisect", "--source", str(repo), "--good", good, "--decide", METRIC, "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and proc.stderr.startswith("numalab: error: --bad: give both"), proc.stderr
