"""numalab's statistics, in one module (as mmtests keeps its own in ``bin/lib/MMTests/Stat.pm``): the summary of
one side's runs, the means, the two significance rules, the equivalence test, confidence intervals, the power
estimates and the binomial sign test of bisect's step rule. Plain Python: the package does not depend on scipy
(``tests/unit/test_stats_scipy.py`` checks these against it). The table that shows them is
:mod:`lab.analysis.compare`'s, the verdicts :mod:`lab.analysis.verdict`'s, the step rule
:mod:`lab.bisect.step_rule`'s.

**Significance.** Two rules (see README "Reports and A/B comparisons"):

``welch`` (the default): Welch's two-sided t-test at :data:`ALPHA` = 0.05 on the arithmetic means, with
Welch–Satterthwaite degrees of freedom. It asks whether the means differ, so it gains power with repeats.

``ci-overlap``: what mmtests' compare-kernels computes (MMTests::Compare with Stat.pm's ``cidiff`` and
``_calc_meanci``): each side's "confidence interval" is mean ± qnorm(0.975)·σ, where σ is the standard
deviation of the runs themselves (sample σ for Amean rows; for Hmean rows mmtests'
sqrt(Σ(1/x − 1/H)²·H⁴/n)) and *not* the standard error σ/√n; a row is significant when the intervals do not
overlap, |Δmean| > 1.96·(σ_base + σ_new), and, when both σ are 0, when |Δmean| > 1. It is a rule about where
single runs fall, so it does not get sharper with more repeats: at 6 repeats a side with equal σ it needs a
difference about three times the one Welch needs (3.92σ against 1.29σ).

With fewer than :data:`MIN_REPEATS` (3) runs on a side significance is not judged.

**Equivalence.** A difference that is not significant is not shown to be absent: 0 against 35,082 pages
migrated over 3 runs a side is not significant and not "the same" either. Sameness needs a test of its own, at a
margin: ±m, the minimum effect's share of the baseline's mean (:mod:`lab.min_effect`). :func:`equivalent`, by
the rule significance was judged by:

``welch``: two one-sided tests (TOST, Schuirmann 1987) with Welch's t and Welch–Satterthwaite degrees of
freedom on the arithmetic means, each at :data:`ALPHA`: H0₁ Δ ≤ -m against Δ > -m, H0₂ Δ ≥ m against Δ < m;
equivalent when both reject, i.e. when :func:`equivalence_p` (the larger of the two one-sided p) is below
α, which is when the 90% Welch interval of Δ lies inside (-m, m). m is the share of the baseline's Amean.

``ci-overlap``: the rule's own interval, widened the other way: equivalent when |Δmean| + 1.96·(σ_base +
σ_new) < m, with σ the runs' own (the row's mean and spread, as :func:`significant` takes them; m the share
of the baseline's row mean). Where the rule calls a difference significant when single runs of the two sides
do not overlap, it calls them the same when even the rule's whole width stays inside the margin; like the
rule it does not get easier with more runs.

Both sides without spread know Δ exactly: equivalent when |Δ| < m, or Δ is 0 (identical constant runs are the
same at any margin, a margin of 0 included). A margin of 0 (a baseline mean of 0, or ``--min-effect 0``)
shows nothing else the same. Fewer than :data:`MIN_REPEATS` runs a side: not judged (None).

**Which mean.** mmtests uses the harmonic mean for every higher-is-better row. That suits rates (GB/s, round
trips per second), whose Hmean is the rate of the runs taken together, but not ratios and percentages: one run
with 0.5% hint-local faults makes the Hmean of (0.5, 60, 90) 1.5, which says nothing about the other two. So a
metric declares its mean (``Metric.mean``): Hmean for rates only, Amean otherwise.

**Power.** For a two-sided test of the difference of two means at level α with power 1-β, each side needs
about

    n = (z_{1-α/2} + z_{1-β})² · (s_base² + s_new²) / Δ²

runs (the normal approximation of Welch's test; Δ the observed difference of the means, s the observed
standard deviations). With α = 0.05 and 80 % power the factor is (1.96 + 0.84)² ≈ 7.85. The estimate is only
as good as the variance it is computed from: with 3 runs a side it can be off by a factor of two either way,
which is why ``--repeat auto`` recomputes it after every pair. Showing equivalence within ±m takes about

    n = (z_{1-α} + z_{1-β})² · (s_base² + s_new²) / (m - |Δ|)²

runs a side (the same approximation for TOST; z_{1-β/2} in place of z_{1-β} when Δ is 0), and none can
while |Δ| ≥ m: :func:`repeats_for_equivalence`. A rule that compares Δ with the standard
deviations themselves (the CI-overlap rule) does not get easier with more runs: more runs only measure σ
better; :func:`ci_overlap_margin` says how far a metric is from passing it.

**Sign tests.** :func:`binom_cdf`, :func:`upper_share` (the one-sided Clopper-Pearson bound of a share) and
:func:`p_at_least` are what bisect's step rule asks of a binomial (:mod:`lab.bisect.step_rule` says why).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from statistics import NormalDist, fmean, stdev

ALPHA = 0.05  # the level of every test numalab makes: Welch's, the power estimate's, bisect's sign tests
MIN_REPEATS = 3  # fewer runs a side are never judged
POWER = 0.8  # the power the runs-needed estimate is for
SIGNIFICANCES = ("welch", "ci-overlap")  # the significance rules, by the names --significance and auto: take
DEFAULT_SIGNIFICANCE = "welch"  # the CI-overlap rule does not get easier with more runs (see Power above)
Z_975 = 1.959963984540054  # qnorm(0.975), as mmtests asks R for it


# --- one side's runs ------------------------------------------------------------------------------------------


def hmean(values: list[float]) -> float | None:
    """The harmonic mean of positive rates (None if any is not positive, or there are none)."""
    if not values or any(v <= 0 for v in values):
        return None
    return statistics.harmonic_mean(values)


@dataclass(frozen=True)
class Stats:
    n: int
    min: float
    max: float
    amean: float
    hmean: float | None
    stddev: float
    coeffvar: float | None
    hstddev: float | None = None  # mmtests' stddev-hmean: sqrt(sum((1/x - 1/H)^2) * H^4 / n)

    @classmethod
    def of(cls, values: list[float]) -> Stats:
        n = len(values)
        mean = statistics.fmean(values)
        sd = statistics.stdev(values) if n > 1 else 0.0
        h = hmean(values)
        # (written H * sqrt(sum((H/x - 1)^2) / n): the same, but 1/x^2 overflows for an x under 1e-154)
        hsd = h * math.sqrt(sum((h / v - 1) ** 2 for v in values) / n) if h else None
        cv = sd * 100 / mean if mean else None
        return cls(n, min(values), max(values), mean, h, sd, cv, hsd)

    def mean_of(self, mean: str) -> float:
        """'hmean' or 'amean' (the Amean when there is no Hmean)."""
        return self.hmean if mean == "hmean" and self.hmean is not None else self.amean

    def stddev_of(self, mean: str) -> float:
        return self.hstddev if mean == "hmean" and self.hstddev is not None else self.stddev


# --- Student's t ----------------------------------------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-12

    def guard(v: float) -> float:
        return v if abs(v) > tiny else tiny

    c, d = 1.0, 1 / guard(1.0 - (a + b) * x / (a + 1))
    h = d
    for m in range(1, 300):
        num = m * (b - m) * x / ((a - 1 + 2 * m) * (a + 2 * m))
        d, c = 1 / guard(1 + num * d), guard(1 + num / c)
        h *= d * c
        num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1 + 2 * m))
        d, c = 1 / guard(1 + num * d), guard(1 + num / c)
        h *= d * c
        if abs(d * c - 1) < eps:
            break
    return h


def t_two_sided_p(t: float, dof: float) -> float:
    """Student's two-sided p of ``t`` at ``dof`` degrees of freedom."""
    x = dof / (dof + t * t)
    if x == 1.0:  # t is 0, or so near it (|t| under about 1e-8 * sqrt(dof)) that log(1 - x) would be log(0)
        return 1.0
    a, b = dof / 2, 0.5
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(ln) * _betacf(a, b, x) / a
    return 1 - math.exp(ln) * _betacf(b, a, 1 - x) / b


