"""numa02's threads, each writing its own memory over and over, with a hot set larger than the fast tier."""

from __future__ import annotations

from lab.topology.model.topology import Topology

# The hot set: this much of the fast tier (the nodes that are not slow, dax kmem nodes: lab.topology.model.tiers),
# but at most TIER_HOT_MAX of all guest memory.
TIER_HOT_FACTOR = 1.25
TIER_HOT_MAX = 0.55


def scale(topo: Topology, duration: float) -> dict[str, int]:
    slow = set(topo.tiers.slow_nodes) if topo.tiers else set()
    fast = sum(n.memory_mib for n in topo.nodes if n.id not in slow)
    hot = min(int(fast * TIER_HOT_FACTOR), int(topo.total_memory_mib * TIER_HOT_MAX))
    threads = max(1, topo.total_cpus)
    return {"threads": threads, "mem_mib_per_thread": max(8, hot // threads)}
