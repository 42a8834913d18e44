"""The report's colours, each chosen once, so that one kind of thing looks the same in every chart.

``EVENT_COLORS`` is keyed by the short word of an event (``TraceEvent.short``
in ``lab.events``: move, swap, stick, migrate), the word the analyses key their
tables and series by, so a chart can pass it as it is. The other colours are
for series that are not trace events.
"""

from __future__ import annotations

from lab.events import MIGRATE_PAGES, MOVE_NUMA, STICK_NUMA, SWAP_NUMA

EVENT_COLORS: dict[str, str] = {
    MOVE_NUMA.short: "#1d4ed8",
    SWAP_NUMA.short: "#b45309",
    STICK_NUMA.short: "#6d28d9",
    MIGRATE_PAGES.short: "#059669",
}
HINT_LOCAL_COLOR = "#0891b2"  # numa_hint_faults_local / numa_hint_faults, from /proc/vmstat
ACCESS_LOCAL_COLOR = "#059669"  # the access-matrix plugin's local share of memory accesses
# A node in the residency strip and the per-node memory charts (node n: the n-th, cycling past eight nodes)
NODE_COLORS = ("#2563eb", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#06b6d4", "#84cc16", "#ec4899")
BASE_COLOR, NEW_COLOR = "#64748b", "#2563eb"  # an A/B comparison's baseline and new group
DISTANCE_NEAR, DISTANCE_FAR = "#eef3fd", "#f59e0b"  # a SLIT table's shading, from the nearest to the farthest entry
