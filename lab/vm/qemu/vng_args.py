"""virtme-ng options for a topology: ``vng $(numalab topo vng-args ring-4) -r bzImage --exec ...``.

virtme-ng (1.38 on) builds a NUMA guest from ``--numa MEM[,cpus=A-B]`` (one per
node, in node order; ``0`` for a memoryless node, no ``cpus=`` for a CPU-less
one), ``--numa-distance SRC,DST=VAL``, ``--cpus`` (passed to QEMU's ``-smp`` as
it is, so the socket/core/thread layout goes with it) and ``--pin LIST`` (vCPU
i on the i-th CPU of LIST, over QMP). What it has no option for is said in the
notes: it backs each node with memfd without a host node, so guest memory is
not bound to host nodes, and a vCPU pinned to a set of CPUs (numalab's
``--pinning node``) cannot be expressed.
"""

from __future__ import annotations

from lab.cpulist import format_cpulist
from lab.placement.pinning import Placement
from lab.topology.model import Topology
from lab.vm.qemu.qemu_argv import smp_layout


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
