"""The bisect over the prefixes of a patch series: endpoints, steps, the search, and the state directory.

Prefix k is the source with the series' first k patches applied (prefix 0: none). Patch k is blamed when
prefix k-1 is good and prefix k is bad. The endpoints (prefix 0 and prefix N) are compared first, in A B
pairs until their verdict is decided (:func:`lab.analysis.verdict.should_stop`, as ``--repeat auto``); unless
they differ, in the direction asked and by more than the threshold, there is nothing to bisect (the endpoints'
verdict says why: "same" only where the equivalence test shows it, lab.analysis.judgement). Each step then
runs prefix k, adding a run of the good endpoint to a pair whenever the endpoint would otherwise have fewer
runs than the step (its runs are pooled across steps), until :func:`lab.bisect.step_rule.decide_step` says
good or bad; a step that stays undecided within its pairs or its share of the budget, or whose kernel does not
build or boot, is skipped (as ``git bisect skip``). A step that looks good but cannot yet be told apart from
the bad endpoint's runs (see :mod:`lab.bisect.step_rule`) gets a run of the bad endpoint in its pairs too;
those are pooled as well.

The state directory (``--out``):

- ``bisect.json``: what is bisected (written once; a resume must ask for the same)
- ``runs/p<k>-r<i>/``: every run record (the runner's; a run is there only once finished)
- ``steps/<name>.json``: each concluded step, its values, verdict and time (written atomically)
- ``log.jsonl``: the bisect log, one JSON object a line, rewritten atomically after each step
- ``result.json`` and the report (``report.md``, ``report.json``, ``report.svg``), once done

A killed bisect resumes from the same directory: concluded steps are read back, not rerun, and the runs of
an unfinished step are kept and counted.
"""

from __future__ import annotations

import math
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Protocol

from lab.analysis.ab_plan import WORKLOAD_FIGURE, ABPlan
from lab.analysis.metrics import METRIC_KEYS, NEUTRAL, get_metric
from lab.analysis.record import load_manifest
from lab.analysis.stats import MIN_REPEATS
from lab.analysis.verdict import Verdict, should_stop, values, verdicts_of
from lab.bisect.step_rule import RULE_TEXT, Rule, StepDecision, decide_step, rule_from_endpoints
from lab.datafile import load_json
from lab.errors import LabError
from lab.paths import json_text, write_json_atomic, write_text_atomic
from lab.record_files import MANIFEST

STATE_VERSION = 1
_RUN_DIR = re.compile(r"^p(\d+)-r(\d+)$")


class StepRunner(Protocol):
    """What the bisect needs from the world: a kernel per prefix, and runs of it."""

    def build(self, prefix: int) -> str:
        """The kernel of prefix ``prefix`` (built or found in a cache); a LabError when it does not build."""
        ...

    def run(self, prefix: int, kernel: str, out: Path) -> dict:
        """One run of ``kernel``, its record made at ``out`` (a new directory, with the manifest, appearing
        only when the run is finished); returns the manifest."""
        ...


# bisect.json's names of the plan's fields (written before the plan had its own; kept, so that a state
# directory reads back and resumes): the one decide metric is "metric", time_budget "budget_s", min_effect
# "min_effect_pct".
_PLAN_KEYS = {"decide": "metric", "min_pairs": "min_pairs", "max_pairs": "max_pairs", "time_budget": "budget_s",
              "min_effect": "min_effect_pct"}  # fmt: skip


