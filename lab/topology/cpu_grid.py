"""The levels below and above a node: packages, LLCs (dies), clusters (a shared L2), cores and threads.

A topology without these levels keeps numalab's first rule, one package and one LLC per node
(``lab.vm.qemu.qemu_argv.smp_layout``). One with them is a uniform grid, as QEMU's ``-smp`` is::

    packages x dies_per_package x clusters_per_die x cores_per_cluster x threads

numbered as QEMU numbers x86 vCPUs (thread fastest, then core, cluster, die, package), with the CPU
nodes laid over it in id order, each holding ``llcs_per_node`` whole dies. So a package may hold
several nodes (Intel SNC, AMD NPS: ``nodes_per_package`` > 1), and a node several LLCs (AMD's CCXs,
Sapphire Rapids' tiles). An LLC is a die because QEMU's x86 CPUID shares the L3 among a die's CPUs.

Sub-NUMA clustering is modelled with one die per node: on a real SNC machine CPUID's L3 spans the
package, and the kernel cuts it at the node (``match_llc``'s SNC exception, Intel models only), so the
guest's sched domains are those of a die per node under any CPU model.

Pure data and arithmetic; the spec (``lab.topology.spec``) builds it, the QEMU argv
(``lab.vm.qemu.qemu_argv``) and the kernel's predicted view (``lab.topology.cpu_view``) read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.errors import LabError

VENDORS = ("intel", "amd")


@dataclass(frozen=True)
class CpuGrid:
    packages: int
    dies_per_package: int  # LLCs per package
    clusters_per_die: int  # 1: no cluster level (each core has its own L2)
    cores_per_cluster: int
    threads: int
    llcs_per_node: int
    vendor: str = ""  # "", "intel" or "amd": the CPUID vendor the guest is shown ("": QEMU's default)

    @property
    def cores_per_die(self) -> int:
        return self.clusters_per_die * self.cores_per_cluster

    @property
    def cpus_per_die(self) -> int:
        return self.cores_per_die * self.threads

    @property
    def cpus_per_package(self) -> int:
        return self.dies_per_package * self.cpus_per_die

    @property
    def total_cpus(self) -> int:
        return self.packages * self.cpus_per_package

    @property
    def nodes_per_package(self) -> int:
        return self.dies_per_package // self.llcs_per_node

    @property
    def has_clusters(self) -> bool:
        return self.clusters_per_die > 1

    def place(self, vcpu: int) -> dict[str, int]:
        """vCPU index -> its ids: package, die (within the package), cluster (within the die), core (within
        the cluster) and thread, in QEMU's x86 cpu-index order."""
        t = self.threads
        return {
            "package": vcpu // self.cpus_per_package,
            "die": vcpu // self.cpus_per_die % self.dies_per_package,
            "cluster": vcpu // (t * self.cores_per_cluster) % self.clusters_per_die,
            "core": vcpu // t % self.cores_per_cluster,
            "thread": vcpu % t,
        }

    def to_dict(self) -> dict:
        return {
            "packages": self.packages,
            "dies_per_package": self.dies_per_package,
            "clusters_per_die": self.clusters_per_die,
            "cores_per_cluster": self.cores_per_cluster,
            "threads": self.threads,
            "llcs_per_node": self.llcs_per_node,
        } | ({"vendor": self.vendor} if self.vendor else {})


def grid_from_dict(d: dict | None) -> CpuGrid | None:
    """Inverse of :meth:`CpuGrid.to_dict` (a run manifest's ``topology.cpu_grid``)."""
    if not d:
        return None
    return CpuGrid(
        packages=d["packages"],
        dies_per_package=d["dies_per_package"],
        clusters_per_die=d["clusters_per_die"],
        cores_per_cluster=d["cores_per_cluster"],
        threads=d["threads"],
        llcs_per_node=d["llcs_per_node"],
        vendor=d.get("vendor", ""),
    )


def build_grid(
    node_cpus: list[int],
    threads: int,
    packages: int | None,
    llcs_per_node: int | None,
    cores_per_cluster: int | None,
    vendor: str | None,
) -> CpuGrid:
    """The grid a spec's ``packages``, ``llcs_per_node``, ``cores_per_cluster`` and ``cpu_vendor`` describe over
    the CPU counts of its nodes (CPU-less nodes left out), or a one-line LabError naming the field."""
    counts = [c for c in node_cpus if c > 0]
    if not counts:
        raise LabError("cpus: at least one node must have CPUs")
    if len(set(counts)) > 1:
        raise LabError(
            f"nodes: packages, llcs_per_node and cores_per_cluster need every CPU node to have the same CPU count "
            f"(QEMU's -smp is a uniform grid); got {sorted(set(counts))}"
        )
    per_node = counts[0]
    n_cpu_nodes = len(counts)
    packages = packages if packages is not None else n_cpu_nodes
    if n_cpu_nodes % packages:
        raise LabError(f"packages: {n_cpu_nodes} CPU nodes do not split evenly into {packages} packages")
    llcs = llcs_per_node if llcs_per_node is not None else 1
    if per_node % (llcs * threads):
        raise LabError(
            f"llcs_per_node: {per_node} CPUs a node do not split into {llcs} LLCs of whole cores "
            f"({threads} thread(s) a core)"
        )
    cores_per_llc = per_node // (llcs * threads)
    if cores_per_cluster is not None and cores_per_llc % cores_per_cluster:
        raise LabError(
            f"cores_per_cluster: {cores_per_llc} cores an LLC do not split into clusters of {cores_per_cluster}"
        )
    cluster = cores_per_cluster if cores_per_cluster is not None else cores_per_llc
    if vendor is not None and vendor not in VENDORS:
        raise LabError(f"cpu_vendor: {vendor!r} is not one of {', '.join(VENDORS)}")
    return CpuGrid(
        packages=packages,
        dies_per_package=n_cpu_nodes // packages * llcs,
        clusters_per_die=cores_per_llc // cluster,
        cores_per_cluster=cluster,
        threads=threads,
        llcs_per_node=llcs,
        vendor=vendor or "",
    )
