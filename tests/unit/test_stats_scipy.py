"""numalab's own Student-t and sign-test code against scipy's (hypothesis picks the inputs).

lab.analysis.stats computes Welch's test, its t quantiles and confidence intervals, the equivalence test (two
one-sided Welch tests, TOST), and the binomial sign tests and Clopper-Pearson bound of bisect's step rule, in
plain Python (the package does not depend on scipy);
here scipy, a dev dependency, is the reference."""

from __future__ import annotations

import math
import warnings
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from lab.analysis.stats import (
    Stats,
    binom_cdf,
    equivalence_margin,
    equivalence_p,
    equivalent,
    p_at_least,
    repeats_for_equivalence,
    significant,
    t_quantile,
    t_two_sided_p,
    t_upper_p,
    upper_share,
    welch_interval,
)

SETTINGS = settings(max_examples=200, deadline=timedelta(seconds=5), suppress_health_check=[HealthCheck.too_slow])

t_values = st.floats(min_value=-60, max_value=60, allow_nan=False)
dofs = st.floats(min_value=1.0, max_value=500.0, allow_nan=False)
samples = st.lists(st.floats(min_value=-1e3, max_value=1e3, allow_nan=False), min_size=3, max_size=12)


@SETTINGS
@given(t_values, dofs)
def test_the_two_sided_p_is_scipys(t: float, dof: float) -> None:
    want = 2 * sps.t.sf(abs(t), dof)
    assert t_two_sided_p(t, dof) == pytest.approx(want, rel=1e-7, abs=1e-12)


@pytest.mark.parametrize("t", [1e-300, 1e-12, 1e-9, -1e-9, 5e-324])
@pytest.mark.parametrize("dof", [1.0, 2.5, 30.0])
def test_a_t_next_to_0_has_a_p_of_1(t: float, dof: float) -> None:
    """dof / (dof + t²) rounds to 1 for |t| below about 1e-8: the p is 1 (it raised ValueError: log(0))."""
    assert t_two_sided_p(t, dof) == pytest.approx(1.0, abs=1e-7)


@SETTINGS
@given(dofs, st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_the_t_quantile_is_scipys(dof: float, level: float) -> None:
    want = sps.t.ppf(1 - (1 - level) / 2, dof)
    assert t_quantile(dof, level) == pytest.approx(want, rel=1e-7)


@SETTINGS
@given(samples, samples)
def test_welchs_test_decides_as_scipys(base: list[float], new: list[float]) -> None:
    """The welch rule calls a difference significant exactly when scipy's Welch t-test has p < 0.05, and its
    interval is scipy's (numbers a hair from the 0.05 line aside)."""
    b, n = Stats.of(base), Stats.of(new)
    assume(b.stddev > 1e-6 or n.stddev > 1e-6)
    with warnings.catch_warnings():  # (scipy's own about nearly equal values: the assumptions cover them)
        warnings.simplefilter("ignore", RuntimeWarning)
        res = sps.ttest_ind(new, base, equal_var=False)
        ci = res.confidence_interval(0.95)
    assume(abs(res.pvalue - 0.05) > 1e-6)
    assert significant(b, n, "welch") == (res.pvalue < 0.05)
    lo, hi = welch_interval(b, n)
    scale = max(1.0, abs(ci.low), abs(ci.high))
    assert lo == pytest.approx(ci.low, abs=1e-6 * scale) and hi == pytest.approx(ci.high, abs=1e-6 * scale)


@SETTINGS
@given(st.integers(min_value=1, max_value=60), st.data(), st.floats(min_value=0.0, max_value=1.0))
def test_the_binomial_cdf_is_scipys(n: int, data, p: float) -> None:
    c = data.draw(st.integers(min_value=0, max_value=n))
    assert binom_cdf(c, n, p) == pytest.approx(sps.binom.cdf(c, n, p), rel=1e-9, abs=1e-12)


@SETTINGS
@given(st.integers(min_value=1, max_value=40), st.data(), st.sampled_from([0.8, 0.9, 0.95]))
def test_the_upper_share_is_clopper_pearsons(n: int, data, confidence: float) -> None:
    """The one-sided upper Clopper-Pearson bound: the beta quantile scipy gives."""
    count = data.draw(st.integers(min_value=0, max_value=n))
    want = 1.0 if count >= n else sps.beta.ppf(confidence, count + 1, n - count)
    assert upper_share(count, n, confidence) == pytest.approx(want, abs=1e-9)


@SETTINGS
@given(st.integers(min_value=1, max_value=40), st.data(), st.floats(min_value=0.01, max_value=0.99))
def test_the_sign_tests_tail_is_scipys(n: int, data, q: float) -> None:
    """p_like_bad and p_like_good's P(X >= g) for X ~ Binomial(n, q) (stats.p_at_least)."""
    g = data.draw(st.integers(min_value=1, max_value=n))
    assert p_at_least(g, n, q) == pytest.approx(sps.binom.sf(g - 1, n, q), abs=1e-9)


def test_stats_of_is_statistics_and_mmtests() -> None:
    values = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]
    s = Stats.of(values)
    assert s.amean == 5.0 and s.stddev == pytest.approx(math.sqrt(32 / 7))
    assert s.hmean == pytest.approx(sps.hmean(values))
    # mmtests' stddev of the harmonic mean: sqrt(sum((1/x - 1/H)^2) * H^4 / n)
    assert s.hstddev == pytest.approx(math.sqrt(sum((1 / v - 1 / s.hmean) ** 2 for v in values) * s.hmean**4 / 8))


