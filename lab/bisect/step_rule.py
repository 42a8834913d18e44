"""The decision at one bisect step: is prefix k bad, good, or undecided, against the good endpoint?

Everything is measured as the **shift toward bad**: ``(mean(step) - mean(good)) * sign``, where ``sign``
is +1 when the bad endpoint's mean is above the good endpoint's, -1 otherwise (arithmetic means, as
Welch's test uses them). ``threshold`` is a shift in the metric's units: by default half the endpoints'
shift, or ``--threshold PCT`` percent of the good endpoint's mean.

- **bad**: Welch's test (:func:`lab.analysis.stats.significant`, α = 0.05, two-sided) calls the
  difference from the good endpoint significant, the observed shift toward bad is at least the
  threshold, **and** the good endpoint would rarely give runs this much on the bad side
  (:func:`p_like_good` < 0.05: the mirror of good's sign test).
- **good**: the upper end of the 95% Welch confidence interval of the shift toward bad
  (:func:`lab.analysis.stats.welch_interval`) is below the threshold: the step is significantly less
  bad than the threshold (the one-sided test of TOST that matters here, a non-inferiority test at
  α = 0.025). A step that moved *away* from bad counts as good too. **And** the bad endpoint would
  rarely give runs this much on the good side (:func:`p_like_bad` < 0.05).
- **same as good**: the equivalence test (:func:`lab.analysis.stats.equivalence_p`: Welch's two one-sided
  tests at α = 0.05) shows the step within ± the minimum effect of the good endpoint (:mod:`lab.min_effect`,
  in % of the good endpoint's mean, recorded in the rule); the step counts as good, under the same sign test
  against the bad endpoint. The threshold is never below the minimum effect, so such a step is never bad.
  (Before issue 71 a significant shift smaller than the minimum effect was called the same without that test.)
- **undecided** otherwise; **unknown** with fewer than 3 ok runs on a side.

Why the second condition for good: the interval assumes a mean that is roughly normal, and NUMA counts
under TCG are often not. Seed 003's revert on ring-2 with ``pairs`` is bimodal: 4 of 10 runs at ~2%
hint-local, the rest like the baseline's ~85%. Five runs of the bad prefix that all missed the low mode
(a 1-in-13 chance) gave a tight interval under the threshold, and the prefix was called good; the bisect
then blamed the harmless patch after it. No test of means sees that five runs from the high mode are what
the bad endpoint gives often. A sign test against the bad endpoint does, without assuming a shape: a run
is on the *good side* when its own shift toward bad is under the threshold; q is the share of the bad
endpoint's runs on the good side, taken at the upper end of its one-sided 80% Clopper-Pearson interval
(so a short bad-endpoint sample cannot make good cheap); and the step's runs must be on the good side
more often than Binomial(n, q) gives with probability 0.05. For a bad endpoint that shifted as a whole,
q is small and three runs do; for seed 003's (5 of 10 runs on the good side, q = 0.67) a step needs 8
runs, all on the good side. The engine adds runs of the bad endpoint, pooled like the good one's, when
that is what keeps a step from being good.

Why the sign test for bad too: the same bimodality, the other way, with Welch looked at after every run.
A fresh seed 003 bisect (2026-11-24) called prefix 2, a comment and a compiled-out ``pr_debug``, bad
after 14 runs: +8.8% toward bad (CI +0.2% .. +17.3%, threshold 5.7%), its runs falling between the
baseline's modes by chance. The good endpoint itself gave 4 of its 14 runs on the bad side (a share of
up to 43% at the upper bound); the step's 9 of 14 is what that gives with p = 0.096, so the sign test
keeps the step undecided.

Both verdicts cannot hold at once (a CI whose upper end is below the threshold has its centre below
it too). Deciding after every pair looks at the data repeatedly, as ``--repeat auto`` does
(:mod:`lab.analysis.verdict`): a step's error rate is higher than the stated α; the log keeps the runs per
side so a reader can judge.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from lab.analysis.stats import (
    ALPHA,
    MIN_REPEATS,
    Stats,
    equivalence_p,
    mean_interval,
    p_at_least,
    significant,
    upper_share,
    welch_interval,
)
from lab.min_effect import text as effect_text

RULE_TEXT = (
    f"bad: Welch-significant (α={ALPHA:g}), moved toward bad by at least the threshold, and the good endpoint "
    f"gives as many runs at or over the threshold with p < {ALPHA:g} (sign test); "
    "good: the 95% Welch CI of the shift toward bad lies below the threshold, and the bad endpoint gives as "
    f"many runs under the threshold with p < {ALPHA:g} (sign test)"
)


@dataclass(frozen=True)
class Rule:
    metric: str
    sign: int  # +1: the bad endpoint's mean is above the good endpoint's
    threshold: float  # a shift toward bad, in the metric's units (> 0)
    threshold_pct: float | None  # the same as a percentage of the good endpoint's mean (None for a mean of 0)
    # The minimum effect (lab.min_effect) in the metric's units and as the percentage it was given in: a step
    # whose significant shift is smaller is the same as the good endpoint. 0 in a state written before it.
    min_effect: float = 0.0
    min_effect_pct: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Rule:
        return cls(str(d["metric"]), int(d["sign"]), float(d["threshold"]), d.get("threshold_pct"),
                   float(d.get("min_effect") or 0.0), d.get("min_effect_pct"))  # fmt: skip


def rule_from_endpoints(metric: str, good: list[float], bad: list[float], threshold_pct: float | None,
                        min_effect_pct: float | None = None) -> Rule:  # fmt: skip
    """The rule of a bisect whose endpoints gave ``good`` and ``bad`` values: the bad direction, and the
    threshold (``threshold_pct`` % of the good mean; None: half the endpoints' shift), never below the
    minimum effect (``min_effect_pct`` % of the good mean, lab.min_effect): no step is bad by less."""
    mg, mb = Stats.of(good).amean, Stats.of(bad).amean
    sign = 1 if mb >= mg else -1
    if threshold_pct is None:
        threshold = abs(mb - mg) / 2
    else:
        threshold = abs(mg) * threshold_pct / 100
    effect = abs(mg) * (min_effect_pct or 0.0) / 100
    threshold = max(threshold, effect)
    pct = threshold * 100 / abs(mg) if mg else None
    return Rule(metric, sign, threshold, pct, effect, min_effect_pct)


@dataclass(frozen=True)
class StepDecision:
    verdict: str  # "bad", "good", "undecided", "unknown"
    n_good: int
    n_step: int
    mean_good: float | None
    mean_step: float | None
    step_ci: tuple[float, float] | None  # 95% CI of the step's mean
    shift: float | None  # toward bad, in the metric's units
    shift_ci: tuple[float, float] | None  # 95% Welch CI of the shift toward bad
    significant: bool | None
    threshold: float
    # the chance that the bad endpoint gives as many runs on the good side as the step did (p_like_bad;
    # None: no bad values given, as in a state directory written before this rule)
    p_bad: float | None = None
    n_bad: int = 0
    # the chance that the good endpoint gives as many runs on the bad side as the step did (p_like_good;
    # None in a step recorded before bad asked for it)
    p_good: float | None = None
    min_effect: float = 0.0  # the rule's, in the metric's units (0: none)
    min_effect_pct: float | None = None
    # Welch's TOST p that the step is within ±min_effect of the good endpoint (lab.analysis.stats.equivalence_p;
    # None in a step recorded before issue 71): below ALPHA it is the same as good
    equivalence_p: float | None = None

    @property
    def decided(self) -> bool:
        return self.verdict in ("good", "bad")

    @property
    def below_effect(self) -> bool:
        """Shown the same as the good endpoint within ± the minimum effect by the equivalence test (a step
        recorded before issue 71, without the test: significantly apart by less than the minimum effect)."""
        if self.equivalence_p is not None:
            return self.min_effect > 0 and self.equivalence_p < ALPHA
        return bool(self.significant) and self.shift is not None and abs(self.shift) < self.min_effect

    def _pct(self, v: float) -> str:
        return f"{v * 100 / abs(self.mean_good):+.1f}%" if self.mean_good else f"{v:+.4g}"

    def line(self) -> str:
        """One line: the verdict, the shift toward bad with its CI, the threshold, the runs."""
        runs = f"{self.n_good}+{self.n_step} runs"
        if self.shift is None or self.shift_ci is None:
            return f"{self.verdict}: not judged (<{MIN_REPEATS} ok runs a side), {runs}"
        lo, hi = self.shift_ci
        sig = "significant" if self.significant else "not significant"
        like = ""
        if self.p_good is not None:
            like += f"; like the good endpoint with p={self.p_good:.2g} (bad needs <{ALPHA:g})"
        if self.p_bad is not None:
            like += f"; like the bad endpoint ({self.n_bad} runs) with p={self.p_bad:.2g} (good needs <{ALPHA:g})"
        what = self.verdict
        if self.below_effect and self.min_effect_pct is not None:
            how = f"TOST p={self.equivalence_p:.2g}" if self.equivalence_p is not None else "significant but below"
            what += f" (the same as the good endpoint within ±{effect_text(self.min_effect_pct)}: {how})"
        return (
            f"{what}: moved {self._pct(self.shift)} toward bad (95% CI {self._pct(lo)} .. {self._pct(hi)}), "
            f"threshold {self._pct(self.threshold)}, {sig} (welch), {runs}{like}"
        )

    @property
    def held_by_bad(self) -> bool:
        """Good by its interval, but not yet told apart from the bad endpoint: more bad-endpoint runs help."""
        return (self.verdict == "undecided" and self.p_bad is not None and self.p_bad >= ALPHA
                and self.shift_ci is not None and self.shift_ci[1] < self.threshold)  # fmt: skip

    def to_dict(self) -> dict:
        return asdict(self) | {"line": self.line()}


Q_CONFIDENCE = 0.8  # an endpoint's share of runs on the other side is taken at this one-sided upper bound


def p_like_bad(good_mean: float, bad: list[float], step: list[float], rule: Rule) -> float:
    """The chance that runs of the bad endpoint land on the good side (a shift toward bad under the
    threshold) at least as often as the step's did: P(X >= g) for X ~ Binomial(len(step), q), q the bad
    endpoint's good-side share at its upper bound (:func:`lab.analysis.stats.upper_share`); the sign tests'
    level is the one :data:`lab.analysis.stats.ALPHA`."""

    def good_side(v: float) -> bool:
        return (v - good_mean) * rule.sign < rule.threshold

    q = upper_share(sum(map(good_side, bad)), len(bad), Q_CONFIDENCE)
    return p_at_least(sum(map(good_side, step)), len(step), q)


def p_like_good(good: list[float], step: list[float], rule: Rule) -> float:
    """The mirror of :func:`p_like_bad`: the chance that runs of the good endpoint land on the bad side (a
    shift toward bad of at least the threshold from the good endpoint's mean) at least as often as the
    step's did, the good endpoint's bad-side share taken at its upper bound."""
    mean = statistics.fmean(good)

    def bad_side(v: float) -> bool:
        return (v - mean) * rule.sign >= rule.threshold

    q = upper_share(sum(map(bad_side, good)), len(good), Q_CONFIDENCE)
    return p_at_least(sum(map(bad_side, step)), len(step), q)


def decide_step(good: list[float], step: list[float], rule: Rule, bad: list[float] | None = None) -> StepDecision:
    """The verdict of a step whose runs gave ``step`` against the good endpoint's ``good`` values and, when
    given, the bad endpoint's ``bad`` values (None: the interval alone decides good, as before the rule
    asked for both)."""
    gs = Stats.of(good) if good else None
    ss = Stats.of(step) if step else None
    step_ci = mean_interval(ss) if ss else None
    mg, ms = (gs.amean if gs else None), (ss.amean if ss else None)
    if gs is None or ss is None or gs.n < MIN_REPEATS or ss.n < MIN_REPEATS:
        return StepDecision("unknown", len(good), len(step), mg, ms, step_ci, None, None, None, rule.threshold,
                            min_effect=rule.min_effect, min_effect_pct=rule.min_effect_pct)  # fmt: skip
    iv = welch_interval(gs, ss)
    assert iv is not None
    shift = (ss.amean - gs.amean) * rule.sign
    lo, hi = sorted((iv[0] * rule.sign, iv[1] * rule.sign))
    sig = significant(gs, ss, "welch")
    p_bad = p_like_bad(gs.amean, bad, step, rule) if bad and len(bad) >= MIN_REPEATS else None
    p_good = p_like_good(good, step, rule)
    p_same = equivalence_p(gs, ss, rule.min_effect)  # within ±the minimum effect of the good endpoint (TOST)
    same = rule.min_effect > 0 and p_same is not None and p_same < ALPHA
    if sig and shift >= rule.threshold and p_good < ALPHA:
        verdict = "bad"
    elif (hi < rule.threshold or same) and (p_bad is None or p_bad < ALPHA):
        verdict = "good"
    else:
        verdict = "undecided"
    n_bad = len(bad or [])
    return StepDecision(verdict, gs.n, ss.n, mg, ms, step_ci, shift, (lo, hi), sig, rule.threshold, p_bad, n_bad,
                        p_good, rule.min_effect, rule.min_effect_pct, p_same)  # fmt: skip
