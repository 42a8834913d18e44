"""The levels below and above a node: packages, LLCs (dies), clusters (a shared L2), cores and threads.

A topology without these levels keeps numalab's first rule, one package and one LLC per node
(``lab.vm.qemu.qemu_argv.smp_layout``). One with them is a uniform grid, as QEMU's ``-smp`` is::

    packages x dies_per_package x clusters_per_die x cores_per_cluster x threads

numbered as QEMU numbers x86 vCPUs (thread fastest, then core, cluster, die, package), with the CPU
nodes laid over it in id order, each holding ``llcs_per_node`` whole dies. So a package may hold
several nodes (Intel SNC, AMD NPS), and a node several LLCs (AMD's CCXs, Sapphire Rapids' tiles). An
LLC is a die because QEMU's x86 CPUID shares the L3 among a die's CPUs.

An uneven machine gives its nodes different numbers of LLCs (a node's own ``llcs:``; AMD parts with a CCD
fused off, a socket split into unequal nodes): ``-numa cpu`` gives a node any set of whole dies, so that
QEMU can boot, as long as every LLC has the same cores and every package the same dies (``-smp`` is one
grid) and no node spans two packages; what it cannot is a one-line error naming the field.

Sub-NUMA clustering is modelled with one die per node: on a real SNC machine CPUID's L3 spans the
package, and the kernel cuts it at the node (``match_llc``'s SNC exception, Intel models only), so the
guest's sched domains are those of a die per node under any CPU model.

Pure data and arithmetic; the spec (``lab.topology.model.spec``) builds it, the QEMU argv
(``lab.vm.qemu.qemu_argv``) and the kernel's predicted view (``lab.topology.predictions.cpu_view``) read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.errors import LabError

VENDORS = ("intel", "amd")
CPUID_VENDOR_IDS = {"intel": "GenuineIntel", "amd": "AuthenticAMD"}  # what CPUID leaf 0 says: /proc/cpuinfo vendor_id
# The kernel reads the extended model bits (CPUID.1:EAX[19:16]) from family 6 on (x86_model()): below it a model
# above 15 would be read as its low 4 bits. QEMU's qemu64 takes family 0-270 and model 0-255 (7.2 and 10.0.2).
EXTENDED_MODEL_FAMILY = 6


@dataclass(frozen=True)
class CpuGrid:
    packages: int
    dies_per_package: int  # LLCs per package
    clusters_per_die: int  # 1: no cluster level (each core has its own L2)
    cores_per_cluster: int
    threads: int
    llcs_per_node: int  # every CPU node's LLCs; 0 on an uneven grid (node_llcs)
    vendor: str = ""  # "", "intel" or "amd": the CPUID vendor the guest is shown ("": QEMU's default)
    node_llcs: tuple[int, ...] = ()  # an uneven grid's LLCs (dies) of each CPU node, in id order; () when uniform
    cpu_model: tuple[int, int] | None = None  # (family, model) the guest's CPUID shows; None: qemu64's own

    @property
    def cpu_model_text(self) -> str:
        """``family 6 model 173 (0xad)``, "" when the spec gives none."""
        if self.cpu_model is None:
            return ""
        family, model = self.cpu_model
        return f"family {family} model {model} ({model:#x})"

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
    def uneven(self) -> bool:
        """Whether CPU nodes hold different numbers of LLCs."""
        return bool(self.node_llcs)

    @property
    def llc_counts(self) -> tuple[int, ...]:
        """The LLCs (dies) of each CPU node, in id order."""
        if self.node_llcs:
            return self.node_llcs
        return (self.llcs_per_node,) * (self.packages * self.dies_per_package // self.llcs_per_node)

    def package_nodes(self) -> tuple[int, ...]:
        """The CPU nodes of each package (nodes are laid over the dies in id order, none across two packages)."""
        out = [0] * self.packages
        first_die = 0
        for llcs in self.llc_counts:
            out[first_die // self.dies_per_package] += 1
            first_die += llcs
        return tuple(out)

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
        """A run manifest's ``topology.cpu_grid``: an uneven grid says ``node_llcs`` where a uniform one says
        ``llcs_per_node`` (a uniform grid's dict is what it was before uneven grids)."""
        llcs = {"node_llcs": list(self.node_llcs)} if self.node_llcs else {"llcs_per_node": self.llcs_per_node}
        return (
            {
                "packages": self.packages,
                "dies_per_package": self.dies_per_package,
                "clusters_per_die": self.clusters_per_die,
                "cores_per_cluster": self.cores_per_cluster,
                "threads": self.threads,
            }
            | llcs
            | ({"vendor": self.vendor} if self.vendor else {})
            | ({"cpu_model": {"family": self.cpu_model[0], "model": self.cpu_model[1]}} if self.cpu_model else {})
        )


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
        llcs_per_node=d.get("llcs_per_node", 0),
        vendor=d.get("vendor", ""),
        node_llcs=tuple(d.get("node_llcs", ())),
        cpu_model=_model_of(d.get("cpu_model")),
    )


