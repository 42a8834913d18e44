"""How many repeats a metric would need, from the variance the runs showed (a power estimate).

For a two-sided test of the difference of two means at level α with power
1-β, each side needs about

    n = (z_{1-α/2} + z_{1-β})² · (s_base² + s_new²) / Δ²

runs (the normal approximation of Welch's test; Δ the observed difference of
the means, s the observed standard deviations). With α = 0.05 and 80 % power
the factor is (1.96 + 0.84)² ≈ 7.85. The estimate is only as good as the
variance it is computed from: with 3 runs a side it can be off by a factor
of two either way, which is why ``--repeat auto`` recomputes it after every
pair.

A rule that compares Δ with the standard deviations themselves (mmtests'
CI-overlap rule, |Δ| > 1.96·(σ_base + σ_new)) does not get easier with more
runs: more runs only measure σ better. :func:`ci_overlap_margin` says how
far a metric is from passing that rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist, fmean, stdev

ALPHA = 0.05
POWER = 0.8
MIN_SIDE = 3  # compare.MIN_REPEATS: fewer runs a side are never judged


def z(p: float) -> float:
    return NormalDist().inv_cdf(p)


@dataclass(frozen=True)
class PowerEstimate:
    per_side: int | None  # runs per side for the chosen power; None: no difference to detect (Δ = 0)
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
    """Runs per side a difference as large as the observed one needs, given the observed spread."""
    if not base or not new:
        raise ValueError("repeats_needed: give at least one value a side")
    delta = fmean(new) - fmean(base)
    sb, sn = _sd(base), _sd(new)
    pooled = math.sqrt((sb * sb + sn * sn) / 2)
    effect = delta / pooled if pooled > 0 else None
    if delta == 0:
        return PowerEstimate(None, delta, sb, sn, effect)
    factor = (z(1 - alpha / 2) + z(power)) ** 2
    n = factor * (sb * sb + sn * sn) / (delta * delta)
    return PowerEstimate(max(MIN_SIDE, math.ceil(n)), delta, sb, sn, effect)


def ci_overlap_margin(base: list[float], new: list[float]) -> float | None:
    """|Δ| / (1.96·(σ_base + σ_new)): above 1 the CI-overlap rule calls it significant. None if both σ are 0."""
    spread = 1.96 * (_sd(base) + _sd(new))
    if spread == 0:
        return None
    return abs(fmean(new) - fmean(base)) / spread
