"""The sched groups of every NUMA domain, from each CPU's point of view, as Linux 6.1 builds them.

``kernel_view.predict`` gives the NUMA levels and their spans; this module
adds the groups, following 6.1 ``kernel/sched/topology.c``:

* ``build_sched_domains()`` builds, for each CPU, one domain per topology
  level (the x86 levels, ``NODE`` = NUMA level 0, then one ``NUMA`` level per
  further distance; ``sd_numa_mask``: every node within that distance) and
  stops after the first level that spans every CPU, so a CPU's tree can be
  shorter than another's.
* ``build_overlap_sched_groups(sd, cpu)`` (NUMA levels, ``SD_OVERLAP``)
  walks the domain span with ``for_each_cpu_wrap(i, span, cpu)``, i.e. from
  the CPU itself; for each CPU ``i`` not yet covered it takes ``i``'s own
  domain at that level (skipped if ``i``'s tree stopped below it) and makes a
  group of that sibling's *child* span, after ``find_descended_sibling()``
  when the child spans out of the domain (diameter >= 3) and skipping
  children that would degenerate. The first group is the CPU's own child
  domain, so the CPU is in exactly one group.
* ``build_balance_mask()``: the CPUs of a group whose own sibling's child is
  exactly the group; the dump prints it as ``mask=`` when it differs from
  the span.

``construction="first-cpu"`` is the construction before seed 002's fix (and
``kernel-configs/patches/seed002-groups-from-one-cpu.patch``): the span is
walked from its lowest CPU for every CPU, and ``sd->groups`` is the first
group holding the CPU (or the one whose balance CPU it is). On ring-4 the
last level then has groups (3,0,1) and (1,2,3) for every CPU.

The model works on whole nodes: the levels below ``NODE`` (SMT, MC, DIE)
are not modelled, so a descent below ``NODE`` (a node with no neighbour at
the first NUMA distance, in a diameter >= 3 machine) is taken as the node.
Only levels that survive degeneration (``visible`` in ``kernel_view``) are
returned, as the ``sched_verbose`` dump shows them.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.cpulist import format_cpulist, parse_cpulist
from lab.topology.model.topology import Topology

CONSTRUCTIONS = ("6.1", "first-cpu")


def _levels(topo: Topology) -> tuple[list[int], list[int], dict[int, list[frozenset[int]]]]:
    d = topo.distances
    cpu_nodes = topo.cpu_nodes
    levels_d = sorted({d[i][j] for i in cpu_nodes for j in cpu_nodes})
    spans = {n: [frozenset(j for j in cpu_nodes if d[n][j] <= dist) for dist in levels_d] for n in cpu_nodes}
    return levels_d, cpu_nodes, spans


Group = tuple[frozenset[int], list[int]]  # a group's nodes and its balance mask (CPUs)


@dataclass(frozen=True)
class _Domains:
    """A topology's NUMA sched domains on whole nodes: the distance of each level, every node's span (nodes) at
    each level, and the highest level built for each node."""

    levels_d: list[int]
    cpu_nodes: list[int]
    spans: dict[int, list[frozenset[int]]]
    node_cpus: list[list[int]]
    node_of: dict[int, int]
    built_to: dict[int, int]

    @classmethod
    def of(cls, topo: Topology) -> _Domains:
        """The domains of ``topo``."""
        levels_d, cpu_nodes, spans = _levels(topo)
        node_cpus = topo.node_cpus()
        everything = frozenset(cpu_nodes)
        top = len(levels_d) - 1
        # The highest level built for each node: build_sched_domains() stops at the first span of everything.
        built_to = {n: next((k for k in range(len(levels_d)) if spans[n][k] == everything), top) for n in cpu_nodes}
        node_of = {c: n for n in cpu_nodes for c in node_cpus[n]}
        return cls(levels_d, cpu_nodes, spans, node_cpus, node_of, built_to)

    def built(self, n: int, k: int) -> bool:
        """Whether node ``n``'s tree has a level-``k`` domain."""
        return k <= self.built_to[n]

    def cpus(self, nodes: frozenset[int]) -> list[int]:
        """The CPUs of ``nodes``, sorted."""
        return sorted(c for n in nodes for c in self.node_cpus[n])

    def group_of(self, m: int, k: int, span: frozenset[int]) -> tuple[frozenset[int], int]:
        """The group node ``m``'s sibling at level ``k`` gives a domain spanning ``span`` (nodes), and the
        level of the sibling it was finally taken from."""
        spans = self.spans
        lvl = k
        if not spans[m][lvl - 1] <= span:  # find_descended_sibling()
            while lvl > 0 and not spans[m][lvl - 1] <= span:
                lvl -= 1
            while lvl > 0 and spans[m][lvl - 1] == spans[m][lvl]:
                lvl -= 1
        return (spans[m][lvl - 1] if lvl > 0 else frozenset({m})), lvl

    def balance_mask(self, group: frozenset[int], lvl: int) -> list[int]:
        """The CPUs of ``group`` (taken from level ``lvl``) whose own sibling's child is exactly the group."""
        if lvl == 0:
            return self.cpus(group)
        return [
            c
            for c in self.cpus(group)
            if self.built(self.node_of[c], lvl) and self.spans[self.node_of[c]][lvl - 1] == group
        ]

    def node_level(self, n: int, k: int, construction: str) -> tuple[list[Group], str, list[str], list[str]]:
        """The groups of node ``n``'s level-``k`` domain in construction order (as node sets with balance
        masks), and the span, groups and masks as cpulists. Every CPU of a node gets the same list: a node's
        CPUs are contiguous, and from any of them the walk covers the whole node first (6.1), or the walk
        does not depend on the CPU at all (first-cpu)."""
        span = self.spans[n][k]
        span_cpus = self.cpus(span)
        if construction == "6.1":
            start = span_cpus.index(self.node_cpus[n][0])
            order = span_cpus[start:] + span_cpus[:start]
        else:
            order = span_cpus
        covered: set[int] = set()
        groups: list[Group] = []
        for i in order:
            if i in covered or not self.built(self.node_of[i], k):
                continue
            g, lvl = self.group_of(self.node_of[i], k, span)
            covered.update(self.cpus(g))
            groups.append((g, self.balance_mask(g, lvl)))
        return (
            groups,
            format_cpulist(span_cpus),
            [format_cpulist(self.cpus(g)) for g, _ in groups],
            [format_cpulist(m) for _, m in groups],
        )

    def visible_levels(self, n: int) -> list[int]:
        """The NUMA levels of node ``n``'s tree that are built and do not degenerate into the level below."""
        return [
            k for k in range(1, len(self.levels_d)) if self.built(n, k) and self.spans[n][k] != self.spans[n][k - 1]
        ]


