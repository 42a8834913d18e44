"""A guest LLC on a host LLC: pins that keep a guest LLC's vCPUs inside one of the host's last-level caches (as
lab.placement.host_inventory reads them), and the record of which guest LLCs a real one backs (as
``distance_map`` does for the SLIT).

Under TCG no cache is modelled, so this matters for KVM runs: two vCPUs the guest believes share an L3 do
share one only when their host CPUs do. A host whose sysfs says nothing of its caches has no LLCs here, and
the pins are numalab's usual ones.
"""

from __future__ import annotations

from lab.cpulist import format_cpulist
from lab.topology.model.topology import Topology
from lab.topology.predictions.cpu_view import predict_cpus


def guest_llcs(topo: Topology) -> list[list[int]]:
    """The guest's LLCs as lists of vCPUs, in vCPU order (lab.topology.predictions.cpu_view)."""
    out: dict[str, list[int]] = {}
    for v, c in enumerate(predict_cpus(topo)["cpus"]):
        out.setdefault(c["l3_cpus"], []).append(v)
    return list(out.values())


def llc_pins(
    topo: Topology,
    mapping: tuple[int, ...],
    node_cpus: dict[int, tuple[int, ...]],
    host_llcs: tuple[tuple[int, ...], ...],
) -> list[tuple[int, ...]] | None:
    """One host CPU a vCPU, each guest LLC inside one host LLC of its host node where one has room for it, else
    on the host node's next free CPUs; None when a host node runs out of CPUs (the caller's pins then)."""
    node_of = {v: node.id for node, vcpus in zip(topo.nodes, topo.node_cpus()) for v in vcpus}
    free = {h: list(cpus) for h, cpus in node_cpus.items()}
    pins: dict[int, tuple[int, ...]] = {}
    for llc in guest_llcs(topo):
        host_node = mapping[node_of[llc[0]]]
        room = [[c for c in group if c in free[host_node]] for group in host_llcs]
        fit = next((r for r in room if len(r) >= len(llc)), None)
        take = (fit or free[host_node])[: len(llc)]
        if len(take) < len(llc):
            return None
        for v, c in zip(llc, take):
            pins[v] = (c,)
            free[host_node].remove(c)
    return [pins[v] for v in range(topo.total_cpus)]


def llc_map(topo: Topology, pins: list[tuple[int, ...]], host_llcs: tuple[tuple[int, ...], ...]) -> list[dict]:
    """Per guest LLC: its vCPUs, their host CPUs, the host LLCs those are in, and whether a real LLC backs it
    (its vCPUs all on one host LLC that no other guest LLC's vCPUs use); ``backed`` is None when the host's
    caches are not known."""
    index = {c: i for i, group in enumerate(host_llcs) for c in group}
    rows = []
    for llc in guest_llcs(topo):
        host_cpus = sorted({c for v in llc for c in pins[v]})
        rows.append({"guest_cpus": format_cpulist(llc), "host_cpus": format_cpulist(host_cpus),
                     "host_llcs": sorted({index[c] for c in host_cpus if c in index})})  # fmt: skip
    for row in rows:
        if not host_llcs:
            row["backed"] = None
            continue
        shared = sum(1 for other in rows if set(other["host_llcs"]) & set(row["host_llcs"]))
        row["backed"] = len(row["host_llcs"]) == 1 and shared == 1
    return rows


def unbacked_llc_notes(topo: Topology, rows: list[dict]) -> list[str]:
    """What the guest's LLCs are worth on this host, for a machine with a CPU grid (the LLCs its spec asks
    for; without one, an LLC is a node, whose backing the distance notes speak of)."""
    if topo.cpu_grid is None or len(rows) < 2 or all(r["backed"] is None for r in rows):
        return []
    bad = [r["guest_cpus"] for r in rows if not r["backed"]]
    if not bad:
        return []
    return [f"guest LLCs {', '.join(bad)} are not each on a host LLC of their own (they share one or span "
            "several): under KVM their cache sharing is not the modelled machine's"]  # fmt: skip
