"""What the guest kernel will see of its CPUs: packages, dies, clusters, caches, and the sched domains below NUMA.

Every topology has a view here, with or without a CPU grid (lab.topology.model.cpu_grid): without one it is the
layout numalab always booted (``lab.vm.qemu.qemu_argv.smp_layout``: a socket per node when nodes are equal,
else a socket per core), where QEMU's L3 is the socket's.

The domains follow x86's topology levels (``arch/x86/kernel/smpboot.c``), 6.1 and 6.12 alike:

* ``SMT``: a core's threads; ``CLS``: the CPUs sharing an L2 (``cpu_clustergroup_mask``); ``MC``: the CPUs
  sharing the LLC, cut at the node (``match_llc`` ignores an LLC sibling on another node);
* ``DIE`` (6.1) or ``PKG`` (6.8 and later): the node's CPUs (``cpu_cpu_mask``), left out when a package holds
  more than one node (``x86_has_numa_in_package``: the NUMA levels then span the package);
* a level whose span is its child's, or one CPU, is degenerated (``sd_degenerate``,
  ``sd_parent_degenerate``), as ``NODE`` is above a level that spans the node.

The NUMA levels above them are ``lab.topology.predictions.kernel_view``'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.cpulist import format_cpulist
from lab.topology.model.topology import Topology


@dataclass(frozen=True)
class SmpLayout:
    sockets: int
    cores: int
    threads: int

    def place(self, vcpu: int) -> tuple[int, int, int]:
        """vCPU index -> (socket, core, thread), QEMU's x86 cpu-index order."""
        thread = vcpu % self.threads
        core = (vcpu // self.threads) % self.cores
        socket = vcpu // (self.threads * self.cores)
        return socket, core, thread


def smp_layout(topo: Topology) -> SmpLayout:
    """One socket per CPU node when nodes are equal; else one core per socket.

    A socket never spans two nodes, so the guest's LLC/package siblings stay
    inside a node (the kernel warns and ignores them otherwise).
    """
    counts = {topo.nodes[i].cpus for i in topo.cpu_nodes}
    if len(counts) == 1:
        per_node = counts.pop()
        return SmpLayout(len(topo.cpu_nodes), per_node // topo.threads, topo.threads)
    return SmpLayout(topo.total_cpus // topo.threads, 1, topo.threads)


def vcpu_ids(topo: Topology) -> list[dict[str, int]]:
    """Per vCPU: node, package, die, cluster, core and thread, as QEMU places it."""
    node_of = {cpu: node for node, cpus in zip(topo.nodes, topo.node_cpus()) for cpu in cpus}
    grid = topo.cpu_grid
    out = []
    if grid is not None:
        for v in range(topo.total_cpus):
            out.append({"node": node_of[v].id} | grid.place(v))
        return out
    smp = smp_layout(topo)
    for v in range(topo.total_cpus):
        s, c, t = smp.place(v)
        out.append({"node": node_of[v].id, "package": s, "die": 0, "cluster": 0, "core": c, "thread": t})
    return out


def _groups(ids: list[dict[str, int]], keys: tuple[str, ...]) -> list[str]:
    """Per vCPU, the cpulist of the vCPUs that agree with it on ``keys``."""
    by: dict[tuple, list[int]] = {}
    for v, i in enumerate(ids):
        by.setdefault(tuple(i[k] for k in keys), []).append(v)
    return [format_cpulist(by[tuple(i[k] for k in keys)]) for i in ids]


def pkg_level_name(release: str | None) -> str:
    """The x86 package level's name in a kernel of ``release`` (``6.1.0-18-amd64``): DIE before 6.8, PKG after."""
    try:
        major, minor = (int(x) for x in (release or "").split("-")[0].split(".")[:2])
    except ValueError:
        return "PKG"
    return "DIE" if (major, minor) < (6, 8) else "PKG"


# The x86 levels a kernel's config may leave out (CONFIG_SCHED_SMT, _CLUSTER, _MC); numalab's own trimmed
# builds have no SCHED_CLUSTER, Debian's do.
LEVEL_CONFIGS = {"SMT": "CONFIG_SCHED_SMT", "CLS": "CONFIG_SCHED_CLUSTER", "MC": "CONFIG_SCHED_MC"}
ALL_LEVELS = frozenset(LEVEL_CONFIGS)


def configured_levels(config_text: str | None) -> frozenset[str]:
    """The levels below the package a kernel of this ``.config`` builds (all of them when it is not known)."""
    if config_text is None:
        return ALL_LEVELS
    set_ = {line.split("=")[0] for line in config_text.splitlines() if line.endswith("=y")}
    return frozenset(level for level, option in LEVEL_CONFIGS.items() if option in set_)


def predict_cpus(topo: Topology, release: str | None = None, levels: frozenset[str] = ALL_LEVELS) -> dict:
    """The kernel's view of its CPUs as plain data (JSON-ready): per vCPU its ids, the CPUs it shares its core,
    L2 and L3 with, and its sched domains below NUMA as (name, span) from the lowest; ``levels``: the SMT, CLS
    and MC levels the kernel was configured with (``configured_levels``)."""
    ids = vcpu_ids(topo)
    grid = topo.cpu_grid
    core = _groups(ids, ("package", "die", "cluster", "core"))
    l2 = _groups(ids, ("package", "die", "cluster")) if grid is not None and grid.has_clusters else core
    l3 = _groups(ids, ("package", "die"))
    mc = _groups(ids, ("package", "die", "node"))
    node = _groups(ids, ("node",))
    nodes_per_package = {}
    for i in ids:
        nodes_per_package.setdefault(i["package"], set()).add(i["node"])
    numa_in_package = any(len(n) > 1 for n in nodes_per_package.values())
    pkg = pkg_level_name(release)
    cpus = []
    for v, i in enumerate(ids):
        stack = [(n, span) for n, span in (("SMT", core[v]), ("CLS", l2[v]), ("MC", mc[v])) if n in levels]
        stack += [] if numa_in_package else [(pkg, node[v])]
        kept: list[dict] = []
        for name, span in stack:
            if span == str(v) or (kept and kept[-1]["cpus"] == span):
                continue  # one CPU, or its child's span: degenerated
            kept.append({"name": name, "cpus": span})
        cpus.append(i | {"core_cpus": core[v], "l2_cpus": l2[v], "l3_cpus": l3[v], "domains": kept})
    return {
        "packages": len(nodes_per_package),
        "numa_in_package": numa_in_package,
        "memoryless_nodes": topo.memoryless_nodes,
        "vendor": (grid.vendor or "intel") if grid is not None else "",
        **({"cpu_model": {"family": grid.cpu_model[0], "model": grid.cpu_model[1]}} if grid and grid.cpu_model else {}),
        "cpus": cpus,
    }


def vcpu_llcs(topo: Topology) -> tuple[int, ...]:
    """Per vCPU, the index of its LLC: a die cut at its node (as the kernel's MC level is: the SNC exception), the
    LLCs numbered in order of their first vCPU. A topology without a grid has one LLC a CPU node."""
    index: dict[tuple[int, int, int], int] = {}
    return tuple(index.setdefault((i["package"], i["die"], i["node"]), len(index)) for i in vcpu_ids(topo))
