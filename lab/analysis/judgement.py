"""The verdict word: what numalab calls one metric's A/B difference, decided in one place (:func:`judge`).

Every verdict numalab prints or writes (compare's tables and JSON, the report, the finding, the verdict lines
of ``run --repeat auto``, ``ab``, ``bisect`` and a matrix's ``repeats: auto``, the reproduction reports) takes
its word from :func:`judge`, through :class:`lab.analysis.compare.Row` and :class:`lab.analysis.verdict.Verdict`;
the renderers render :attr:`Judgement.word` and :attr:`Judgement.text` and decide nothing. The words:

* ``better`` / ``worse``: significant by the rule (:func:`lab.analysis.stats.significant`) and at least the
  minimum effect (:mod:`lab.min_effect`) by the row's mean, in the metric's better or worse direction;
* ``changed``: the same on a neutral metric (a mechanism counter, which has no better);
* ``same within ±1%``: the equivalence test at the minimum effect shows it
  (:func:`lab.analysis.stats.equivalent`: Welch's two one-sided tests at α = 0.05, or the ci-overlap rule's
  own), significant or not;
* ``undecided (3+3 runs; ~24 a side needed)``: neither: not significant (or significant but below the minimum
  effect) and not shown the same. It says the runs it had and, where the spread gives it, about how many a side
  a decision would need (:func:`lab.analysis.stats.power_of` for a difference at least the minimum effect,
  :func:`lab.analysis.stats.repeats_for_equivalence` for one inside it; "a few more a side may decide it" where
  that normal approximation says no more than it has, as it can at 3 runs a side, where Student's t is wider);
* ``not judged (fewer than 3 runs a side)``: the word ``unknown``.

"Not significant" is never called the same: 0 against 35,082 pages migrated over 3 runs a side is undecided.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.analysis.metrics import NEUTRAL
from lab.analysis.stats import (
    ALPHA,
    DEFAULT_SIGNIFICANCE,
    MIN_REPEATS,
    Stats,
    equivalence_margin,
    equivalence_p,
    equivalent,
    power_of,
    repeats_for_equivalence,
)
from lab.min_effect import below
from lab.min_effect import text as effect_text

WORDS = ("better", "worse", "changed", "same", "undecided", "unknown")
DECIDED = ("better", "worse", "changed", "same")  # what stops --repeat auto


def pct_better(base: float, new: float, better: str) -> float | None:
    """Signed % change, + meaning better (for a neutral metric: + meaning more)."""
    if base == 0:
        return 0.0 if new == 0 else None
    change = (new - base) * 100 / abs(base)
    return -change if better == "lower" else change


def moved(base: float, new: float, better: str) -> str:
    """Which way the means moved, significant or not: 'better', 'worse' or 'unchanged' (equal means), from the
    sign of the change itself (so an all-zero baseline, whose %diff is n/a, still has a direction); a neutral
    metric's is 'higher' or 'lower'. A description of the means, not a verdict (that is :func:`judge`'s)."""
    if new == base:
        return "unchanged"
    if better == NEUTRAL:
        return "higher" if new > base else "lower"
    return "better" if (new > base) == (better == "higher") else "worse"


def same_text(pct: float) -> str:
    """The words of a "same" verdict: 'same within ±1%'."""
    return f"same within ±{effect_text(pct)}"


def equivalence_test_text(significance: str) -> str:
    """How the significance rule ``significance`` shows two sides the same (lab.analysis.stats.equivalent), in a
    few words."""
    if significance == "ci-overlap":
        return "|Δmean| + 1.96·(σ_base + σ_new) inside the margin"
    return f"two one-sided Welch t-tests (TOST), α = {ALPHA:g}"


@dataclass(frozen=True)
class Judgement:
    """One metric's verdict: its word and what the word rests on."""

    word: str  # one of WORDS
    n_base: int
    n_new: int
    min_effect: float  # percent: the margin of "same", the least difference "better" or "worse" takes
    significance: str = DEFAULT_SIGNIFICANCE  # the significance rule (lab.analysis.stats)
    equivalent: bool | None = None  # by the rule's equivalence test; None: not judged
    equivalence_p: float | None = None  # Welch's TOST p, whatever the rule (None: not judged)
    margin: float | None = None  # the margin ±m in the metric's units (None: not judged)
    needed: int | None = None  # runs a side a decision would need, from the observed spread (None: no estimate)
    below_effect: bool = False  # significant, but smaller than the minimum effect by the row's mean

    @property
    def decided(self) -> bool:
        """Better, worse, changed or the same: a decision (``--repeat auto`` stops)."""
        return self.word in DECIDED

    @property
    def text(self) -> str:
        """The verdict in words, as every rendering shows it: 'better', 'changed', 'same within ±1%',
        'undecided (3+3 runs; ~24 a side needed)', 'not judged (fewer than 3 runs a side)'."""
        if self.word == "same":
            return same_text(self.min_effect)
        if self.word == "unknown":
            return f"not judged (fewer than {MIN_REPEATS} runs a side)"
        if self.word == "undecided":
            pct = effect_text(self.min_effect)
            why = f"significant but below {pct}, not shown within ±{pct}; " if self.below_effect else ""
            need = ""
            if self.needed is not None and self.needed > min(self.n_base, self.n_new):
                need = f"; ~{self.needed} a side needed"
            elif self.needed is not None:  # (the normal approximation is short of Student's t at a few runs)
                need = "; a few more a side may decide it"
            return f"undecided ({why}{self.n_base}+{self.n_new} runs{need})"
        return self.word

    def to_dict(self) -> dict:
        """The equivalence test behind it, for the JSON."""
        return {
            "test": "tost-welch" if self.significance != "ci-overlap" else "ci-overlap",
            "alpha": ALPHA,
            "margin_pct": self.min_effect,
            "margin": self.margin,
            "p_value": self.equivalence_p,
            "equivalent": self.equivalent,
        }


def judge(
    better: str,
    base: Stats,
    new: Stats,
    significant: bool | None,
    significance: str = DEFAULT_SIGNIFICANCE,
    min_effect: float = 1.0,
    mean: str = "amean",
) -> Judgement:
    """The verdict on a metric whose ``better`` is "higher", "lower" or "neutral", from each side's runs,
    ``significant`` by the significance rule ``significance`` (None: too few runs), the minimum effect in percent
    (the margin of "same") and the row's ``mean`` ("amean" or "hmean", as :class:`lab.analysis.compare.Row` names
    it). The module docstring has the words."""
    if significant is None or min(base.n, new.n) < MIN_REPEATS:
        return Judgement("unknown", base.n, new.n, min_effect, significance)
    mb, mn = base.mean_of(mean), new.mean_of(mean)
    small = bool(significant) and below(pct_better(mb, mn, better), min_effect)
    same = bool(equivalent(base, new, min_effect, significance, mean))
    margin = equivalence_margin(base, min_effect)  # (the Welch test's: what equivalence_p and the estimates use)
    p = equivalence_p(base, new, margin)
    direction = "changed" if better == NEUTRAL else moved(mb, mn, better)
    if significant and not small and direction != "unchanged":
        word = direction
    elif same:
        word = "same"
    else:
        word = "undecided"
    inside = abs(new.amean - base.amean) < margin
    needed = repeats_for_equivalence(base, new, margin) if inside else power_of(base, new).per_side
    shown_margin = equivalence_margin(base, min_effect, significance, mean)
    return Judgement(word, base.n, new.n, min_effect, significance, same, p, shown_margin, needed, small)
