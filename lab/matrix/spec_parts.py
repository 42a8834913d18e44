"""The ``repeats: auto`` and ``expect:`` parts of a matrix spec.

::

    repeats: auto
    auto: {min_pairs: 3, max_pairs: 8, decide: [vmstat.hint_local_pct], significance: welch, time_budget: 3600,
           min_effect: 1%}
    expect:                      # what the seed thread found, read by `numalab reproduce`
      - metric: vmstat.hint_local_pct
        direction: worse         # the non-baseline side against the baseline (+ is better)
        seed: "52.18% -> 99.30% with the patch"   # the seed's figure, as text for the report
        why: the revert removes the allowance, so pairs are pulled apart again

``auto:`` is the A/B plan (lab.analysis.ab_plan.ABPlan), by the names numalab run's options have
(``--min-pairs`` is ``min_pairs``) and with the same defaults: ``decide`` the workload's own figure
("workload", resolved for each cell's workload), 3 to 8 pairs, no time budget, welch. The keys it had before
(``min``, ``max``, ``budget_s``) are still read, as aliases of ``min_pairs``, ``max_pairs`` and
``time_budget``, for one release.

With ``repeats: auto`` the matrix starts with ``min_pairs`` repeats of every run,
then adds one more repeat of every kernel (or setting) of a comparison whose
``decide`` metrics are not all decided, until they are or ``max_pairs``
repeats or ``time_budget`` seconds are spent (``lab/matrix/auto_cells.py``).
A metric is decided when it is significant by at least ``min_effect`` of the
baseline, or when the equivalence test shows it within ±``min_effect`` (then
"same within ±X%"; lab.analysis.judgement; lab.min_effect: the default 1%,
or a workload file's metric's own, unless ``min_effect`` or ``numalab matrix
run --min-effect`` says otherwise).
"""

from __future__ import annotations

from lab.analysis.ab_plan import WORKLOAD_FIGURE, ABPlan
from lab.analysis.expectations import Expectation
from lab.analysis.metrics import METRIC_KEYS, NEUTRAL
from lab.errors import LabError
from lab.min_effect import parse_pct

# The keys ``auto:`` had before it took the plan's names: read for one release (CHANGELOG, docs/matrix.md).
AUTO_ALIASES = {"min": "min_pairs", "max": "max_pairs", "budget_s": "time_budget"}


def parse_auto(raw: dict | None) -> ABPlan:
    """``auto:`` as the A/B plan, checked by its one check (the matrix schema has checked the fields' types);
    one-line errors name the key as the spec gave it (``auto.max`` or ``auto.max_pairs``)."""
    given: dict[str, object] = {}
    spelled: dict[str, str] = {}
    for key, value in (raw or {}).items():
        name = AUTO_ALIASES.get(key, key)
        if name in given:
            raise LabError(f"auto.{key}: the same as auto.{spelled[name]}; give one of them")
        given[name], spelled[name] = value, key
    decide = given.get("decide")
    for i, key in enumerate([decide] if isinstance(decide, str) else decide or []):
        if key != WORKLOAD_FIGURE and key not in METRIC_KEYS:
            raise LabError(f"auto.decide[{i}]: unknown metric {key!r} (known: {WORKLOAD_FIGURE}, the workload's "
                           f"own figure, or one of {', '.join(METRIC_KEYS)})")  # fmt: skip
    if given.get("min_effect") is not None:
        given["min_effect"] = parse_pct(given["min_effect"], f"auto.{spelled['min_effect']}")
    if given.get("time_budget") is not None:
        given["time_budget"] = float(given["time_budget"])  # type: ignore[arg-type]
    return ABPlan.of(**given).check(lambda name: f"auto.{spelled.get(name, name)}")


def parse_expect(raw: list[dict] | None, workloads: list[str]) -> list[Expectation]:
    """``expect:`` (the matrix schema has checked each entry's fields, the direction one of DIRECTIONS)."""
    out = []
    for i, e in enumerate(raw or []):
        if e["metric"] not in METRIC_KEYS:
            raise LabError(f"expect[{i}].metric: unknown metric {e['metric']!r} (known: {', '.join(METRIC_KEYS)})")
        neutral = METRIC_KEYS[e["metric"]].better == NEUTRAL
        if e["direction"] != "same" and (e["direction"] in ("higher", "lower")) != neutral:
            want = "higher, lower or same, as a mechanism counter has no better" if neutral else "better, worse or same"
            raise LabError(f"expect[{i}].direction: {e['metric']} takes {want}, got {e['direction']!r}")
        wl = e.get("workloads") or []
        wl = [wl] if isinstance(wl, str) else wl
        for w in wl:
            if w not in workloads:
                raise LabError(f"expect[{i}].workloads: {w!r} is not one of the matrix's workloads")
        out.append(Expectation(e["metric"], e["direction"], str(e.get("seed", "")), str(e.get("why", "")),
                               tuple(wl)))  # fmt: skip
    return out