def _model_of(d: dict | None) -> tuple[int, int] | None:
    """A ``cpu_model`` mapping (a spec's, checked by the schema, or a manifest's) -> (family, model)."""
    return (int(d["family"]), int(d["model"])) if d else None


def check_cpu_model(vendor: str | None, cpu_model: dict | None) -> tuple[int, int] | None:
    """A spec's ``cpu_model`` (the schema has checked its fields' types and ranges) against its vendor, or a
    one-line LabError naming the field."""
    model = _model_of(cpu_model)
    if model is None:
        return None
    if vendor is None:
        raise LabError(
            f"cpu_model: family {model[0]} model {model[1]} is a vendor's number; say whose with cpu_vendor: "
            f"{' or '.join(VENDORS)}"
        )
    if model[1] > 15 and model[0] < EXTENDED_MODEL_FAMILY:
        raise LabError(
            f"cpu_model.model: {model[1]} needs family {EXTENDED_MODEL_FAMILY} or later (the kernel reads a model's "
            f"extended bits only from family 6 on: family {model[0]} would show model {model[1] & 15})"
        )
    return model


def _node_llcs(node_cpus: list[int], llcs_per_node: int | None, node_llcs: list[int | None] | None) -> list[int]:
    """Each node's LLCs (0 for a CPU-less one): its own ``llcs:``, else ``llcs_per_node``, else 1."""
    given = node_llcs or [None] * len(node_cpus)
    out = []
    for i, (cpus, llcs) in enumerate(zip(node_cpus, given, strict=True)):
        if llcs is not None and cpus == 0:
            raise LabError(f"nodes[{i}].llcs: node {i} has no CPUs, so no LLC")
        out.append(0 if cpus == 0 else llcs if llcs is not None else llcs_per_node or 1)
    return out


def _llc_size(node_cpus: list[int], llcs: list[int], threads: int, per_node: bool) -> int:
    """The CPUs of every LLC, the same in every node (QEMU's dies are all alike), or a one-line LabError."""
    size = 0
    first = -1
    for i, (cpus, n) in enumerate(zip(node_cpus, llcs)):
        if not cpus:
            continue
        if cpus % (n * threads):
            where = (
                f"nodes[{i}].llcs: node {i}'s {cpus} CPUs do" if per_node else f"llcs_per_node: {cpus} CPUs a node do"
            )
            raise LabError(f"{where} not split into {n} LLCs of whole cores ({threads} thread(s) a core)")
        if first < 0:
            size, first = cpus // n, i
        elif cpus // n != size:
            field, fix = (f"nodes[{i}].llcs", "") if per_node else ("nodes", "; give each node its llcs:")
            raise LabError(
                f"{field}: node {i}'s LLCs would be {cpus // n} CPUs ({cpus} in {n}) and node {first}'s {size} "
                f"({node_cpus[first]} in {llcs[first]}); QEMU's -smp is a uniform grid (every die, an LLC, has as "
                f"many cores), so every node's CPUs / LLCs must be the same{fix}"
            )
    return size