@dataclass(frozen=True)
class Config:
    # The A/B plan of every comparison (lab.analysis.ab_plan): ``decide`` holds the one metric (resolved: not
    # "workload"), ``min_pairs``/``max_pairs`` count a step's runs, ``time_budget`` is the whole bisect's
    # (each step gets its share), ``significance`` is welch (the step rule is Welch's).
    plan: ABPlan
    patches: tuple[str, ...]  # names, in series order
    # "worse" or "better" (the metric's own sense; "higher" or "lower" for a mechanism counter, which has no
    # better), None: whichever the endpoints show
    direction: str | None = None
    threshold_pct: float | None = None  # None: half the endpoints' shift
    context: str = ""  # topology/workload/settings, for verdict lines
    what: dict = field(default_factory=dict)  # source, series, topology, workload...: recorded, compared on resume
    # --include-status: statuses counted besides COUNTED_STATUSES (every verdict line and step names their runs)
    include_statuses: tuple[str, ...] = ()

    @property
    def metric(self) -> str:
        """The metric that decides (the plan's one ``decide``)."""
        return self.plan.decide[0]

    def to_dict(self) -> dict:
        """bisect.json's "config", in the shape it has always had (the plan's fields by their old names)."""
        p = self.plan
        return {"metric": self.metric, "patches": list(self.patches), "direction": self.direction,
                "threshold_pct": self.threshold_pct, "budget_s": p.time_budget, "min_pairs": p.min_pairs,
                "max_pairs": p.max_pairs, "context": self.context, "what": self.what, "min_effect_pct": p.min_effect,
                "include_statuses": list(self.include_statuses)}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict) -> Config:
        plan = ABPlan.of(**{name: d.get(key) for name, key in _PLAN_KEYS.items()})
        return cls(plan, tuple(d["patches"]), d.get("direction"), d.get("threshold_pct"), d.get("context", ""),
                   d.get("what") or {}, tuple(d.get("include_statuses") or ()))  # fmt: skip

    @property
    def counted(self) -> tuple[str, ...]:
        """The statuses whose runs count: COUNTED_STATUSES and --include-status's."""
        return (*COUNTED_STATUSES, *(s for s in self.include_statuses if s not in COUNTED_STATUSES))

    def check(self) -> None:
        self.plan.check(least=MIN_REPEATS)
        if len(self.plan.decide) != 1:
            raise LabError(f"--decide: a bisect decides on one metric, got {len(self.plan.decide)}: "
                           f"{', '.join(self.plan.decide)}")  # fmt: skip
        if self.metric == WORKLOAD_FIGURE:
            raise LabError("--decide: 'workload' is the workload's own figure: resolve it first "
                           "(lab.analysis.verdict.resolve_decide)")  # fmt: skip
        if self.plan.significance != "welch":
            raise LabError(f"--significance: a bisect decides by welch (its step rule is Welch's), got "
                           f"{self.plan.significance!r}")  # fmt: skip
        if not self.patches:
            raise LabError("--series: no patches in the series")
        if self.direction not in (None, "worse", "better", "higher", "lower"):
            raise LabError(f"--direction {self.direction}: must be worse or better (higher or lower for a mechanism "
                           "counter)")  # fmt: skip
        neutral = get_metric(self.metric).better == NEUTRAL if self.metric in METRIC_KEYS else False
        if self.direction is not None and (self.direction in ("higher", "lower")) != neutral:
            want = "higher or lower (a mechanism counter has no better)" if neutral else "worse or better"
            raise LabError(f"--direction {self.direction}: {self.metric} takes {want}")
        if self.threshold_pct is not None and not (math.isfinite(self.threshold_pct) and self.threshold_pct > 0):
            raise LabError(f"--threshold: must be a percentage > 0, got {self.threshold_pct:g}")

    def patch_label(self, prefix: int) -> str:
        return "(no patches)" if prefix == 0 else self.patches[prefix - 1]


def expected_steps(candidates: int) -> int:
    """Steps a binary search over ``candidates`` untested prefixes takes at most."""
    return max(1, math.ceil(math.log2(candidates + 1)))


def next_prefix(n: int, verdicts: dict[int, str]) -> tuple[int | None, int, int]:
    """The next prefix to test (None: done) and the bounds (last good, first bad) given the verdicts so far
    ("good", "bad", "skip"; prefix 0 good and prefix n bad are implied). Like git, a skipped prefix is
    stepped around: the untested prefix nearest the middle, the lower one on a tie."""
    good = max([0, *(k for k, v in verdicts.items() if v == "good")])
    bad = min([n, *(k for k, v in verdicts.items() if v == "bad")])
    cands = [k for k in range(good + 1, bad) if k not in verdicts]
    if not cands:
        return None, good, bad
    mid = (good + bad) / 2
    return min(cands, key=lambda k: (abs(k - mid), k)), good, bad


