"""The ``repeats: auto`` and ``expect:`` parts of a matrix spec.

::

    repeats: auto
    auto: {min: 3, max: 8, decide: [vmstat.hint_local_pct], significance: welch, budget_s: 3600, min_effect: 1%}
    expect:                      # what the seed thread found, read by `numalab reproduce`
      - metric: vmstat.hint_local_pct
        direction: worse         # the non-baseline side against the baseline (+ is better)
        seed: "52.18% -> 99.30% with the patch"   # the seed's figure, as text for the report
        why: the revert removes the allowance, so pairs are pulled apart again

With ``repeats: auto`` the matrix starts with ``min`` repeats of every run,
then adds one more repeat of every kernel (or setting) of a comparison whose
``decide`` metrics are not all decided, until they are or ``max``
repeats or ``budget_s`` seconds are spent (``lab/matrix/auto_cells.py``).
A metric is decided when it is significant, or significant but smaller than
``min_effect`` of the baseline (then "same"; lab.min_effect: the default 1%,
or a workload file's metric's own, unless ``min_effect`` or ``numalab matrix
run --min-effect`` says otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.analysis.expectations import Expectation
from lab.analysis.metrics import METRIC_KEYS, NEUTRAL
from lab.analysis.stats import MIN_REPEATS
from lab.errors import LabError
from lab.min_effect import parse_pct


@dataclass(frozen=True)
class AutoSpec:
    min_pairs: int = MIN_REPEATS
    max_pairs: int = 8
    decide: tuple[str, ...] = ("vmstat.numa_pages_migrated",)
    significance: str = "welch"
    budget_s: float | None = None
    min_effect: float | None = None  # percent (lab.min_effect); None: each metric's own, else the default


def parse_auto(raw: dict | None) -> AutoSpec:
    """``auto:`` (the matrix schema has checked its fields' types and ranges, and the significance rule)."""
    if raw is None:
        return AutoSpec()
    lo = raw.get("min", MIN_REPEATS)
    hi = raw.get("max", max(8, lo))
    if hi < lo:
        raise LabError(f"auto.max: must be >= auto.min ({lo}), got {hi}")
    decide = raw.get("decide", ["vmstat.numa_pages_migrated"])
    decide = [decide] if isinstance(decide, str) else decide
    for i, key in enumerate(decide):
        if key not in METRIC_KEYS:
            raise LabError(f"auto.decide[{i}]: unknown metric {key!r} (known: {', '.join(METRIC_KEYS)})")
    rule = raw.get("significance", "welch")
    budget = raw.get("budget_s")
    effect = raw.get("min_effect")
    effect = None if effect is None else parse_pct(effect, "auto.min_effect")
    return AutoSpec(lo, hi, tuple(dict.fromkeys(decide)), rule, float(budget) if budget else None, effect)


def parse_expect(raw: list[dict] | None, workloads: list[str]) -> list[Expectation]:
    """``expect:`` (the matrix schema has checked each entry's fields, the direction one of DIRECTIONS)."""
    out = []
    for i, e in enumerate(raw or []):
        if e["metric"] not in METRIC_KEYS:
            raise LabError(f"expect[{i}].metric: unknown metric {e['metric']!r} (known: {', '.join(METRIC_KEYS)})")
        neutral = METRIC_KEYS[e["metric"]].better == NEUTRAL
        if e["direction"] != "same" and (e["direction"] in ("higher", "lower")) != neutral:
            want = "higher, lower or same (a mechanism counter has no better)" if neutral else "better, worse or same"
            raise LabError(f"expect[{i}].direction: {e['metric']} takes {want}, got {e['direction']!r}")
        wl = e.get("workloads") or []
        wl = [wl] if isinstance(wl, str) else wl
        for w in wl:
            if w not in workloads:
                raise LabError(f"expect[{i}].workloads: {w!r} is not one of the matrix's workloads")
        out.append(Expectation(e["metric"], e["direction"], str(e.get("seed", "")), str(e.get("why", "")),
                               tuple(wl)))  # fmt: skip
    return out
