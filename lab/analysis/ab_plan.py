"""The A/B plan: what an A/B comparison decides on and what it may spend, defined once.

``numalab run --repeat auto``, ``numalab ab``, ``numalab bisect`` and a matrix's ``repeats: auto`` each build
one :class:`ABPlan` (from their options, or the spec's ``auto:``) and hand it on; the names are the same
everywhere, the command line's with dashes (``--min-pairs``), the matrix spec's and the library's with
underscores (``auto: {min_pairs: 3}``, ``ABPlan(min_pairs=3)``)::

    decide        the metrics that decide (default: "workload", the workload's own figure,
                  lab.analysis.verdict.workload_figure); a mechanism counter decides as "changed"
    min_pairs     A B pairs before the first look (default 3: fewer are never judged)
    max_pairs     at most this many pairs, then no verdict (default 8)
    time_budget   wall seconds (default none)
    significance  the significance rule: welch (default) or ci-overlap (lab.analysis.stats)
    min_effect    percent of the baseline's mean: a significant difference below it is not better or
                  worse, and the margin of the equivalence test that alone says "same within ±X%"
                  (default none: each metric's own, else lab.min_effect.DEFAULT_PCT)

:meth:`ABPlan.check` is the one check, with one-line errors naming the field as its caller spells it
(``--max-pairs``, ``auto.max_pairs``). ``tests/unit/test_ab_plan.py`` reads the names and defaults of every
command's parser and of the matrix spec from the code and checks them against this class.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields

from lab.analysis.stats import DEFAULT_SIGNIFICANCE, MIN_REPEATS, SIGNIFICANCES
from lab.errors import LabError
from lab.min_effect import parse_pct

# The default of ``decide``: the workload's own figure, resolved per workload by
# lab.analysis.verdict.resolve_decide. Not a mechanism counter (pages migrated says how much balancing did,
# not how well the workload ran: it is neutral and can only say "changed").
WORKLOAD_FIGURE = "workload"
DEFAULT_MAX_PAIRS = 8
MAX_PAIRS = 1000  # max_pairs at most (as numalab run --repeat N: lab.run.options.MAX_REPEAT)


def option_name(name: str) -> str:
    """A field as the command line spells it: min_pairs -> --min-pairs."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class ABPlan:
    decide: tuple[str, ...] = (WORKLOAD_FIGURE,)
    min_pairs: int = MIN_REPEATS
    max_pairs: int = DEFAULT_MAX_PAIRS
    time_budget: float | None = None  # seconds
    significance: str = DEFAULT_SIGNIFICANCE
    min_effect: float | None = None  # percent (lab.min_effect); None: each metric's own, else the default

    def __post_init__(self) -> None:
        """``decide`` as given (one name, a list or a tuple) made a tuple, each name once."""
        decide = self.decide
        if isinstance(decide, str):
            object.__setattr__(self, "decide", (decide,))
        elif isinstance(decide, (list, tuple)):
            object.__setattr__(self, "decide", tuple(dict.fromkeys(decide)))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The fields, in order: the names every command and the matrix spec take."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def of(cls, **given: object) -> ABPlan:
        """A plan from what was given, None (an option not given, a key left out) meaning the default. Not
        checked: :meth:`check` it."""
        unknown = sorted(set(given) - set(cls.names()))
        if unknown:
            raise LabError(f"{unknown[0]}: not a field of the A/B plan (one of {', '.join(cls.names())})")
        return cls(**{k: v for k, v in given.items() if v is not None})  # type: ignore[arg-type]

    def check(self, name: Callable[[str], str] = option_name, least: int = 1) -> ABPlan:
        """The plan itself, or a one-line LabError naming the field by ``name`` (the command line's spelling by
        default; the matrix's is ``auto.FIELD``). ``least``: the fewest ``min_pairs`` the caller can judge
        (bisect's step rule needs 3). Which metrics exist is the caller's to check: it knows the workload."""
        decide = self.decide
        if not isinstance(decide, tuple) or not decide or not all(isinstance(d, str) and d for d in decide):
            raise LabError(f"{name('decide')}: expected one or more metric names, got {decide!r}")
        for f in ("min_pairs", "max_pairs"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int):
                raise LabError(f"{name(f)}: expected a whole number, got {v!r}")
        if not 1 <= self.max_pairs <= MAX_PAIRS:  # (each pair is two VM runs: 100,000 is weeks)
            raise LabError(f"{name('max_pairs')}: must be 1..{MAX_PAIRS}, got {self.max_pairs}")
        if not least <= self.min_pairs <= self.max_pairs:
            raise LabError(f"{name('min_pairs')}: must be between {least} and {name('max_pairs')} "
                           f"({self.max_pairs}), got {self.min_pairs}")  # fmt: skip
        budget = self.time_budget
        number = isinstance(budget, (int, float)) and not isinstance(budget, bool)
        if budget is not None and not (number and math.isfinite(budget) and budget > 0):
            shown = f"{budget:g}" if number else repr(budget)
            raise LabError(f"{name('time_budget')}: must be > 0 seconds, got {shown}")
        if self.significance not in SIGNIFICANCES:
            raise LabError(f"{name('significance')}: {self.significance!r} is not one of {', '.join(SIGNIFICANCES)}")
        if self.min_effect is not None:
            parse_pct(self.min_effect, name("min_effect"))
        return self

    def to_dict(self) -> dict:
        return asdict(self) | {"decide": list(self.decide)}