@SETTINGS
@given(st.lists(st.floats(min_value=5e-324, max_value=1e300), min_size=1, max_size=10))
def test_stats_of_takes_any_positive_finite_values(values: list[float]) -> None:
    """A tiny rate (1e-200 GB/s from a broken guest) is a number like any other: 1/x² overflowed. (A harmonic
    mean that rounds to 0, beside a denormal, has no stddev.)"""
    s = Stats.of(values)
    assert s.hmean is not None and (s.hstddev is None) == (s.hmean == 0)
    assert s.hstddev is None or math.isfinite(s.hstddev)


# --- the equivalence test (issue 71) ----------------------------------------------------------------------------

margins = st.floats(min_value=0.0, max_value=2e3, allow_nan=False)


@SETTINGS
@given(t_values, dofs)
def test_the_one_sided_p_is_scipys(t: float, dof: float) -> None:
    assert t_upper_p(t, dof) == pytest.approx(sps.t.sf(t, dof), rel=1e-7, abs=1e-12)


def _scipy_tost(base: list[float], new: list[float], margin: float) -> float:
    """Welch's TOST by scipy: new - base > -margin and new - base < margin, the larger one-sided p."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lower = sps.ttest_ind([v + margin for v in new], base, equal_var=False, alternative="greater").pvalue
        upper = sps.ttest_ind([v - margin for v in new], base, equal_var=False, alternative="less").pvalue
    return max(lower, upper)


@SETTINGS
@given(samples, samples, margins)
def test_the_equivalence_p_is_scipys_two_one_sided_welch_tests(base: list[float], new: list[float],
                                                               margin: float) -> None:  # fmt: skip
    """equivalence_p is the larger p of scipy's two one-sided Welch t-tests against ±margin, and equivalence at
    α = 0.05 is the 90% Welch interval of the difference inside (-margin, margin)."""
    b, n = Stats.of(base), Stats.of(new)
    assume(b.stddev > 1e-6 or n.stddev > 1e-6)
    p = equivalence_p(b, n, margin)
    assert p is not None and math.isfinite(p) and 0.0 <= p <= 1.0
    assert p == pytest.approx(_scipy_tost(base, new, margin), rel=1e-6, abs=1e-9)
    assume(abs(p - 0.05) > 1e-6)
    lo, hi = welch_interval(b, n, 0.90)
    assert (p < 0.05) == (-margin < lo and hi < margin)
    if abs(b.amean) > 1e-3:  # equivalent() takes the margin as a share of the baseline's mean
        assert equivalent(b, n, margin * 100 / abs(b.amean)) == (p < 0.05)


def test_the_equivalence_test_by_hand() -> None:
    """Hand-computed: base 10, 11, 12 and new 10.5, 11.5, 12.5 (σ 1 each, Δ 0.5): the standard error is
    sqrt(2/3) = 0.8165 at 4 degrees of freedom; within ±2, t = (0.5 + 2)/0.8165 = 3.062 and
    (2 - 0.5)/0.8165 = 1.837, so p = P(T4 > 1.837) = 0.0701: not shown within ±2; within ±3, t = 3.062 and
    4.287, p = P(T4 > 3.062) = 0.0187: shown."""
    b, n = Stats.of([10.0, 11.0, 12.0]), Stats.of([10.5, 11.5, 12.5])
    assert equivalence_p(b, n, 2.0) == pytest.approx(0.0701, abs=5e-4)
    assert equivalence_p(b, n, 3.0) == pytest.approx(0.0187, abs=5e-4)
    assert equivalence_margin(b, 20.0) == pytest.approx(2.2)  # 20% of the baseline's Amean 11
    assert equivalent(b, n, 20.0) is False and equivalent(b, n, 30.0) is True
    # a margin of 0 shows nothing the same where there is spread; the p is that of the observed difference
    assert equivalence_p(b, n, 0.0) > 0.5


def test_the_equivalence_test_without_spread_and_with_too_few_runs() -> None:
    same = Stats.of([5.0, 5.0, 5.0])
    # identical constant samples: the difference is known to be 0, the same at any margin, 0 included
    assert equivalence_p(same, same, 0.0) == 0.0 == equivalence_p(same, same, 1.0)
    assert equivalent(same, same, 1.0) is True and equivalent(same, same, 0.0) is True
    assert equivalent(same, same, 1.0, "ci-overlap") is True
    zeros = Stats.of([0.0, 0.0, 0.0])
    assert equivalent(zeros, zeros, 1.0) is True  # 0 against 0: the same, though 1% of 0 is 0
    # no spread on either side, different values: inside the margin or not, exactly
    other = Stats.of([5.04, 5.04, 5.04])
    assert equivalence_p(same, other, 0.05) == 0.0 and equivalence_p(same, other, 0.04) == 1.0
    assert equivalent(same, other, 1.0) is True and equivalent(same, other, 0.5) is False
    # no spread on one side only: Welch's degrees of freedom are the other side's
    one = Stats.of([5.0, 5.1, 4.9])
    p = equivalence_p(same, one, 0.5)
    assert p is not None and math.isfinite(p) and p < 0.05
    # 0 against 35,082 pages migrated a run (1 to 105,243, 3 runs): a baseline of 0 has a margin of 0
    assert equivalent(zeros, Stats.of([1.0, 2.0, 105243.0]), 1.0) is False
    # n = 1 (or 2): not judged
    for few in (Stats.of([5.0]), Stats.of([5.0, 5.0])):
        assert equivalence_p(few, same, 1.0) is None and equivalence_p(same, few, 1.0) is None
        assert equivalent(few, same, 1.0) is None and equivalent(few, few, 1.0, "ci-overlap") is None
    with pytest.raises(ValueError):
        equivalence_p(same, one, -1.0)


def test_the_ci_overlap_rules_equivalence_is_its_interval_inside_the_margin() -> None:
    """|Δmean| + 1.96·(σ_base + σ_new) < margin (the rule's width, the other way): 100 ± 0.1 against 100.2 ±
    0.1 is 0.2 + 0.392 = 0.592 apart at most, inside ±1% (1.0), not inside ±0.5%."""
    b, n = Stats.of([99.9, 100.0, 100.1]), Stats.of([100.1, 100.2, 100.3])
    assert equivalent(b, n, 1.0, "ci-overlap") is True and equivalent(b, n, 0.5, "ci-overlap") is False
    # the row's mean: a rate's Hmean, its margin the baseline Hmean's share
    assert equivalence_margin(b, 1.0, "ci-overlap", "hmean") == pytest.approx(b.hmean / 100)


@SETTINGS
@given(samples, samples, margins, st.sampled_from(["welch", "ci-overlap"]))
def test_the_equivalence_test_never_says_nan(
    base: list[float], new: list[float], margin: float, significance: str
) -> None:
    b, n = Stats.of(base), Stats.of(new)
    p = equivalence_p(b, n, margin)
    assert p is not None and not math.isnan(p) and 0.0 <= p <= 1.0
    assert equivalent(b, n, 1.0, significance) in (True, False)
    need = repeats_for_equivalence(b, n, margin)
    assert need is None or (need >= 3 and isinstance(need, int))


def test_runs_for_equivalence_by_hand() -> None:
    """(z_0.95 + z_0.8)² · (σ_b² + σ_n²) / (m - |Δ|)²: σ 1 each, Δ 0.5, m 2: 6.183 · 2 / 2.25 = 5.5 -> 6;
    with Δ 0, z_0.9 for the 80% power of both tests: (1.645 + 1.282)² · 2 / 4 = 4.28 -> 5; none once |Δ| >= m."""
    b = Stats.of([10.0, 11.0, 12.0])
    assert repeats_for_equivalence(b, Stats.of([10.5, 11.5, 12.5]), 2.0) == 6
    assert repeats_for_equivalence(b, b, 2.0) == 5
    assert repeats_for_equivalence(b, Stats.of([12.0, 13.0, 14.0]), 2.0) is None
