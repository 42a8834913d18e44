"""A topology as a run names it (:class:`TopologyRef`): the one place that turns "name + size
overrides" into a Topology. Light on purpose: the CLI, RunOptions and the matrix spec import it at
every start, and it reads spec files (lab.topology.model.spec) only when a topology is loaded."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.topology.model.topology import Topology

CLI_SIZE_NAMES = ("--cpus-per-node", "--mem-per-node", "--threads")
SPEC_SIZE_NAMES = ("cpus_per_node", "mem_per_node", "threads")


def topology_with_sizes(
    name_or_path: str,
    cpus_per_node: int | None = None,
    mem_per_node: str | None = None,
    threads: int | None = None,
    names: tuple[str, str, str] = CLI_SIZE_NAMES,
    cache: bool = True,
) -> Topology:
    """A topology with size overrides; errors name them as ``names`` (the command line's options,
    or a matrix spec's fields). ``cache``: lab.topology.model.spec.load_topology's."""
    from lab.topology.model.spec import load_topology, parse_mib  # (the spec reader: on use, not at start)

    topo = load_topology(name_or_path, cache)
    mem = parse_mib(mem_per_node, names[1]) if mem_per_node else None
    if any(x is not None for x in (cpus_per_node, mem, threads)):
        try:
            topo = topo.with_overrides(cpus_per_node, mem, threads)
        except LabError as err:
            raise LabError(f"{'/'.join(names)} applied to {topo.name}: {err}") from None
    return topo


@dataclass(frozen=True)
class TopologyRef:
    """A topology as a run names it: a preset name or a spec file, and the size overrides
    (``--cpus-per-node``, ``--mem-per-node``, ``--threads``; a matrix spec's ``cpus_per_node`` etc.).
    The one place that turns "name + overrides" into a :class:`Topology` (:meth:`load`) and a label."""

    name: str  # preset name or file path
    cpus_per_node: int | None = None
    mem_per_node: str | None = None  # a size, e.g. 512M
    threads: int | None = None

    def load(self, names: tuple[str, str, str] = CLI_SIZE_NAMES, cache: bool = True) -> Topology:
        return topology_with_sizes(self.name, self.cpus_per_node, self.mem_per_node, self.threads, names, cache)

    @property
    def label(self) -> str:
        """A path-safe label: the preset or file stem, and the overrides (``ring-4-cpus4-mem1G``)."""
        base = Path(self.name).stem if "/" in self.name or self.name.endswith((".yaml", ".yml")) else self.name
        extra = "".join(
            f"-{k[0]}{v}" for k, v in (("cpus", self.cpus_per_node), ("mem", self.mem_per_node), ("t", self.threads))
            if v is not None
        )  # fmt: skip
        return re.sub(r"[^A-Za-z0-9_+-]+", "-", base + extra).strip("-") or "x"
