"""A real machine's CPUs grouped into packages, L3s, L2s and cores -> a spec with the CPU grid (issue #48).

hwloc (lab.topology.importers.hwloc: ``lstopo --of xml`` files and synthetic descriptions) and a copy of
``/sys/devices/system/{cpu,node}`` (lab.topology.model.sysfs_machine) tell more than ``numactl -H``: which CPUs
share a package, an L3, an L2 and a core. :func:`derive_grid` turns that into the spec's optional fields::

    packages: 2           # the CPU nodes, in id order, split evenly among them
    llcs_per_node: 2      # L3s a node, each an equal share of its cores
    cores_per_cluster: 2  # cores sharing one L2 (left out when each core has its own)
    threads: 2
    cpu_vendor: amd
    cpu_model: {family: 25, model: 17}  # the packages' CPUID family and model, when the source gives them

and :func:`lab.topology.importers.imported_spec.grid_spec` writes the spec, scaled like every import
(``--cpus-per-node``, ``--mem-per-node``; by default the fewest CPUs a node the kernel reads as this machine), as
data and as YAML text whose comments say what was decided. Nodes that hold different numbers of L3s (2 in one
node and 1 in another: an uneven machine) give each CPU node its own ``llcs:``, every L3 the same CPUs, when the
packages hold the same number of L3s each (QEMU's one grid); a field the machine does not fill evenly otherwise
(nodes in packages of different sizes, L2s shared by 1 or 2 cores) is left out, and a comment in the YAML says
what and why; an L3 that spans several nodes (Intel SNC, where CPUID's LLC is the package's) becomes
``llcs_per_node: 1`` with a comment, as the kernel splits it at the node.

Memoryless nodes (CPUs, no memory) stay memoryless (``memory: 0``), CPU-less ones CPU-less.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lab.cpulist import format_cpulist
from lab.errors import LabError
from lab.topology.model.machine import CpuGroups, Group, Machine

VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}  # CPUID vendor strings -> cpu_vendor


@dataclass(frozen=True)
class GridFields:
    """The grid fields a machine fills evenly (None: left out), and a comment per field on what was decided."""

    threads: int
    packages: int | None
    llcs_per_node: int | None
    cores_per_cluster: int | None
    cpu_vendor: str | None
    comments: dict[str, str] = field(default_factory=dict)  # spec field -> one line
    node_llcs: tuple[int, ...] = ()  # an uneven machine's L3s of each CPU node (llcs_per_node then None)
    cpu_model: tuple[int, int] | None = None  # (family, model), with cpu_vendor only

    @property
    def fewest_llcs(self) -> int:
        """The L3s of the nodes with the fewest (every node's, on an even machine)."""
        return min(self.node_llcs) if self.node_llcs else self.llcs_per_node or 1

    @property
    def unit(self) -> int:
        """The fewest CPUs a node of the fewest L3s can have in this grid: an LLC each of one cluster of one
        core's threads."""
        return self.fewest_llcs * (self.cores_per_cluster or 1) * self.threads

    def node_cpus(self, cpus_per_node: int) -> list[int]:
        """The CPUs of each CPU node when the nodes of the fewest L3s have ``cpus_per_node``: the others in
        proportion to their L3s (all alike on an even machine)."""
        if not self.node_llcs:
            return []
        return [cpus_per_node // self.fewest_llcs * n for n in self.node_llcs]

    def layout(self, cpus: int, llcs: int | None = None) -> str:
        """``2 L3s x 2 clusters x 2 cores x 2 threads`` for a node of ``cpus`` CPUs in ``llcs`` L3s (default: the
        grid's L3s a node; ``N CPUs`` if they do not divide so)."""
        shown = llcs is not None or self.llcs_per_node is not None
        llcs = llcs or self.llcs_per_node or 1
        cluster = self.cores_per_cluster or 1
        if cpus % (llcs * cluster * self.threads):
            return plural(cpus, "CPU")
        cores = cpus // (llcs * self.threads)
        parts = [plural(llcs, "L3")] if shown else []
        if self.cores_per_cluster:
            parts += [plural(cores // cluster, "cluster"), plural(cluster, "core")]
        else:
            parts.append(plural(cores, "core"))
        return " x ".join([*parts, plural(self.threads, "thread")])


def plural(n: int, word: str) -> str:
    """'1 core', '2 cores'."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def _ids(nodes: list[int]) -> str:
    return ", ".join(map(str, nodes))


# --- the machine's groups -> the grid fields -------------------------------------------------------------------


def _partition(groups: tuple[Group, ...], cpus: Group, what: str, origin: str) -> tuple[list[Group], Group]:
    """``groups`` cut to ``cpus`` (empty ones dropped), and the CPUs in none of them; a CPU in two is an error."""
    seen: dict[int, Group] = {}
    out = []
    for g in groups:
        g = g & cpus
        if not g:
            continue
        for c in g:
            if c in seen:
                raise LabError(f"{origin}: CPU {c} is in two {what}s ({_cpus(seen[c])} and {_cpus(g)})")
            seen[c] = g
        out.append(g)
    return out, cpus - seen.keys()


def _cpus(g: Group) -> str:
    return "CPUs " + format_cpulist(sorted(g))


def _threads(cores: list[Group], comments: dict[str, str]) -> int:
    sizes = sorted({len(c) for c in cores})
    if len(sizes) == 1:
        return sizes[0]
    comments["threads"] = (
        f"threads left out (1): cores have {' or '.join(map(str, sizes))} threads (SMT off on some cores?)"
    )
    return 1


def _packages(
    cpu_nodes: list[tuple[int, Group]],
    packages: list[Group],
    loose: Group,
    comments: dict[str, str],
    node_llcs: tuple[int, ...] = (),
) -> int | None:
    """The number of packages the CPU nodes split evenly into, in id order (on an uneven machine, ``node_llcs``:
    the same L3s in each), or None (with a comment)."""
    if not packages:
        comments["packages"] = "packages left out: the source has no packages (numalab's default, a package a node)"
        return None
    if loose:
        comments["packages"] = f"packages left out: {_cpus(loose)} are in no package"
        return None
    order: list[int] = []
    for node, cpus in cpu_nodes:
        holders = [i for i, p in enumerate(packages) if p & cpus]
        if len(holders) > 1:
            comments["packages"] = f"packages left out: node {node}'s CPUs are in {len(holders)} packages"
            return None
        order.append(holders[0])
    runs: list[tuple[int, list[int]]] = []
    for (node, _), pkg in zip(cpu_nodes, order):
        if runs and runs[-1][0] == pkg:
            runs[-1][1].append(node)
        elif any(p == pkg for p, _ in runs):
            first = next(nodes for p, nodes in runs if p == pkg)
            comments["packages"] = (
                f"packages left out: the nodes of one package ({_ids(first)} and {node}) are not consecutive ids"
            )
            return None
        else:
            runs.append((pkg, [node]))
    if node_llcs:
        llcs = dict(zip((node for node, _ in cpu_nodes), node_llcs))
        counts = sorted({sum(llcs[n] for n in nodes) for _, nodes in runs})
        what = "L3s (QEMU gives every package the same dies)"
    else:
        counts = sorted({len(nodes) for _, nodes in runs})
        what = "CPU nodes (not one count)"
    if len(counts) > 1:
        comments["packages"] = f"packages left out: packages hold {' or '.join(map(str, counts))} {what}"
        return None
    return len(runs)


def _llcs(
    cpu_nodes: list[tuple[int, Group]], llcs: list[Group], loose: Group, cores: list[Group], comments: dict[str, str]
) -> int | tuple[int, ...] | None:
    """L3s a node (1 when an L3 spans nodes, as on SNC), each CPU node's L3s where nodes hold different numbers
    (an uneven machine), or None (with a comment)."""
    if not llcs:
        comments["llcs_per_node"] = "llcs_per_node left out (1): the source has no L3"
        return None
    if loose:
        comments["llcs_per_node"] = f"llcs_per_node left out (1): {_cpus(loose)} share no L3"
        return None
    inside = {node: [g for g in llcs if g & cpus] for node, cpus in cpu_nodes}
    if all(g <= cpus for node, cpus in cpu_nodes for g in inside[node]):
        counts = sorted({len(v) for v in inside.values()})
        sizes = sorted({sum(1 for c in cores if c <= g) for g in llcs})
        if len(counts) > 1:
            comments["llcs_per_node"] = (
                f"nodes have {' or '.join(map(str, counts))} L3s: each CPU node's own llcs: (an uneven machine)"
            )
        if len(sizes) > 1:
            comments["llcs_per_node"] = (
                comments.get("llcs_per_node", "") + ("; " if len(counts) > 1 else "")
                + f"the machine's L3s hold {' or '.join(map(str, sizes))} cores; the spec gives each an equal share"
            )  # fmt: skip
        return tuple(len(v) for v in inside.values()) if len(counts) > 1 else counts[0]
    if all(len(v) == 1 and cpus <= v[0] for (node, cpus), v in zip(cpu_nodes, inside.values())):
        spans = sorted({sum(1 for _, cpus in cpu_nodes if cpus <= g) for g in llcs})
        comments["llcs_per_node"] = (
            f"each of the machine's L3s spans {' or '.join(map(str, spans))} nodes (as on Intel SNC, where CPUID's "
            "L3 is the package's); the kernel splits it per node as on SNC, so one LLC a node"
        )
        return 1
    node = next((n for n, cpus in cpu_nodes if any(not g <= cpus for g in inside[n]) and len(inside[n]) > 1), None)
    comments["llcs_per_node"] = (
        f"llcs_per_node left out (1): node {node} holds parts of {len(inside[node])} L3s"
        if node is not None
        else "llcs_per_node left out (1): some L3s span nodes while other nodes hold several L3s"
    )
    return None


def _clusters(
    cpu_nodes: list[tuple[int, Group]],
    l2s: list[Group],
    loose: Group,
    cores: list[Group],
    llcs: list[Group],
    comments: dict[str, str],
) -> int | None:
    """Cores a shared L2 (None when each core has its own, or when the L2s are uneven: with a comment)."""
    if not l2s:
        comments["cores_per_cluster"] = "cores_per_cluster left out: the source has no L2 (each core its own)"
        return None
    if loose:
        comments["cores_per_cluster"] = f"cores_per_cluster left out: {_cpus(loose)} share no L2"
        return None
    if any(not (c <= g or not c & g) for g in l2s for c in cores):
        comments["cores_per_cluster"] = "cores_per_cluster left out: an L2 holds part of a core"
        return None
    sizes = sorted({sum(1 for c in cores if c <= g) for g in l2s})
    if len(sizes) > 1:
        comments["cores_per_cluster"] = (
            f"cores_per_cluster left out: L2s are shared by {' or '.join(map(str, sizes))} cores (not one count)"
        )
        return None
    if llcs and any(not any(g <= llc for llc in llcs) for g in l2s):
        comments["cores_per_cluster"] = "cores_per_cluster left out: an L2 spans two L3s"
        return None
    if any(not any(g <= cpus for _, cpus in cpu_nodes) for g in l2s):
        comments["cores_per_cluster"] = "cores_per_cluster left out: an L2 spans two nodes"
        return None
    return sizes[0] if sizes[0] > 1 else None


def derive_grid(m: Machine) -> GridFields:
    """The grid fields ``m``'s CPU groups fill evenly (see the module's docstring)."""
    g = m.groups or CpuGroups()
    cpu_nodes = [(n.id, frozenset(n.cpus)) for n in m.nodes if n.cpus]
    if not cpu_nodes:
        raise LabError(f"{m.origin}: no node has CPUs")
    cpus = frozenset().union(*(c for _, c in cpu_nodes))
    comments: dict[str, str] = {}
    cores, alone = _partition(g.cores, cpus, "core", m.origin)
    cores += [frozenset({c}) for c in sorted(alone)]
    for core in cores:
        if sum(1 for _, node_cpus in cpu_nodes if core & node_cpus) > 1:
            raise LabError(f"{m.origin}: a core ({_cpus(core)}) is in two nodes")
    threads = _threads(cores, comments)
    packages, loose_p = _partition(g.packages, cpus, "package", m.origin)
    llcs, loose_l = _partition(g.llcs, cpus, "L3", m.origin)
    l2s, loose_2 = _partition(g.l2s, cpus, "L2", m.origin)
    per_node = _llcs(cpu_nodes, llcs, loose_l, cores, comments)
    node_llcs = per_node if isinstance(per_node, tuple) else ()
    n_packages = _packages(cpu_nodes, packages, loose_p, comments, node_llcs)
    if node_llcs and n_packages is None:
        comments["llcs_per_node"] = (
            f"llcs left out (1 a node): nodes have {' or '.join(map(str, sorted(set(node_llcs))))} L3s, and a node's "
            "own llcs: need the packages (see packages)"
        )
        node_llcs = ()
    clusters = _clusters(cpu_nodes, l2s, loose_2, cores, llcs, comments)
    vendor = VENDORS.get(g.vendor)
    if g.vendor and vendor is None:
        comments["cpu_vendor"] = f"cpu_vendor left out: the machine's CPU vendor {g.vendor!r} is not Intel's or AMD's"
    cpu_model = _cpu_model(g, vendor, comments)
    return GridFields(
        threads=threads,
        packages=n_packages,
        llcs_per_node=per_node if isinstance(per_node, int) else None,
        cores_per_cluster=clusters,
        cpu_vendor=vendor,
        comments=comments,
        node_llcs=node_llcs,
        cpu_model=cpu_model,
    )


def _cpu_model(g: CpuGroups, vendor: str | None, comments: dict[str, str]) -> tuple[int, int] | None:
    """The machine's one (family, model) for ``cpu_model``, or None with a comment when it has several, or no
    vendor to go with it (the numbers are a vendor's)."""
    if not g.cpu_models:
        return None
    if len(g.cpu_models) > 1:
        seen = ", ".join(f"{f}/{m}" for f, m in g.cpu_models)
        comments["cpu_model"] = f"cpu_model left out: the machine's packages give several families/models ({seen})"
        return None
    if vendor is None:
        comments["cpu_model"] = "cpu_model left out: no Intel or AMD vendor to go with it"
        return None
    return g.cpu_models[0]


# --- the spec ---------------------------------------------------------------------------------------------------


def pick_cpus_per_node(grid: GridFields, cpus_per_node: int | None) -> int:
    """``cpus_per_node`` if the grid divides it (else a one-line error saying what to pick), or by default the
    smallest multiple of the grid's unit that is at least 2 (:func:`grid_spec` goes on to the fewest the kernel
    reads as the machine); on an uneven machine, the CPUs of its nodes of the fewest L3s."""
    unit = grid.unit
    if cpus_per_node is None:
        return unit * -(-2 // unit)
    if cpus_per_node < 1:
        raise LabError(f"--cpus-per-node: must be >= 1, got {cpus_per_node}")
    if cpus_per_node % unit:
        parts = [f"{grid.fewest_llcs} LLC(s)"]
        if grid.cores_per_cluster:
            parts.append(f"clusters of {grid.cores_per_cluster} cores")
        parts.append(f"{grid.threads} thread(s) a core")
        which = "a node of the fewest L3s (the others in proportion)" if grid.node_llcs else "a node"
        raise LabError(
            f"--cpus-per-node {cpus_per_node}: {which} of this machine is {' x '.join(parts)}, so its CPUs come in "
            f"multiples of {unit}; pick {unit}, {2 * unit}, {3 * unit}, ..."
        )
    return cpus_per_node