def _first_cpu_group(groups: list[Group], n: int, cpu: int) -> int:
    """The index of ``sd->groups`` in the first-cpu construction: the group whose balance CPU ``cpu`` is, else
    the first group holding node ``n``."""
    chosen = None
    for idx, (g, mask) in enumerate(groups):
        if (chosen is None and n in g) or (mask and mask[0] == cpu):
            chosen = idx
    return chosen or 0


def predict_groups(topo: Topology, construction: str = "6.1") -> dict[int, list[dict]]:
    """cpu -> its visible NUMA domains, lowest first: {"level", "distance", "span", "groups", "masks"}.

    ``groups`` are cpulists in the order the dump prints them (from
    ``sd->groups`` along ``->next``); ``masks`` the balance masks."""
    if construction not in CONSTRUCTIONS:
        raise ValueError(f"construction {construction!r} not in {CONSTRUCTIONS}")
    doms = _Domains.of(topo)
    out: dict[int, list[dict]] = {}
    for n in doms.cpu_nodes:
        levels = [(k, doms.node_level(n, k, construction)) for k in doms.visible_levels(n)]
        for cpu in doms.node_cpus[n]:
            out[cpu] = []
            for k, (groups, span_text, group_texts, mask_texts) in levels:
                first = _first_cpu_group(groups, n, cpu) if construction == "first-cpu" else 0
                out[cpu].append(
                    {
                        "level": k,
                        "distance": doms.levels_d[k],
                        "span": span_text,
                        "groups": group_texts[first:] + group_texts[:first],
                        "masks": mask_texts[first:] + mask_texts[:first],
                    }
                )
    return out


def group_summary(topo: Topology, construction: str = "6.1") -> list[dict]:
    """One row per node and visible NUMA level (all CPUs of a node see the same groups), for ``topo show``."""
    groups = predict_groups(topo, construction)
    node_cpus = topo.node_cpus()
    node_of = {c: n for n in topo.cpu_nodes for c in node_cpus[n]}
    rows = []
    for n in topo.cpu_nodes:
        cpu = node_cpus[n][0]
        for dom in groups[cpu]:
            rows.append(
                {
                    "node": n,
                    "cpu": cpu,
                    "level": dom["level"],
                    "distance": dom["distance"],
                    "span": dom["span"],
                    "groups": dom["groups"],
                    "group_nodes": [sorted({node_of[c] for c in parse_cpulist(g)}) for g in dom["groups"]],
                }
            )
    return rows
