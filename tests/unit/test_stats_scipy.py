"""numalab's own Student-t and sign-test code against scipy's (hypothesis picks the inputs).

lab.analysis.stats computes Welch's test, its t quantiles and confidence intervals, and the binomial sign tests
and Clopper-Pearson bound of bisect's step rule, in plain Python (the package does not depend on scipy);
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
    p_at_least,
    significant,
    t_quantile,
    t_two_sided_p,
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
