"""The minimum effect: the least share of the baseline's central value a difference must have to be called
better or worse, and the margin within which two sides can be shown the same, by every verdict numalab gives
(compare, ``run --repeat auto``, the matrix's ``repeats: auto``, bisect's steps; lab.analysis.judgement decides
the word, lab.bisect.step_rule a step's).

Significance says a difference is real; under ``--clock virtual`` runs repeat so closely (CoeffVar under
0.5%) that a 0.15% difference is significant after 3 pairs. The minimum effect says whether it is large
enough to count: a significant difference smaller than it is not better or worse, and "same within ±1%" is
said only where an equivalence test at this margin shows it (lab.analysis.stats.equivalent); otherwise the
verdict is undecided. :data:`DEFAULT_PCT` (1%) is about what the virtual clock's repeats spread over (within 2%,
docs/qemu.md) and below any change a scheduler patch is judged by; under the host clock, whose runs spread
over several percent, Welch's test rarely calls a difference under 1% significant in the first place, so the
default changes few verdicts there.

Where it comes from, most specific last: :data:`DEFAULT_PCT`; a user workload file's ``min_effect:`` on a
metric; the command line's ``--min-effect PCT`` (or a matrix's ``auto.min_effect``), which applies to every
metric the command judges (0 turns it off).
"""

from __future__ import annotations

import math

from lab.errors import LabError

DEFAULT_PCT = 1.0
MAX_PCT = 1000.0  # a bigger share than any %diff numalab shows as a percentage (compare.PCT_SHOWN_MAX)


def parse_pct(value: object, where: str) -> float:
    """A minimum effect as given: a number of percent (2, 0.5) or a text with a % sign ("2%"); 0 to
    :data:`MAX_PCT`. One-line errors naming ``where`` (the option or the field)."""
    number: object = value
    if isinstance(value, str):
        text = value.strip().removesuffix("%").strip()
        try:
            number = float(text)
        except ValueError:
            number = None
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number):
        raise LabError(f"{where}: expected a percentage such as 2% or 0.5, got {value!r}")
    if not 0 <= number <= MAX_PCT:
        raise LabError(f"{where}: must be between 0% and {MAX_PCT:g}%, got {value!r}")
    return float(number)


def effective(override: float | None, declared: float | None) -> float:
    """The minimum effect a metric is judged by: the command line's ``override`` if given, else the metric's
    own ``declared`` one (a workload file's), else :data:`DEFAULT_PCT`."""
    if override is not None:
        return override
    return declared if declared is not None else DEFAULT_PCT


def below(pct_diff: float | None, pct: float) -> bool:
    """Whether a %diff (of the baseline's central value, either sign) is smaller than the minimum effect
    ``pct``. A %diff that cannot be had (a baseline of 0: None) is never below: any change from 0 counts."""
    return pct_diff is not None and pct > 0 and abs(pct_diff) < pct


def text(pct: float) -> str:
    """'1%', '0.5%', '2.25%'."""
    return f"{pct:g}%"