def t_quantile(dof: float, level: float = 0.95) -> float:
    """The t with a two-sided p of ``1 - level`` at ``dof`` degrees of freedom (Student's t, as
    :func:`significant` uses it), by bisection."""
    lo, hi = 0.0, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_two_sided_p(mid, dof) > 1 - level else (lo, mid)
    return hi


# --- the two sides: tests and intervals -----------------------------------------------------------------------


def _welch(base: Stats, new: Stats) -> tuple[float, float]:
    """Welch's squared standard error of the difference of the means, and its Welch–Satterthwaite degrees
    of freedom (nan when the standard error is 0)."""
    a, b = base.stddev**2 / base.n, new.stddev**2 / new.n
    se2 = a + b
    if se2 == 0:
        return 0.0, math.nan
    # (se2² / (a²/(n_b-1) + b²/(n_n-1)), written with the shares a/se2 and b/se2: the squares of a tiny spread
    # underflow to 0, the shares do not)
    fa, fb = a / se2, b / se2
    return se2, 1 / (fa * fa / (base.n - 1) + fb * fb / (new.n - 1))


def significant(base: Stats, new: Stats, significance: str = DEFAULT_SIGNIFICANCE, mean: str = "amean") -> bool | None:
    """Whether the means differ, by ``significance`` (see the module docstring); None with too few runs.
    ``mean`` ("amean"/"hmean") is the row's mean, which the ci-overlap rule compares (as mmtests does)."""
    if base.n < MIN_REPEATS or new.n < MIN_REPEATS:
        return None
    if significance == "ci-overlap":
        if mean == "hmean" and (base.hmean is None or new.hmean is None):
            mean = "amean"
        diff = abs(new.mean_of(mean) - base.mean_of(mean))
        width = Z_975 * (base.stddev_of(mean) + new.stddev_of(mean))
        return diff > width if width else diff > 1  # mmtests' cidiff: the bare difference when both σ are 0
    diff = abs(new.amean - base.amean)
    se2, dof = _welch(base, new)
    if se2 == 0:
        return diff > 0
    return t_two_sided_p(diff / math.sqrt(se2), dof) < ALPHA


