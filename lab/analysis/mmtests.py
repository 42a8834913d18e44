"""mmtests' derived NUMA rows, from /proc/vmstat deltas (see shared/seeds/README.md)."""

from __future__ import annotations

VMSTAT_NUMA_KEYS = (
    "numa_hit",
    "numa_miss",
    "numa_foreign",
    "numa_interleave",
    "numa_local",
    "numa_other",
    "numa_pte_updates",
    "numa_huge_pte_updates",
    "numa_hint_faults",
    "numa_hint_faults_local",
    "numa_pages_migrated",
    "pgmigrate_success",
    "pgmigrate_fail",
    "pgfault",
    "pgmajfault",
    "thp_migration_success",
    "thp_migration_fail",
    # memory tiering (kernel.numa_balancing=2, demotion_enabled): lab.topology.model.tiers
    "pgpromote_success",
    "pgpromote_candidate",
    "pgdemote_kswapd",
    "pgdemote_direct",
)
HPAGE_PMD_NR = 512  # base pages per PMD huge page on x86-64


def deltas(start: dict[str, int], end: dict[str, int], keys=VMSTAT_NUMA_KEYS) -> dict[str, int]:
    return {k: end.get(k, 0) - start.get(k, 0) for k in keys if k in end or k in start}


def hint_local_percent(hint_faults: int, hint_faults_local: int) -> float:
    """mmtests 'NUMA hint local percent': local*100/faults, or 100 with no faults."""
    return 100.0 if hint_faults == 0 else hint_faults_local * 100.0 / hint_faults


def autonuma_cost(pte_updates: int, hint_faults: int, pages_migrated: int) -> float:
    """mmtests 'AutoNUMA cost' = (7*pte_updates + 5000*hint_faults + 19*pages_migrated) / 1e6."""
    return (7 * pte_updates + 5000 * hint_faults + 19 * pages_migrated) / 1e6


def derived_rows(d: dict[str, int]) -> dict[str, float]:
    """The vmstat-derived rows of an mmtests compare, keyed by mmtests' names (unrounded)."""
    pte = d.get("numa_pte_updates", 0)
    huge = d.get("numa_huge_pte_updates", 0)
    faults = d.get("numa_hint_faults", 0)
    local = d.get("numa_hint_faults_local", 0)
    migrated = d.get("numa_pages_migrated", 0)
    return {
        "NUMA base-page range updates": pte,
        "NUMA PTE updates": pte - huge * HPAGE_PMD_NR,
        "NUMA PMD updates": huge,
        "NUMA hint faults": faults,
        "NUMA hint local faults": local,
        "NUMA hint local percent": hint_local_percent(faults, local),
        "NUMA pages migrated": migrated,
        "AutoNUMA cost": autonuma_cost(pte, faults, migrated),
    }