def _package_choices(counts: list[int]) -> list[int]:
    """The package counts that split these nodes' LLCs evenly with no node across two packages."""
    total = sum(counts)
    return [p for p in range(1, total + 1) if total % p == 0 and not _spanning(counts, total // p)]


def _spanning(counts: list[int], per_package: int) -> tuple[int, int, int] | None:
    """The first node (its index among the CPU nodes) whose dies would be in two packages of ``per_package``
    dies, with the first and last of those packages; None if there is none."""
    first = 0
    for k, n in enumerate(counts):
        a, b = first // per_package, (first + n - 1) // per_package
        if a != b:
            return k, a, b
        first += n
    return None


def _packages(cpu_nodes: list[int], counts: list[int], packages: int | None) -> int:
    """The number of packages, checked: each holds the same number of dies (QEMU) and whole nodes."""
    total = sum(counts)
    if len(set(counts)) == 1 and (packages is None or len(counts) % packages == 0):
        return packages if packages is not None else len(counts)
    choices = _package_choices(counts)
    if packages is None:
        raise LabError(
            f"packages: nodes of {' and '.join(map(str, sorted(set(counts), reverse=True)))} LLCs cannot each be a "
            f"package (QEMU gives every package the same number of dies); say how many packages share the {total} "
            f"LLCs (packages: {' or '.join(map(str, choices))})"
        )
    if len(set(counts)) == 1:
        raise LabError(f"packages: {len(counts)} CPU nodes do not split evenly into {packages} packages")
    if total % packages:
        raise LabError(
            f"packages: {total} LLCs do not split evenly into {packages} packages (QEMU's -smp gives every package "
            f"the same number of dies); {' or '.join(map(str, choices))} would"
        )
    span = _spanning(counts, total // packages)
    if span is not None:
        k, a, b = span
        raise LabError(
            f"packages: node {cpu_nodes[k]}'s LLCs would be in packages {a} and {b} ({total // packages} LLC(s) a "
            f"package, nodes laid over them in id order); a node cannot span two packages; "
            f"{' or '.join(map(str, choices))} would do"
        )
    return packages


def build_grid(
    node_cpus: list[int],
    threads: int,
    packages: int | None,
    llcs_per_node: int | None,
    cores_per_cluster: int | None,
    vendor: str | None,
    node_llcs: list[int | None] | None = None,
    cpu_model: dict | None = None,
) -> CpuGrid:
    """The grid a spec's ``packages``, ``llcs_per_node`` (or each node's ``llcs``), ``cores_per_cluster`` and
    ``cpu_vendor`` describe over the CPU counts of its nodes (CPU-less nodes left out), or a one-line LabError
    naming the field. ``node_llcs``: each node's own ``llcs:`` (None where it has none); ``cpu_model``: the spec's
    ``{family, model}``."""
    if not any(c > 0 for c in node_cpus):
        raise LabError("cpus: at least one node must have CPUs")
    llcs = _node_llcs(node_cpus, llcs_per_node, node_llcs)
    per_node = node_llcs is not None and any(n is not None for n in node_llcs)
    size = _llc_size(node_cpus, llcs, threads, per_node)
    cpu_nodes = [i for i, c in enumerate(node_cpus) if c > 0]
    counts = [llcs[i] for i in cpu_nodes]
    packages = _packages(cpu_nodes, counts, packages)
    cores_per_llc = size // threads
    if cores_per_cluster is not None and cores_per_llc % cores_per_cluster:
        raise LabError(
            f"cores_per_cluster: {cores_per_llc} cores an LLC do not split into clusters of {cores_per_cluster}"
        )
    cluster = cores_per_cluster if cores_per_cluster is not None else cores_per_llc
    if vendor is not None and vendor not in VENDORS:
        raise LabError(f"cpu_vendor: {vendor!r} is not one of {', '.join(VENDORS)}")
    model = check_cpu_model(vendor, cpu_model)
    uneven = len(set(counts)) > 1
    return CpuGrid(
        packages=packages,
        dies_per_package=sum(counts) // packages,
        clusters_per_die=cores_per_llc // cluster,
        cores_per_cluster=cluster,
        threads=threads,
        llcs_per_node=0 if uneven else counts[0],
        vendor=vendor or "",
        node_llcs=tuple(counts) if uneven else (),
        cpu_model=model,
    )