def outcome(cfg: Config, verdicts: dict[int, str]) -> dict:
    """The answer from the step verdicts: the first bad patch, or the range it is in when only skipped
    prefixes are left (as git's "only 'skip'ped commits left to test")."""
    n = len(cfg.patches)
    nxt, good, bad = next_prefix(n, verdicts)
    if nxt is not None:
        return {"status": "unfinished", "last_good": good, "first_bad": bad, "next": nxt}
    if bad == good + 1:
        return {"status": "found", "first_bad_patch": bad, "patch": cfg.patch_label(bad), "last_good": good}
    return {"status": "undetermined", "last_good": good, "first_bad": bad,
            "candidates": [cfg.patch_label(k) for k in range(good + 1, bad + 1)]}  # fmt: skip


@dataclass
class Step:
    """A concluded step as stored in steps/<name>.json."""

    name: str  # "endpoints" or "p<k>"
    prefix: int
    # endpoints: "differ", or why not: "same" (shown within ±min_effect), "undecided", "other-direction",
    # "below-threshold" (a state written before issue 71 says "same" for each of these); a step: "good", "bad", "skip"
    verdict: str
    reason: str
    good_values: list[float]
    step_values: list[float]
    runs_good: int
    runs_step: int
    wall_s: float
    build_s: float = 0.0
    lines: list[str] = field(default_factory=list)  # the verdict lines
    decision: dict | None = None
    rule: dict | None = None  # endpoints only: the rule every step uses
    stopped: str = ""
    finished_at: str = ""
    bad_values: list[float] = field(default_factory=list)  # the bad endpoint's, when the step was decided

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Step:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})


# The runs a bisect counts: ok ones, and those whose guest built other sched groups than the model predicts
# (topology-mismatch). That status flags a kernel whose topology is not the machine's, which is a kernel's
# behaviour and what a bisect looks for (seed 002's construction bug); its workload ran and its metrics stand.
# numalab compare and the reports leave such runs out of their A/B tables; a bisect counts them and says so.
COUNTED_STATUSES = ("ok", "topology-mismatch")