def t_upper_p(t: float, dof: float) -> float:
    """Student's one-sided p of ``t``: P(T > t) at ``dof`` degrees of freedom."""
    half = t_two_sided_p(t, dof) / 2
    return half if t > 0 else 1 - half


def equivalence_p(base: Stats, new: Stats, margin: float) -> float | None:
    """The p of Welch's two one-sided tests (TOST) that ``new.amean - base.amean`` lies inside
    (-``margin``, ``margin``): the larger of the two one-sided p, so equivalence at level α is p < α. None with
    too few runs; with no spread on either side 0.0 when |Δ| < margin or Δ is 0, else 1.0 (the module
    docstring)."""
    if base.n < MIN_REPEATS or new.n < MIN_REPEATS:
        return None
    if margin < 0 or not math.isfinite(margin):
        raise ValueError(f"equivalence_p: the margin must be a finite number >= 0, got {margin!r}")
    diff = new.amean - base.amean
    se2, dof = _welch(base, new)
    if se2 == 0:
        return 0.0 if abs(diff) < margin or diff == 0 else 1.0
    se = math.sqrt(se2)
    above = t_upper_p((diff + margin) / se, dof)  # H0: diff <= -margin
    below = t_upper_p((margin - diff) / se, dof)  # H0: diff >= margin
    return max(above, below)


