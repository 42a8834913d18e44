"""Does numalab see what a seed thread saw? Expected directions against measured verdicts.

Each expectation of a matrix spec (``expect:``, lab/matrix/spec_parts.py)
is checked in every comparison cell that has values for its metric. The
outcome names how the measured verdict stands to the expected direction:

* ``reproduced``: significant, in the expected direction (or, expecting
  ``same``, numalab's verdict is "same within ±X%": the equivalence test at the minimum effect shows it,
  lab.analysis.judgement);
* ``same direction, not significant``: the means moved the expected way but
  the runs could not tell it from noise;
* ``not reproduced``: not significant and the means moved the other way
  (or did not move); expecting ``same``, undecided (not significant is not the same);
* ``contradicted``: significant, against the expected direction;
* ``no data``: a side had no value for the metric (e.g. no hint faults).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lab.analysis.verdict import Verdict

# higher/lower: for a neutral metric (a mechanism counter, lab.analysis.metrics), which has no better or worse
DIRECTIONS = ("better", "worse", "same", "higher", "lower")

OUTCOMES = ("reproduced", "same direction, not significant", "not reproduced", "contradicted", "no data")


@dataclass(frozen=True)
class Expectation:
    """A seed's finding: ``metric`` went ``direction`` (better|worse|same) on the new side."""

    metric: str
    direction: str  # better | worse | same: the new side against the baseline (+ is better)
    seed: str = ""  # the seed's own figure, as text
    why: str = ""
    workloads: tuple[str, ...] = field(default_factory=tuple)  # only these workloads (empty: all)


@dataclass(frozen=True)
class Check:
    expectation: Expectation
    verdict: Verdict
    outcome: str

    def to_dict(self) -> dict:
        e = self.expectation
        return {"metric": e.metric, "expected": e.direction, "seed": e.seed, "why": e.why,
                "outcome": self.outcome, "verdict": self.verdict.to_dict()}  # fmt: skip


def outcome_of(expected: str, v: Verdict) -> str:
    if not v.n_base or not v.n_new or v.moved == "n/a":
        return "no data"
    if expected == "same":  # numalab's word decides (lab.analysis.judgement): "same" needs the equivalence test
        if v.direction in ("better", "worse", "changed"):
            return "contradicted"
        return "reproduced" if v.direction == "same" else "not reproduced"
    moved = v.moved  # from the means themselves: an all-zero baseline has a direction too
    if v.significant:
        return "reproduced" if moved == expected else "contradicted"
    return "same direction, not significant" if moved == expected else "not reproduced"


def check(expectation: Expectation, verdict: Verdict) -> Check:
    return Check(expectation, verdict, outcome_of(expectation.direction, verdict))