def mismatch_line(runs: list[dict], label: str, status: str = "topology-mismatch") -> str | None:
    """``"prefix 3: 4 of 4 runs topology-mismatch (counted): ..."`` (the first run's reason), or None; a status
    counted because --include-status asked for it says so: ``(counted: --include-status)``."""
    bad = [m for m in runs if m.get("status") == status]
    if not bad:
        return None
    reason = str(bad[0].get("reason") or "")[:200]
    why = "counted" if status in COUNTED_STATUSES else "counted: --include-status"
    return f"{label}: {len(bad)} of {len(runs)} runs {status} ({why}): {reason}"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Bisect:
    """One bisect in its state directory; :meth:`run` starts or resumes it."""

    def __init__(self, out: Path, cfg: Config, runner: StepRunner, progress: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        cfg.check()
        self.out, self.cfg, self.runner, self.progress, self.clock = out, cfg, runner, progress, clock
        self.kernels: dict[int, str] = {}
        self.t_session = clock()

    # --- the state directory ---------------------------------------------------------

    def _open_state(self) -> None:
        meta = self.out / "bisect.json"
        if meta.exists():
            old = read_config(meta)
            if old != self.cfg:
                was, now = old.to_dict(), self.cfg.to_dict()
                diff = next(k for k in now if was.get(k) != now[k])
                raise LabError(f"--out {self.out}: holds a bisect with another {diff}; give a new directory "
                               f"or the same options to resume it")  # fmt: skip
            self.progress(f"resuming the bisect in {self.out}")
            (self.out / "steps").mkdir(exist_ok=True)  # a state directory rebuilt by hand from another's runs
            (self.out / "runs").mkdir(exist_ok=True)
            return
        if self.out.exists() and any(p.name != "range" for p in self.out.iterdir()):  # range: --good/--bad's series
            raise LabError(f"--out {self.out}: exists and is not a bisect state directory; give a new directory")
        (self.out / "steps").mkdir(parents=True, exist_ok=True)
        (self.out / "runs").mkdir(exist_ok=True)
        write_json_atomic(meta, {"version": STATE_VERSION, "config": self.cfg.to_dict(), "started_at": _now(),
                                 "rule": RULE_TEXT})  # fmt: skip

    def runs_of(self, prefix: int) -> list[dict]:
        """The finished runs of a prefix, in order (their manifests)."""
        found = []
        for d in (self.out / "runs").glob(f"p{prefix}-r*"):
            m = _RUN_DIR.match(d.name)
            if m and int(m.group(1)) == prefix and (d / MANIFEST).is_file():
                found.append((int(m.group(2)), load_manifest(d / MANIFEST)))
        return [man for _, man in sorted(found, key=lambda t: t[0])]

    def values_of(self, prefix: int) -> list[float]:
        return values(self.runs_of(prefix), self.cfg.metric, self.cfg.counted)

    def verdict(self, a: int, b: int) -> Verdict:
        """Welch's verdict line of prefix ``b`` against prefix ``a`` on the runs made so far."""
        labels = (f"prefix {a}", f"prefix {b}")
        runs_a, runs_b = self.runs_of(a), self.runs_of(b)
        return verdicts_of(runs_a, runs_b, [self.cfg.metric], self.cfg.plan, labels, self.cfg.context,
                           self.cfg.counted)[0]  # fmt: skip

    def mismatch_lines(self, *prefixes: int) -> list[str]:
        """A line for each counted status but ok a prefix has runs of (topology-mismatch, --include-status's)."""
        lines = (mismatch_line(self.runs_of(k), f"prefix {k}", s) for k in prefixes for s in self.cfg.counted[1:])
        return [ln for ln in lines if ln]

    def steps(self) -> dict[str, Step]:
        return load_steps(self.out)

    def _save_step(self, step: Step) -> None:
        step.finished_at = _now()
        write_json_atomic(self.out / "steps" / f"{step.name}.json", step.to_dict())
        write_log(self.out, self.cfg, self.steps())

    def _spent(self) -> float:
        return sum(s.wall_s for s in self.steps().values())

    # --- runs --------------------------------------------------------------------------

    def _kernel(self, prefix: int) -> str:
        if prefix not in self.kernels:
            self.progress(f"prefix {prefix} {self.cfg.patch_label(prefix)}: kernel")
            self.kernels[prefix] = self.runner.build(prefix)
        return self.kernels[prefix]

    def _run_one(self, prefix: int) -> None:
        n = len(list((self.out / "runs").glob(f"p{prefix}-r*")))
        out = self.out / "runs" / f"p{prefix}-r{n + 1}"
        while out.exists():
            n += 1
            out = self.out / "runs" / f"p{prefix}-r{n + 1}"
        self.progress(f"run {out.name}: prefix {prefix} {self.cfg.patch_label(prefix)}")
        self.runner.run(prefix, self._kernel(prefix), out)

    # --- the endpoints --------------------------------------------------------------

    def _refuse_same_endpoints(self, n: int) -> None:
        """Good and bad that build one binary: there is nothing to bisect, whatever runs of them would say."""
        identity = getattr(self.runner, "identity", None)  # (a runner may not know: then runs decide)
        ids = [identity(self.kernels[k]) for k in (0, n)] if identity else [None, None]
        if ids[0] is not None and ids[0] == ids[1]:
            raise LabError(f"endpoints: the good and bad kernels are the same binary (build-id {ids[0][:16]}): "
                           "the series changes nothing that is built, so there is nothing to bisect")  # fmt: skip

    def endpoints(self) -> Step:
        done = self.steps().get("endpoints")
        if done is not None:
            return done
        n = len(self.cfg.patches)
        budget = self.cfg.plan.time_budget
        share = budget / (1 + expected_steps(n - 1)) if budget else None
        t0, build_s = self.clock(), 0.0
        try:
            for k in (0, n):
                b0 = self.clock()
                self._kernel(k)
                build_s += self.clock() - b0
        except LabError as err:
            raise LabError(f"endpoint kernel does not build: {err}") from None
        self._refuse_same_endpoints(n)
        pairs = min(len(self.runs_of(0)), len(self.runs_of(n)))
        while True:
            p0 = self.clock()
            for k in (0, n):
                if len(self.runs_of(k)) <= pairs:
                    self._run_one(k)
            pairs += 1
            v = self.verdict(0, n)
            self.progress(f"endpoints after pair {pairs}: {v.line()}")
            # (the endpoints' share of the time budget, as a step has its own)
            plan = replace(self.cfg.plan, time_budget=share)
            stop = should_stop([v], pairs, plan, self.clock() - t0, self.clock() - p0)
            if stop.stop:
                break
        good, bad = self.values_of(0), self.values_of(n)
        if stop.reason == "no-data":
            raise LabError(f"endpoints: no {' or '.join(self.cfg.counted)} run with {self.cfg.metric} on one side "
                           f"after {pairs} pairs (see {self.out / 'runs'})")  # fmt: skip
        verdict, reason = "differ", f"{v.direction}, {v.diff}"
        rule = None
        if v.direction == "same":  # (shown by the equivalence test at the minimum effect: lab.analysis.judgement)
            verdict, reason = v.direction, f"the endpoints moved {v.diff}: {v.decision} (--min-effect)"
        elif not v.decided and not v.significant:
            verdict = "undecided"
            reason = f"not significantly different, and not shown the same: {v.decision} ({stop.detail})"
        elif not v.decided:
            verdict, reason = "undecided", f"the endpoints moved {v.diff}: {v.decision} ({stop.detail})"
        elif self.cfg.direction and self.cfg.direction not in (v.direction, v.moved):
            moved = v.moved if v.direction == "changed" else v.direction
            verdict = "other-direction"
            reason = f"the endpoints moved {moved}, not {self.cfg.direction} (--direction)"
        else:
            r = rule_from_endpoints(self.cfg.metric, good, bad, self.cfg.threshold_pct, v.min_effect_pct)
            if r.threshold <= 0:
                raise LabError("--threshold: the good endpoint's mean is 0, so a percentage of it is 0; leave "
                               "--threshold out (half the endpoints' shift)")  # fmt: skip
            if r.threshold >= abs(_shift(good, bad)):
                verdict = "below-threshold"
                reason = f"the endpoints moved {v.diff}, less than the threshold ({r.threshold_pct or 0:.3g}%)"
            rule = r.to_dict()
        lines = [v.line(), *self.mismatch_lines(0, n)]
        step = Step("endpoints", n, verdict, reason, good, bad, len(good), len(bad), round(self.clock() - t0, 1),
                    round(build_s, 1), lines, v.to_dict(), rule, stop.reason)  # fmt: skip
        self._save_step(step)
        return step

    # --- a step ----------------------------------------------------------------------

    def step(self, prefix: int, rule: Rule, share: float | None) -> Step:
        t0 = self.clock()
        label = self.cfg.patch_label(prefix)
        try:
            self._kernel(prefix)
        except LabError as err:
            self.progress(f"prefix {prefix}: skip: does not build: {err}")
            step = Step(f"p{prefix}", prefix, "skip", f"does not build: {err}", self.values_of(0), [], 0, 0,
                        round(self.clock() - t0, 1), round(self.clock() - t0, 1))  # fmt: skip
            self._save_step(step)
            return step
        build_s = self.clock() - t0
        t_runs = self.clock()
        n = len(self.cfg.patches)
        pairs = len(self.runs_of(prefix))
        held_by_bad = False
        while True:
            p0 = self.clock()
            self._run_one(prefix)
            pairs += 1
            if len(self.runs_of(0)) < pairs:  # the good endpoint keeps up with the step
                self._run_one(0)
            if held_by_bad:  # good by its interval, not yet apart from the bad endpoint: more of the bad one
                self._run_one(n)
            good, vals, bad = self.values_of(0), self.values_of(prefix), self.values_of(n)
            d = decide_step(good, vals, rule, bad)
            held_by_bad = d.held_by_bad
            self.progress(f"prefix {prefix} after {pairs} runs: {d.line()}")
            elapsed, pair_s = self.clock() - t_runs, self.clock() - p0
            if pairs < self.cfg.plan.min_pairs:
                continue
            if d.decided:
                verdict, reason, stopped = d.verdict, d.line(), "decided"
                break
            if len(vals) == 0:
                reason = f"no {' or '.join(self.cfg.counted)} run with {self.cfg.metric} in {pairs} runs"
                verdict, stopped = "skip", "no-data"
                break
            if pairs >= self.cfg.plan.max_pairs:
                verdict, reason, stopped = "skip", f"undecided after {pairs} runs: {d.line()}", "max-pairs"
                break
            if share is not None and elapsed + pair_s > share:
                verdict, reason = "skip", f"undecided within its {share:.0f}s share of the budget: {d.line()}"
                stopped = "time-budget"
                break
        v = self.verdict(0, prefix)
        self.progress(f"prefix {prefix} {label}: {verdict}")
        lines = [v.line(), d.line(), *self.mismatch_lines(prefix)]
        step = Step(f"p{prefix}", prefix, verdict, reason, good, vals, len(good), len(vals), round(
            self.clock() - t0, 1), round(build_s, 1), lines, d.to_dict(), None, stopped, bad_values=bad)  # fmt: skip
        self._save_step(step)
        return step

    def confirmation(self, good: int, bad: int) -> str:
        """The blamed patch's own A/B from the runs already made: prefix ``good`` (the last good) against
        prefix ``bad`` (the first bad), Welch's verdict line. Each was compared with the good endpoint; this
        compares them with each other (no further runs: a fixed-N ``numalab run --repeat`` confirms more)."""
        return self.verdict(good, bad).line()

    # --- the whole -------------------------------------------------------------------

    def run(self) -> dict:
        """Start or resume; returns the result (also in result.json)."""
        self._open_state()
        ends = self.endpoints()
        n = len(self.cfg.patches)
        if ends.verdict != "differ":
            result = {"status": "nothing-to-bisect", "reason": ends.reason}
        else:
            rule = Rule.from_dict(ends.rule or {})
            while True:
                verdicts = step_verdicts(self.steps())
                nxt, good, bad = next_prefix(n, verdicts)
                if nxt is None:
                    break
                cands = len([k for k in range(good + 1, bad) if k not in verdicts])
                share = None
                if self.cfg.plan.time_budget is not None:
                    share = max(0.0, self.cfg.plan.time_budget - self._spent()) / expected_steps(cands)
                self.progress(f"bisecting: prefix {good} good, prefix {bad} bad, {cands} left: testing prefix {nxt} "
                              f"({self.cfg.patch_label(nxt)})")  # fmt: skip
                self.step(nxt, rule, share)
            result = outcome(self.cfg, step_verdicts(self.steps()))
            if result["status"] == "found":
                result["confirmation"] = self.confirmation(result["last_good"], result["first_bad_patch"])
        steps = self.steps()
        result |= {"metric": self.cfg.metric, "wall_s": round(sum(s.wall_s for s in steps.values()), 1),
                   "runs": sum(len(list((self.out / "runs").glob(f"p{k}-r*"))) for k in range(n + 1))}  # fmt: skip
        write_json_atomic(self.out / "result.json", result)
        write_log(self.out, self.cfg, steps, result)
        return result


def _shift(good: list[float], bad: list[float]) -> float:
    return statistics.fmean(bad) - statistics.fmean(good)


def read_state(path: Path) -> dict:
    """A file of a bisect's state directory, with lab.datafile's bounded reader (a state directory may be
    handed around for ``bisect replay``): a JSON object, or a one-line error naming the file."""
    data = load_json(path, "bisect state")
    if not isinstance(data, dict):
        raise LabError(f"bisect state {path}: expected a JSON object")
    return data


def read_config(path: Path) -> Config:
    """The Config recorded in a state directory's bisect.json, or a one-line error naming the file."""
    raw = read_state(path).get("config")
    if (not isinstance(raw, dict) or not isinstance(raw.get("metric"), str) or not isinstance(raw.get("patches"), list)
            or not all(isinstance(p, str) for p in raw["patches"])):  # fmt: skip
        raise LabError(f"bisect state {path}: no config with a metric and a list of patches")
    try:
        return Config.from_dict(raw)
    except TypeError as err:
        raise LabError(f"bisect state {path}: config: {err}") from None


def load_steps(out: Path) -> dict[str, Step]:
    return {p.stem: Step.from_dict(read_state(p)) for p in sorted((out / "steps").glob("*.json"))}


def step_verdicts(steps: dict[str, Step]) -> dict[int, str]:
    return {s.prefix: s.verdict for name, s in steps.items() if name != "endpoints"}


def ordered(steps: dict[str, Step]) -> list[Step]:
    """The steps in the order they concluded (endpoints first)."""
    return sorted(steps.values(), key=lambda s: (s.name != "endpoints", s.finished_at, s.prefix))


def log_entries(cfg: Config, steps: dict[str, Step], result: dict | None = None) -> list[dict]:
    entries: list[dict] = [{"event": "start", "metric": cfg.metric, "patches": list(cfg.patches), **cfg.what}]
    for s in ordered(steps):
        entry = {"event": "endpoints" if s.name == "endpoints" else "step", "prefix": s.prefix,
                 "patch": cfg.patch_label(s.prefix), "verdict": s.verdict, "reason": s.reason,
                 "runs": [s.runs_good, s.runs_step], "wall_s": s.wall_s, "lines": s.lines}  # fmt: skip
        entries.append(entry)
    if result is not None:
        entries.append({"event": "result", **result})
    return entries


def write_log(out: Path, cfg: Config, steps: dict[str, Step], result: dict | None = None) -> None:
    text = "".join(json_text(e) + "\n" for e in log_entries(cfg, steps, result))
    write_text_atomic(out / "log.jsonl", text)


def log_text(entries: list[dict]) -> str:
    """The log as ``git bisect log`` shows one: comments with the evidence, and the verdict commands."""
    out: list[str] = []
    for e in entries:
        ev = e.get("event")
        if ev == "start":
            out.append(f"# numalab bisect: {len(e['patches'])} patches, metric {e['metric']}")
            out += [f"# {k}: {e[k]}" for k in ("source", "series", "topology", "workload") if e.get(k)]
            out.append("numalab bisect start")
        elif ev == "endpoints":
            if e["verdict"] != "differ":
                out.append(f"# endpoints: [0] (no patches) vs [{e['prefix']}] {e['patch']}")
                out += [f"#   {ln}" for ln in e.get("lines", [])]
                out.append(f"# the endpoints do not differ: {e['reason']}")
            else:
                out.append(f"# good: [0] (no patches)\n# bad: [{e['prefix']}] {e['patch']}")
                out += [f"#   {ln}" for ln in e.get("lines", [])]
                out.append(f"numalab bisect good 0\nnumalab bisect bad {e['prefix']}")
        elif ev == "step":
            out.append(f"# {e['verdict']}: [{e['prefix']}] {e['patch']} ({e['runs'][1]} runs, {e['wall_s']:.0f}s)")
            out += [f"#   {ln}" for ln in e.get("lines", [])] if e["verdict"] != "skip" else [f"#   {e['reason']}"]
            out.append(f"numalab bisect {e['verdict']} {e['prefix']}")
        elif ev == "result":
            out.append(result_text(e))
    return "\n".join(out)


def result_text(r: dict) -> str:
    status = r.get("status")
    if status == "found":
        confirm = f"\n# confirmation: {r['confirmation']}" if r.get("confirmation") else ""
        return f"# first bad patch: [{r['first_bad_patch']}] {r['patch']}{confirm}"
    if status == "nothing-to-bisect":
        return f"# nothing to bisect: {r.get('reason', '')}"
    if status == "undetermined":
        return f"# only skipped prefixes left to test: the first bad patch is one of {', '.join(r['candidates'])}"
    return f"# unfinished: prefix {r.get('last_good')} good, prefix {r.get('first_bad')} bad"


def replay(out: Path) -> tuple[dict, list[str]]:
    """The answer re-derived from the recorded steps without running anything: every step's verdict is
    decided again from its recorded values with the recorded rule, and the search is walked again from the
    verdicts. Returns (result, disagreements); a disagreement names the step whose recorded verdict is not
    what its values say, or a step the search would not have chosen."""
    cfg = read_config(out / "bisect.json")
    steps = load_steps(out)
    problems: list[str] = []
    ends = steps.get("endpoints")
    if ends is None:
        return {"status": "unfinished", "reason": "the endpoints have not been compared yet"}, problems
    if ends.verdict != "differ":
        return {"status": "nothing-to-bisect", "reason": ends.reason}, problems
    rule = Rule.from_dict(ends.rule or {})
    n = len(cfg.patches)
    verdicts: dict[int, str] = {}
    for s in ordered(steps)[1:]:
        nxt, _, _ = next_prefix(n, verdicts)
        if s.prefix != nxt:
            problems.append(f"prefix {s.prefix}: the search would have tested prefix {nxt} here")
        if s.stopped in ("decided", "max-pairs", "time-budget"):  # not a build failure, not a step without data
            # with the bad endpoint's values when the step was decided; a state written before they were kept
            # was decided by the interval alone, and is replayed so
            d: StepDecision = decide_step(s.good_values, s.step_values, rule, s.bad_values or None)
            again = d.verdict if d.decided else "skip"
            if again != s.verdict:
                problems.append(f"prefix {s.prefix}: recorded {s.verdict}, its values say {again}: {d.line()}")
        verdicts[s.prefix] = s.verdict
    return outcome(cfg, verdicts), problems
