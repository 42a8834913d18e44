"""The decision at one bisect step: is prefix k bad, good, or undecided, against the good endpoint?

Everything is measured as the **shift toward bad**: ``(mean(step) - mean(good)) * sign``, where ``sign``
is +1 when the bad endpoint's mean is above the good endpoint's, -1 otherwise (arithmetic means, as
Welch's test uses them). ``threshold`` is a shift in the metric's units: by default half the endpoints'
shift, or ``--threshold PCT`` percent of the good endpoint's mean.

- **bad**: Welch's test (:func:`lab.analysis.compare.significant`, α = 0.05, two-sided) calls the
  difference from the good endpoint significant, and the observed shift toward bad is at least the
  threshold.
- **good**: the upper end of the 95% Welch confidence interval of the shift toward bad
  (:func:`lab.analysis.compare.welch_interval`) is below the threshold: the step is significantly less
  bad than the threshold (the one-sided test of TOST that matters here, a non-inferiority test at
  α = 0.025). A step that moved *away* from bad counts as good too.
- **undecided** otherwise; **unknown** with fewer than 3 ok runs on a side.

Both conditions cannot hold at once (a CI whose upper end is below the threshold has its centre below
it too). Deciding after every pair looks at the data repeatedly, as ``--repeat auto`` does
(:mod:`lab.analysis.verdict`): a step's error rate is higher than the stated α; the log keeps the runs per
side so a reader can judge.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from lab.analysis.compare import MIN_REPEATS, Stats, mean_interval, significant, welch_interval

RULE_TEXT = (
    "bad: Welch-significant (α=0.05) and moved toward bad by at least the threshold; "
    "good: the 95% Welch CI of the shift toward bad lies below the threshold"
)


@dataclass(frozen=True)
class Rule:
    metric: str
    sign: int  # +1: the bad endpoint's mean is above the good endpoint's
    threshold: float  # a shift toward bad, in the metric's units (> 0)
    threshold_pct: float | None  # the same as a percentage of the good endpoint's mean (None for a mean of 0)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Rule:
        return cls(str(d["metric"]), int(d["sign"]), float(d["threshold"]), d.get("threshold_pct"))


def rule_from_endpoints(metric: str, good: list[float], bad: list[float], threshold_pct: float | None) -> Rule:
    """The rule of a bisect whose endpoints gave ``good`` and ``bad`` values: the bad direction, and the
    threshold (``threshold_pct`` % of the good mean; None: half the endpoints' shift)."""
    mg, mb = Stats.of(good).amean, Stats.of(bad).amean
    sign = 1 if mb >= mg else -1
    if threshold_pct is None:
        threshold = abs(mb - mg) / 2
    else:
        threshold = abs(mg) * threshold_pct / 100
    pct = threshold * 100 / abs(mg) if mg else None
    return Rule(metric, sign, threshold, pct)


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

    @property
    def decided(self) -> bool:
        return self.verdict in ("good", "bad")

    def _pct(self, v: float) -> str:
        return f"{v * 100 / abs(self.mean_good):+.1f}%" if self.mean_good else f"{v:+.4g}"

    def line(self) -> str:
        """One line: the verdict, the shift toward bad with its CI, the threshold, the runs."""
        runs = f"{self.n_good}+{self.n_step} runs"
        if self.shift is None or self.shift_ci is None:
            return f"{self.verdict}: not judged (<{MIN_REPEATS} ok runs a side), {runs}"
        lo, hi = self.shift_ci
        sig = "significant" if self.significant else "not significant"
        return (
            f"{self.verdict}: moved {self._pct(self.shift)} toward bad (95% CI {self._pct(lo)} .. {self._pct(hi)}), "
            f"threshold {self._pct(self.threshold)}, {sig} (welch), {runs}"
        )

    def to_dict(self) -> dict:
        return asdict(self) | {"line": self.line()}


def decide_step(good: list[float], step: list[float], rule: Rule) -> StepDecision:
    """The verdict of a step whose runs gave ``step`` against the good endpoint's ``good`` values."""
    gs = Stats.of(good) if good else None
    ss = Stats.of(step) if step else None
    step_ci = mean_interval(ss) if ss else None
    mg, ms = (gs.amean if gs else None), (ss.amean if ss else None)
    if gs is None or ss is None or gs.n < MIN_REPEATS or ss.n < MIN_REPEATS:
        return StepDecision("unknown", len(good), len(step), mg, ms, step_ci, None, None, None, rule.threshold)
    iv = welch_interval(gs, ss)
    assert iv is not None
    shift = (ss.amean - gs.amean) * rule.sign
    lo, hi = sorted((iv[0] * rule.sign, iv[1] * rule.sign))
    sig = significant(gs, ss, "welch")
    if sig and shift >= rule.threshold:
        verdict = "bad"
    elif hi < rule.threshold:
        verdict = "good"
    else:
        verdict = "undecided"
    return StepDecision(verdict, gs.n, ss.n, mg, ms, step_ci, shift, (lo, hi), sig, rule.threshold)
