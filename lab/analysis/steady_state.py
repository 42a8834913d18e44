"""Whether a run measured NUMA balancing's start-up or its steady state, from its pages migrated over time.

NUMA balancing migrates most while it finds where memory belongs, then little: seed 000's numa01 ran minutes
and migrated about 9 pages a GB of work, where numalab's 5-15 s runs migrate tens of thousands (issue 66). A
throughput figure from a run that is still migrating measures what the start-up costs, not what balancing buys
once settled. The record's ``metrics.balancing_phase`` splits the workload into thirds and gives each third's
pages migrated a second (``/proc/vmstat``'s ``numa_pages_migrated``, sampled each second, linearly between
samples): **settled** where the last third migrated at most :data:`SETTLED_FRACTION` of the busiest earlier third
(or at most :data:`QUIET_PAGES_PER_S` pages a second), **migrating** where it migrated more (still finding places,
or moving pages back and forth), **none** where no page moved (balancing off, or nothing misplaced). A verdict on
a throughput or time row says how many of its runs were still migrating (:func:`phase_words`), so the row does
not pass for a steady-state answer; the kernel's own scan knobs (``--kernel-default-knobs``) and a longer
``--duration`` are how a run gets to the steady state.
"""

from __future__ import annotations

SETTLED_FRACTION = 0.25
QUIET_PAGES_PER_S = 10.0  # 40 KiB a second: a last third this quiet is settled, whatever came before
RULE = (f"settled: the last third of the workload migrated at most {SETTLED_FRACTION:.0%} of the pages a second of "
        f"the busiest earlier third, or at most {QUIET_PAGES_PER_S:g} pages a second")  # fmt: skip


def _at(t: list[float], y: list[float], x: float) -> float:
    """The cumulative count at time ``x``, linear between samples, held past the ends."""
    if x <= t[0]:
        return y[0]
    for i in range(1, len(t)):
        if x <= t[i]:
            span = t[i] - t[i - 1]
            return y[i - 1] + (y[i] - y[i - 1]) * ((x - t[i - 1]) / span if span > 0 else 1.0)
    return y[-1]


def balancing_phase(series: dict | None, duration_s: float | None) -> dict | None:
    """``{"state": settled|migrating|none, "pages_per_s": [first, middle, last third], "third_s", "rule"}`` from a
    run's ``vmstat_series`` (seconds from the workload's start, cumulative pages migrated) and its workload's
    length; None where the run has neither, or too few samples to split (fewer than 4, or under 3 s)."""
    if not isinstance(series, dict) or not duration_s or duration_s < 3:
        return None
    t, pages = series.get("t"), series.get("numa_pages_migrated")
    if not isinstance(t, list) or not isinstance(pages, list) or len(t) != len(pages) or len(t) < 4:
        return None
    if not all(isinstance(v, (int, float)) for v in (*t, *pages)):
        return None
    third = duration_s / 3
    marks = [_at(t, pages, third * i) for i in range(4)]
    rates = [round((marks[i + 1] - marks[i]) / third, 1) for i in range(3)]
    if marks[3] - marks[0] <= 0:
        state = "none"
    elif rates[2] <= max(SETTLED_FRACTION * max(rates[0], rates[1]), QUIET_PAGES_PER_S):
        state = "settled"
    else:
        state = "migrating"
    return {"state": state, "pages_per_s": rates, "third_s": round(third, 2), "rule": RULE}


def phase_of(manifest: dict) -> str | None:
    """A record's phase (its own ``balancing_phase``, else read from its series: records made before)."""
    metrics = manifest.get("metrics") if isinstance(manifest, dict) else None
    if not isinstance(metrics, dict):
        return None
    phase = metrics.get("balancing_phase")
    if not isinstance(phase, dict):
        workload = manifest.get("workload") if isinstance(manifest.get("workload"), dict) else {}
        phase = balancing_phase(metrics.get("vmstat_series"), workload.get("duration_s"))
    return phase.get("state") if isinstance(phase, dict) else None


def phase_words(manifests: list[dict]) -> str:
    """The words a throughput row's verdict carries where runs were still migrating at their end: "2 of 3 runs
    still migrating pages in their last third (NUMA balancing's start-up, not its steady state)"; "" where none
    was."""
    states = [phase_of(m) for m in manifests]
    moving = sum(s == "migrating" for s in states)
    if not moving:
        return ""
    return (f"{moving} of {len(states)} runs still migrating pages in their last third (NUMA balancing's start-up, "
            "not its steady state)")  # fmt: skip
