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

from lab.analysis.compare import MIN_REPEATS, RULES
from lab.analysis.expectations import DIRECTIONS, Expectation
from lab.analysis.metrics import METRIC_KEYS, NEUTRAL
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


def _whole(value: object, where: str, low: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise LabError(f"{where}: must be a whole number >= {low}, got {value!r}")
    return value


def parse_auto(raw: object) -> AutoSpec:
    if raw is None:
        return AutoSpec()
    if not isinstance(raw, dict):
        raise LabError("auto: expected {min, max, decide, significance, budget_s, min_effect}")
    unknown = set(raw) - {"min", "max", "decide", "significance", "budget_s", "min_effect"}
    if unknown:
        raise LabError(f"auto.{sorted(unknown)[0]}: unknown field")
    lo = _whole(raw.get("min", MIN_REPEATS), "auto.min")
    hi = _whole(raw.get("max", max(8, lo)), "auto.max")
    if hi < lo:
        raise LabError(f"auto.max: must be >= auto.min ({lo}), got {hi}")
    decide = raw.get("decide", ["vmstat.numa_pages_migrated"])
    decide = [decide] if isinstance(decide, str) else decide
    if not isinstance(decide, list) or not decide:
        raise LabError("auto.decide: expected a list of metric names")
    for i, key in enumerate(decide):
        if key not in METRIC_KEYS:
            raise LabError(f"auto.decide[{i}]: unknown metric {key!r} (known: {', '.join(METRIC_KEYS)})")
    rule = raw.get("significance", "welch")
    if rule not in RULES:
        raise LabError(f"auto.significance: expected one of {', '.join(RULES)}, got {rule!r}")
    budget = raw.get("budget_s")
    if budget is not None and (not isinstance(budget, (int, float)) or isinstance(budget, bool) or budget <= 0):
        raise LabError(f"auto.budget_s: must be a number of seconds > 0, got {budget!r}")
    effect = raw.get("min_effect")
    effect = None if effect is None else parse_pct(effect, "auto.min_effect")
    return AutoSpec(lo, hi, tuple(dict.fromkeys(decide)), rule, float(budget) if budget else None, effect)


def parse_expect(raw: object, workloads: list[str]) -> list[Expectation]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise LabError("expect: expected a list of {metric, direction, seed, why, workloads}")
    out = []
    for i, e in enumerate(raw):
        if not isinstance(e, dict) or "metric" not in e or "direction" not in e:
            raise LabError(f"expect[{i}]: expected {{metric, direction, seed, why, workloads}}")
        unknown = set(e) - {"metric", "direction", "seed", "why", "workloads"}
        if unknown:
            raise LabError(f"expect[{i}].{sorted(unknown)[0]}: unknown field")
        if e["metric"] not in METRIC_KEYS:
            raise LabError(f"expect[{i}].metric: unknown metric {e['metric']!r} (known: {', '.join(METRIC_KEYS)})")
        if e["direction"] not in DIRECTIONS:
            raise LabError(f"expect[{i}].direction: expected one of {', '.join(DIRECTIONS)}, got {e['direction']!r}")
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
