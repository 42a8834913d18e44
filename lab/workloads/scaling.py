"""What the built-ins' scale.py hooks share: memory a workload may touch, split into parts, and perf bench
numa mem's processes, threads and memory (seed 000's lines)."""

from __future__ import annotations

from lab.topology.model.topology import Topology
from lab.workloads.workload_type import MEM_SHARE


def share_mib(topo: Topology, parts: int, cap: int) -> int:
    """MiB of each of ``parts``: the guest memory a workload may touch (MEM_SHARE of it: TCG is slow, and the
    guest kernel, initramfs and trace buffers need the rest), split ``parts`` ways, at most ``cap``, at least 8."""
    return max(8, min(cap, int(topo.total_memory_mib * MEM_SHARE / max(parts, 1))))


def cpu_nodes(topo: Topology) -> int:
    """The nodes with CPUs (at least 1)."""
    return max(1, len(topo.cpu_nodes))


def perf_numa_mem(topo: Topology, procs: int, threads: int, per_thread_mem: bool) -> dict[str, int]:
    """Seed 000's ``perf bench numa mem -p P -t T -P MB -T MB``: ``procs`` processes of ``threads`` threads
    (each at least 1), the memory shared by each process's threads or (``per_thread_mem``) a thread's own."""
    p, t = max(1, procs), max(1, threads)
    pm, tm = (0, share_mib(topo, p * t, 32)) if per_thread_mem else (share_mib(topo, p, 3072), 0)
    return {"procs": p, "threads": t, "process_mib": pm, "thread_mib": tm}