def equivalence_margin(base: Stats, pct: float, significance: str = DEFAULT_SIGNIFICANCE, mean: str = "amean") -> float:
    """The margin ±m of :func:`equivalent`: ``pct`` percent of the baseline's mean, the Amean under ``welch``
    (the mean its test compares), the row's ``mean`` under ``ci-overlap``."""
    if significance == "ci-overlap" and not (mean == "hmean" and base.hmean is None):
        return abs(base.mean_of(mean)) * pct / 100
    return abs(base.amean) * pct / 100


def equivalent(
    base: Stats, new: Stats, pct: float, significance: str = DEFAULT_SIGNIFICANCE, mean: str = "amean"
) -> bool | None:
    """Whether the two sides are shown the same within ±``pct`` percent of the baseline's mean, by ``significance``'s
    equivalence test (the module docstring: TOST with Welch's t at :data:`ALPHA` for ``welch``, the widened
    interval for ``ci-overlap``); None with too few runs."""
    if base.n < MIN_REPEATS or new.n < MIN_REPEATS:
        return None
    margin = equivalence_margin(base, pct, significance, mean)
    if significance == "ci-overlap":
        if mean == "hmean" and (base.hmean is None or new.hmean is None):
            mean = "amean"
        diff = abs(new.mean_of(mean) - base.mean_of(mean))
        width = Z_975 * (base.stddev_of(mean) + new.stddev_of(mean))
        return diff + width < margin or (diff == 0 and width == 0)
    p = equivalence_p(base, new, margin)
    return p is not None and p < ALPHA


def welch_p(base: Stats, new: Stats) -> float | None:
    """Welch's two-sided p-value for the difference of the arithmetic means (what the ``welch`` rule tests);
    None with too few runs; 0.0 when both sides have no spread and differ, 1.0 when they are equal."""
    if base.n < MIN_REPEATS or new.n < MIN_REPEATS:
        return None
    diff = abs(new.amean - base.amean)
    se2, dof = _welch(base, new)
    if se2 == 0:
        return 0.0 if diff > 0 else 1.0
    return t_two_sided_p(diff / math.sqrt(se2), dof)


def mean_interval(s: Stats, level: float = 0.95) -> tuple[float, float] | None:
    """The two-sided ``level`` confidence interval of the arithmetic mean (t with n - 1 degrees of freedom);
    None with fewer than 2 runs."""
    if s.n < 2:
        return None
    half = t_quantile(s.n - 1, level) * s.stddev / math.sqrt(s.n) if s.stddev else 0.0
    return s.amean - half, s.amean + half


def welch_interval(base: Stats, new: Stats, level: float = 0.95) -> tuple[float, float] | None:
    """The two-sided ``level`` confidence interval of ``new.amean - base.amean`` with Welch's standard error
    and Welch–Satterthwaite degrees of freedom: the interval :func:`significant`'s ``welch`` rule tests (at
    level 0.95 it excludes 0 exactly when that rule calls the difference significant). None with too few runs."""
    if base.n < MIN_REPEATS or new.n < MIN_REPEATS:
        return None
    diff = new.amean - base.amean
    se2, dof = _welch(base, new)
    if se2 == 0:
        return diff, diff
    half = t_quantile(dof, level) * math.sqrt(se2)
    return diff - half, diff + half


# --- power ----------------------------------------------------------------------------------------------------


def z(p: float) -> float:
    return NormalDist().inv_cdf(p)


@dataclass(frozen=True)
class PowerEstimate:
    per_side: int | None  # runs per side for the chosen power; None: no difference to detect (Δ = 0), or none finite
    delta: float  # observed difference of the means (new - base)
    sd_base: float
    sd_new: float
    effect: float | None  # Δ / pooled sd (Cohen's d); None when both sds are 0

    def text(self) -> str:
        if self.per_side is None:
            return "no difference observed: no number of repeats would show one"
        return f"~{self.per_side} runs a side for {POWER:.0%} power at α={ALPHA:g}"


