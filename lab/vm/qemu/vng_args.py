"""virtme-ng options for a topology: ``vng $(numalab topo vng-args ring-4) -r bzImage --exec ...``.

virtme-ng (1.38 on) builds a NUMA guest from ``--numa MEM[,cpus=A-B]`` (one per
node, in node order; ``0`` for a memoryless node, no ``cpus=`` for a CPU-less
one), ``--numa-distance SRC,DST=VAL``, ``--cpus`` (passed to QEMU's ``-smp`` as
it is, so the socket/core/thread layout goes with it) and ``--pin LIST`` (vCPU
i on the i-th CPU of LIST, over QMP). What it has no option for is said in the
notes: it backs each node with memfd without a host node, so guest memory is
not bound to host nodes, and a vCPU pinned to a set of CPUs (numalab's
``--pinning node``) cannot be expressed.

What of the topology itself the options leave out is :func:`left_out`'s, one entry a spec field: the CPU grid
(``--cpus`` is numalab's layout without one: a socket a node, one LLC a socket, an L2 a core), the CPUID vendor
and model (vng sets ``-cpu`` itself: ``max`` under TCG, ``host`` under KVM), and the memory tiers (no dax kmem
node, no ``-numa hmat-lb``). A memoryless node (``--numa 0,cpus=...``) and a CPU-less one are expressed.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.cpulist import format_cpulist
from lab.placement.pinning import Placement
from lab.topology.model.topology import Topology
from lab.topology.predictions.cpu_view import smp_layout


def vng_args(topo: Topology, placement: Placement | None = None) -> tuple[list[str], list[str]]:
    """(options, notes): the options for ``vng``, and what they leave out of numalab's VM."""
    smp = smp_layout(topo)
    args = [
        "--cpus",
        f"{topo.total_cpus},sockets={smp.sockets},cores={smp.cores},threads={smp.threads}",
        "--memory",
        f"{topo.total_memory_mib}M",
    ]
    for node, vcpus in zip(topo.nodes, topo.node_cpus()):
        spec = f"{node.memory_mib}M" if node.memory_mib else "0"
        args += ["--numa", ",".join([spec, *(f"cpus={r}" for r in format_cpulist(vcpus).split(",") if r)])]
    sym = topo.is_symmetric()
    for i in range(topo.n_nodes):
        for j in range(topo.n_nodes):
            if i != j and (not sym or i < j):
                args += ["--numa-distance", f"{i},{j}={topo.distances[i][j]}"]
    notes = ["virtme-ng backs each node with memfd on no particular host node: guest memory is not bound"]
    if placement is None:
        notes.append("no vCPU pinning asked for")
    elif placement.pinning == "cpu":
        args += ["--pin", ",".join(str(p[0]) for p in placement.vcpu_pins)]
        notes.append("--pin: virtme-ng pins one guest at a time")
    else:
        notes.append("vCPUs outnumber host CPUs (pinning 'node'): virtme-ng has no per-vCPU CPU sets, so no --pin")
    return args, notes


VNG_CPU = "virtme-ng sets -cpu itself: max under TCG, the host's CPU under KVM"


@dataclass(frozen=True)
class LeftOut:
    """A topology field the options do not express: the spec's name for it, its value, and why."""

    field: str
    value: str
    why: str

    def line(self) -> str:
        return f"vng-args: left out {self.field}: {self.value} ({self.why})"

    def to_dict(self) -> dict:
        return {"field": self.field, "value": self.value, "why": self.why}


def _flow(value: object) -> str:
    """A value as a spec's YAML flow style writes it: ``{family: 6, model: 173}``, ``[2, 3]``."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return str(value)


def _grid_left_out(topo: Topology) -> list[LeftOut]:
    """The CPU grid's fields that ``--cpus`` (numalab's layout without a grid, smp_layout) does not keep."""
    grid = topo.cpu_grid
    if grid is None:
        return []
    smp = smp_layout(topo)
    layout = f"--cpus gives {smp.sockets} socket(s) of {smp.cores} core(s), numalab's layout without a CPU grid"
    out = []
    if grid.packages != smp.sockets:
        out.append(LeftOut("packages", str(grid.packages), layout))
    one_llc = f"{layout}, one LLC a socket"
    if grid.uneven:
        cpu_nodes = topo.cpu_nodes
        out += [LeftOut(f"nodes[{n}].llcs", str(k), one_llc) for n, k in zip(cpu_nodes, grid.node_llcs)]
    elif grid.llcs_per_node > 1:
        out.append(LeftOut("llcs_per_node", str(grid.llcs_per_node), one_llc))
    if grid.has_clusters:
        out.append(LeftOut("cores_per_cluster", str(grid.cores_per_cluster), f"{layout}, an L2 a core"))
    if grid.vendor:
        out.append(LeftOut("cpu_vendor", grid.vendor, VNG_CPU))
    if grid.cpu_model:
        family, model = grid.cpu_model
        out.append(LeftOut("cpu_model", _flow({"family": family, "model": model}), VNG_CPU))
    return out


def _tiers_left_out(topo: Topology) -> list[LeftOut]:
    """Memory tiers: slow nodes are plain memory nodes under vng, and it has no HMAT."""
    tiers = topo.tiers
    out = []
    if tiers and tiers.slow_nodes:
        out.append(LeftOut("tiers.slow_nodes", _flow(tiers.slow_nodes),
                           "virtme-ng onlines no node through dax kmem: they are ordinary memory nodes"))  # fmt: skip
    if tiers and tiers.hmat:
        hmat = {"latency_ns": tiers.latency_ns, "bandwidth_mib": tiers.bandwidth_mib}
        out.append(LeftOut("hmat", _flow(hmat), "virtme-ng has no -numa hmat-lb or initiator="))
    return out


def left_out(topo: Topology) -> list[LeftOut]:
    """The topology's fields that :func:`vng_args`'s options leave out of the guest, in the spec's order."""
    return _grid_left_out(topo) + _tiers_left_out(topo)