def _sd(v: list[float]) -> float:
    return stdev(v) if len(v) > 1 else 0.0


def repeats_needed(base: list[float], new: list[float], alpha: float = ALPHA, power: float = POWER) -> PowerEstimate:
    """Runs per side a difference as large as the observed one needs, given the observed spread (never fewer
    than :data:`MIN_REPEATS`, below which nothing is judged)."""
    if not base or not new:
        raise ValueError("repeats_needed: give at least one value a side")
    return power_of(Stats.of(base), Stats.of(new), alpha, power)


def power_of(base: Stats, new: Stats, alpha: float = ALPHA, power: float = POWER) -> PowerEstimate:
    """:func:`repeats_needed` from the two sides' summaries."""
    delta = new.amean - base.amean
    sb, sn = base.stddev, new.stddev
    pooled = math.sqrt((sb * sb + sn * sn) / 2)
    effect = delta / pooled if pooled > 0 else None
    if delta == 0:
        return PowerEstimate(None, delta, sb, sn, effect)
    factor = (z(1 - alpha / 2) + z(power)) ** 2
    n = factor * (sb * sb + sn * sn) / (delta * delta) if delta * delta > 0 else math.inf
    return PowerEstimate(max(MIN_REPEATS, math.ceil(n)) if math.isfinite(n) else None, delta, sb, sn, effect)


def repeats_for_equivalence(base: Stats, new: Stats, margin: float, alpha: float = ALPHA,
                            power: float = POWER) -> int | None:  # fmt: skip
    """Runs per side that showing the two sides the same within ±``margin`` (:func:`equivalence_p`) needs for
    ``power``, given the observed difference and spread (the module docstring; never fewer than
    :data:`MIN_REPEATS`); None where no number of runs would: the observed |Δ| is not inside the margin."""
    delta = abs(new.amean - base.amean)
    if margin <= delta:
        return None
    spread = base.stddev**2 + new.stddev**2
    if spread == 0:  # no spread: the difference is known, and inside the margin
        return MIN_REPEATS
    beta = z(power) if delta > 0 else z(1 - (1 - power) / 2)
    gap = (margin - delta) ** 2
    n = (z(1 - alpha) + beta) ** 2 * spread / gap if gap > 0 else math.inf
    return max(MIN_REPEATS, math.ceil(n)) if math.isfinite(n) else None


def ci_overlap_margin(base: list[float], new: list[float]) -> float | None:
    """|Δ| / (1.96·(σ_base + σ_new)): above 1 the CI-overlap rule calls it significant. None if both σ are 0.
    (1.96 rounded, as it always was here: the verdicts' ``ci_margin`` figures stay what they were.)"""
    spread = 1.96 * (_sd(base) + _sd(new))
    if spread == 0:
        return None
    return abs(fmean(new) - fmean(base)) / spread


# --- binomial sign tests --------------------------------------------------------------------------------------


def binom_cdf(c: int, n: int, p: float) -> float:
    """P(X <= c) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(c + 1))


def upper_share(count: int, n: int, confidence: float) -> float:
    """The upper end of the one-sided ``confidence`` Clopper-Pearson interval of a share seen ``count`` times in
    ``n``."""
    if count >= n:
        return 1.0
    lo, hi = count / n, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if binom_cdf(count, n, mid) > 1 - confidence else (lo, mid)
    return lo


def p_at_least(count: int, n: int, q: float) -> float:
    """P(X >= count) for X ~ Binomial(n, q): the one-sided p of a sign test that saw ``count`` of ``n``."""
    return 1.0 if count <= 0 else 1 - binom_cdf(count - 1, n, q)
