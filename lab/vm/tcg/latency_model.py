"""Remote memory that costs (``numalab run --remote-latency slit``): the model and its plugin arguments.

Under TCG every guest node is the same host memory, so a remote access costs what
a local one does. The access-matrix plugin (``images/plugins/access_matrix.c``)
can charge for it: it keeps a per-vCPU model of a cache (``ways``-way set-associative, least
recently used out, ``lines`` lines of 64 bytes: 256 KiB, 8 ways by default), looks up a fixed
pseudo-random ``1/sample`` of its sets (set sampling: every access to those sets
is looked up, so their hits and misses are exact), and charges each miss to a
node remote from the vCPU's own ``(ratio - 1) * local_ns`` nanoseconds, times
``sample``. The charge is paid by holding the vCPU: its thread spins on its own
CPU clock once its debt passes ``chunk_ns``.

The ratio of CPU node i to memory node j is the SLIT's ``distance[i][j] / 10`` (``slit``), or the
topology spec's own ``latency_ratio:`` matrix (``table``), for machines whose SLIT is not a latency ratio.
``local_ns`` (L) stands for a local miss; a remote miss then costs ``ratio * L``
in all, if a local miss in the emulated machine costs L (docs/throughput.md:
what L is here and how it was calibrated).

Under ``--clock virtual`` (guest time counts instructions: lab.vm.tcg.guest_clock) a miss
costs nothing by itself, so every miss is charged, a local one L and a remote one
``ratio * L``, and the charge goes to the guest's clock (``lat_clock=virtual``: a
QEMU with numalab's patch, lab.host.qemu_charge) in 1 µs pieces instead of holding the
vCPU. L is then guest time: 100 ns, a miss as long as 100 instructions at the
modelled 1 G instructions per second.

Memory-level parallelism: a miss that continues a stream (the line next to it was among the vCPU's last few
lines touched: a copy, a memset, a page migration's copy after its first line) is charged the line's transfer
at the pair's bandwidth instead of the latency: ``64 B / bandwidth[i][j]``, with ``bandwidth[i][j] =
local_gbs / bandwidth_ratio[i][j]``. The bandwidth ratio is the topology spec's ``bandwidth_ratio:``, or the
latency ratio in use. Under the host's clock, as for latency, only the extra over a local line is charged.
``local_gbs`` 0 turns the detector off (every miss charged its latency, the model before it).

Bandwidth contention (under ``--clock virtual``, with a QEMU that lets the plugin read a vCPU's own guest time:
numalab's patch images/qemu/0008): a node's memory bandwidth, by default its local pair's stream bandwidth, is
shared by the vCPUs that stream from it in the same stretch of guest time (``share_window_ns``). A stream miss
is charged at the larger of its pair's price and the line at the vCPU's part of the node's total: what the
others' streams left of it in their last window, and never less than an equal share (docs/throughput.md).

Coherence (``coherence``; off by default, ``--coherence on``; exact, in the guest's order, under ``--clock
virtual``): a line written by a vCPU of one node and then read or written by a vCPU of another node is a transfer
between the two nodes, charged the pair's miss cost (``cost_ps``: ratio * L of guest time on the virtual clock); a
line only read by many stays shared, a private line costs nothing. The plugin keeps a directory of every line of
guest memory (not sampled): the node that wrote it last and the nodes that hold a current copy
(docs/throughput.md). Each LLC holds ``coherence_mib`` (32 MiB, one LLC of a current server's node), and a node's
caches are its LLCs' total (the topology's LLCs a node: several on the machines of 2026): a
line its owner has not brought back since it brought in that much more has left them, memory holds it, and the
next node to use it is charged no transfer (only the miss model's memory access).

On a machine with several LLCs a node (genoa-nps2, spr-2s-2llc, nps2-uneven-llc), a line's owner is an LLC instead
(``vcpu_llcs``; the plugin's ``vllc=``): a line one LLC wrote and another LLC of the same node then uses is a
transfer charged ``llc_transfer_ns`` (the spec's ``llc: transfer_ns:``, default 80 ns of guest time), by an LLC of
another node the pair's miss cost as before; each LLC holds ``coherence_mib`` (the spec's ``llc: size_mib:``,
default 32; --coherence-mib wins). A move inside one LLC stays free. A machine of one LLC a node is modelled by
node, exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.topology.model.topology import DEFAULT_LLC_MIB, DEFAULT_LLC_TRANSFER_NS, LOCAL_DISTANCE, Topology
from lab.topology.predictions.cpu_view import vcpu_llcs

REMOTE_LATENCY = ("off", "slit", "table")
LINE_BYTES = 64  # the plugin's line (a constant there: the tag is the address >> 6)
DEFAULT_LINES = 4096  # 256 KiB per vCPU
DEFAULT_SAMPLE = 16  # 1 set in 16 modelled
# The modelled cache's ways. One (direct-mapped, as before 2026-11-29) let the guest's address-space layout decide
# a run's misses: lines a pass touches that share a set (forked workers' buffers at one virtual address, a buffer and
# whatever else the loop touches) evict each other on every pass. Issue 66's K1 under the shared clock came out 1.953
# with seed 0's layout and 1.000 with seeds 1-3 or norandmaps (docs/throughput.md). A current core's L2 has 8 to 16.
DEFAULT_WAYS = 8
DEFAULT_CHUNK_NS = 20000
# L: a local miss in the emulated machine. The default is about what a local step of the latency-matrix
# pointer chase took here under TCG with the plugin loaded, by its least disturbed rounds (156-313 ns in
# four runs: QEMU 7.2, an AMD EPYC host shared with other engineers' VMs; docs/throughput.md), so that a
# guest's remote miss costs about ratio x its local one. Recalibrate with --remote-latency-ns elsewhere.
DEFAULT_LOCAL_NS = 200.0
DEFAULT_LOCAL_NS_VIRTUAL = 100.0  # under --clock virtual: a miss as long as 100 instructions
VIRTUAL_CHUNK_NS = 1000  # charging the clock costs no host time: small pieces keep guest timers close
MAX_LOCAL_NS = 10000.0
# The local bandwidth a stream miss costs (GB/s, 1e9 bytes a second). Under --clock virtual: 10 GB/s, a
# line in 6.4 ns (L / 15.6), about one core's streaming bandwidth on a current server. Under the host's clock
# the local line costs what TCG takes, and only the remote extra is charged: 2 GB/s, about what numa01's
# memset streamed per vCPU here under plain TCG (docs/throughput.md), not calibrated further.
DEFAULT_LOCAL_GBS = 2.0
DEFAULT_LOCAL_GBS_VIRTUAL = 10.0
MAX_LOCAL_GBS = 10000.0
# The window of guest time in which a node's stream bytes are counted per vCPU (share_ns= in the plugin): more
# than a few hundred lines of a stream (so that a window's sampled bytes, 1 set in 16, make a usable rate), more
# than the quantum of parallel guest time (vCPUs that run a quantum apart must see each other: it is at least
# twice the quantum), and small against the guest's tick (under the one shared clock the vCPUs never run in the
# same guest time, and their windows meet only where one's turn ends and the next one's starts).
SHARE_WINDOW_NS = 5000
# A node's caches under the coherence model (coh_lines= in the plugin): one LLC of a current server's node (an AMD
# CCD's L3, a sub-NUMA cluster's share of an Intel L3). Without a limit, a line stayed its last writer's for ever,
# and two nodes sweeping one 358 MiB array (numa01) paid a transfer for nearly every line: 27.4-28.7 of ~30 s of
# guest time on ring-4 (docs/throughput.md).
DEFAULT_COHERENCE_MIB = DEFAULT_LLC_MIB
# The plugin's directory keeps a bit a current holder: at most this many owners (nodes, or LLCs on a machine of
# several a node).
MAX_COHERENCE_OWNERS = 24


def share_window_ns(quantum_ns: int) -> int:
    """The contention window for a run whose vCPUs may be ``quantum_ns`` of guest time apart."""
    return max(SHARE_WINDOW_NS, 2 * quantum_ns)


def default_local_ns(clock: str) -> float:
    """L when --remote-latency-ns is not given: the host clock's calibration, or the virtual clock's choice."""
    return DEFAULT_LOCAL_NS_VIRTUAL if clock == "virtual" else DEFAULT_LOCAL_NS


def default_local_gbs(clock: str) -> float:
    """The local stream bandwidth when --remote-bandwidth-gbs is not given."""
    return DEFAULT_LOCAL_GBS_VIRTUAL if clock == "virtual" else DEFAULT_LOCAL_GBS


def check_local_gbs(value: float) -> None:
    """--remote-bandwidth-gbs: 0 (no stream detection) or more than 0 and at most 10000 (one-line error)."""
    if not (value == 0 or 0 < value <= MAX_LOCAL_GBS):
        raise LabError(
            f"--remote-bandwidth-gbs: must be 0 (off) or more than 0 and at most {MAX_LOCAL_GBS:g}, got {value:g}"
        )


def check_local_ns(value: float) -> None:
    """--remote-latency-ns: more than 0 and at most 10 µs (one-line error)."""
    if not 0 < value <= MAX_LOCAL_NS:
        raise LabError(f"--remote-latency-ns: must be more than 0 and at most {MAX_LOCAL_NS:g}, got {value:g}")


@dataclass(frozen=True)
class LatencyModel:
    """What the plugin charges: per (CPU node, memory node) ratio, L, the modelled cache and the sampling."""

    ratios: tuple[tuple[float, ...], ...]  # [cpu node][memory node]
    local_ns: float
    vcpu_nodes: tuple[int, ...]  # vCPU index -> its node
    lines: int = DEFAULT_LINES
    sample: int = DEFAULT_SAMPLE
    ways: int = DEFAULT_WAYS
    chunk_ns: int = DEFAULT_CHUNK_NS
    source: str = "slit"
    clock: str = "host"  # host: hold the vCPU for (ratio - 1) * L; virtual: charge the guest's clock ratio * L
    local_gbs: float = 0.0  # a stream miss's local bandwidth, GB/s; 0: no stream detection
    bandwidth_ratios: tuple[tuple[float, ...], ...] | None = None  # [cpu][mem] local/remote bandwidth; None: ratios
    bandwidth_source: str = ""  # "bandwidth_ratio" (the spec's), or the latency ratios' source
    share_window_ns: int = 0  # a node's bandwidth shared by the vCPUs streaming it in this window; 0: not shared
    coherence: bool = False  # a line written on one node and then used on another: a transfer between the two
    coherence_mib: int = DEFAULT_COHERENCE_MIB  # each LLC's share of a node's caches: out of them, no transfer; 0: none
    node_llcs: tuple[int, ...] = ()  # each node's LLCs (the topology's; () or 0: one): a node's caches are their total
    # each vCPU's LLC (lab.topology.predictions.cpu_view.vcpu_llcs): with coherence on a machine of several LLCs a
    # node, a line's owner is an LLC; () (or one LLC a node): a node
    vcpu_llcs: tuple[int, ...] = ()
    llc_transfer_ns: float = DEFAULT_LLC_TRANSFER_NS  # a line moved between two LLCs of one node (guest time)

    @property
    def streams(self) -> bool:
        return self.local_gbs > 0

    @property
    def bw_ratios(self) -> tuple[tuple[float, ...], ...]:
        return self.bandwidth_ratios or self.ratios

    def line_ns(self, cpu_node: int, mem_node: int) -> float:
        """A line's transfer at the pair's bandwidth (``local_gbs / bandwidth_ratio``), in ns."""
        return LINE_BYTES * self.bw_ratios[cpu_node][mem_node] / self.local_gbs

    def stream_cost_ps(self, cpu_node: int, mem_node: int) -> int:
        """Picoseconds charged for one stream miss: the line's transfer at the pair's bandwidth on the virtual
        clock; on the host's, its extra over a local line's (which TCG already takes)."""
        if not self.streams:
            return 0
        extra = 0.0 if self.virtual else self.line_ns(cpu_node, cpu_node)
        return max(0, round((self.line_ns(cpu_node, mem_node) - extra) * 1000))

    @property
    def virtual(self) -> bool:
        return self.clock == "virtual"

    @property
    def from_workload(self) -> bool:
        """Whether the model starts at the workload's start (the plugin's ``arm=mark``: the guest init runs
        numalab-model-start just before the workload, and the boot runs uninstrumented), as it does under the
        virtual clock; under the host's clock it runs from the boot on."""
        return self.virtual

    @property
    def shared(self) -> bool:
        """Whether a node's stream bandwidth is shared in guest time (the virtual clock's, streams on)."""
        return self.share_window_ns > 0 and self.streams and self.virtual

    def node_gbs(self, node: int) -> float:
        """A node's total stream bandwidth, shared by the vCPUs streaming from it: its local pair's."""
        return self.local_gbs / self.bw_ratios[node][node]

    def node_line_ps(self, node: int) -> int:
        """Picoseconds a line at the node's total bandwidth (the plugin's node_bw=)."""
        return max(1, round(LINE_BYTES / self.node_gbs(node) * 1000))

    def cost_ps(self, cpu_node: int, mem_node: int) -> int:
        """Picoseconds charged for one miss of a ``cpu_node`` vCPU to ``mem_node``: (ratio - 1) * L on the host's
        clock (a miss under TCG already takes about L), ratio * L on the virtual one (where it takes none)."""
        extra = 0.0 if self.virtual else 1.0
        return max(0, round((self.ratios[cpu_node][mem_node] - extra) * self.local_ns * 1000))

    def transfer_ps(self, cpu_node: int, from_node: int) -> int:
        """Picoseconds charged for a line that ``from_node`` wrote and a vCPU of ``cpu_node`` then uses (coherence):
        the pair's miss cost; nothing within a node (between two LLCs of one: :meth:`llc_transfer_ps`)."""
        return self.cost_ps(cpu_node, from_node) if self.coherence and cpu_node != from_node else 0

    @property
    def llc_owners(self) -> bool:
        """Whether coherence follows lines by LLC: it is on, and some node has several LLCs."""
        return self.coherence and bool(self.vcpu_llcs) and any(self.node_llc_count(j) > 1 for j in self.nodes)

    @property
    def nodes(self) -> range:
        return range(len(self.ratios))

    def llc_transfer_ps(self, node: int) -> int:
        """Picoseconds charged for a line moved between two LLCs of ``node`` (coherence by LLC): the spec's
        transfer on the virtual clock; on the host's its extra over a local miss (which TCG already takes), so
        usually nothing; 0 on a node of one LLC or without LLC owners."""
        if not self.llc_owners or self.node_llc_count(node) < 2:
            return 0
        extra = 0.0 if self.virtual else self.local_ns
        return max(0, round((self.llc_transfer_ns - extra) * 1000))

    def plugin_args(self, output: Path) -> list[str]:
        """The plugin's latency arguments (KEY=VALUE, before ``,,`` quoting), counts going to ``output``."""
        args = [
            f"lat_out={output}",
            f"lines={self.lines}",
            f"ways={self.ways}",
            f"lat_sample={self.sample}",
            f"chunk_ns={self.chunk_ns}",
        ]
        if self.virtual:
            args += ["lat_clock=virtual", "arm=mark"]
        args += [f"vnode={first}:{last}:{node}" for first, last, node in _runs(self.vcpu_nodes)]
        n = len(self.ratios)
        args += [f"cost={i}:{j}:{c}" for i in range(n) for j in range(n) if (c := self.cost_ps(i, j))]
        if self.streams:
            args.append("stream=1")
            args += [f"bw={i}:{j}:{c}" for i in range(n) for j in range(n) if (c := self.stream_cost_ps(i, j))]
        if self.shared:
            args.append(f"share_ns={self.share_window_ns}")
            args += [f"node_bw={j}:{self.node_line_ps(j)}" for j in range(n)]
        if self.coherence:
            args += ["coherence=1", f"coh_lines={self.coherence_lines}"]
            if self.llc_owners:
                args += [f"vllc={first}:{last}:{llc}" for first, last, llc in _runs(self.vcpu_llcs)]
                args += [f"llc_cost={j}:{c}" for j in range(n) if (c := self.llc_transfer_ps(j))]
            else:
                lines = self.coherence_lines
                args += [f"coh_node={j}:{lines * k}" for j in range(n) if (k := self.node_llc_count(j)) > 1]
        return args

    @property
    def coherence_lines(self) -> int:
        """One LLC's lines: a node of one LLC's caches (the plugin's coh_lines=; 0: no limit)."""
        return self.coherence_mib * 1024 * 1024 // LINE_BYTES

    def node_llc_count(self, node: int) -> int:
        """The node's LLCs, at least one (a node without CPUs owns no line: its size does not matter)."""
        return max(1, self.node_llcs[node]) if node < len(self.node_llcs) else 1

    def node_cache_mib(self, node: int) -> int:
        """What the node's caches hold: its LLCs' total (0: no limit)."""
        return self.coherence_mib * self.node_llc_count(node)

    def to_dict(self) -> dict:
        n = range(len(self.ratios))
        charged = (
            "every miss charged ratio * L to the guest's clock"
            if self.virtual
            else ("remote misses charged (ratio - 1) * L, the vCPU held")
        )
        return {
            "model": f"per-vCPU {self.ways}-way set-associative line cache (LRU), set-sampled; {charged}",
            "clock": self.clock,
            "source": self.source,
            "ratios": [list(r) for r in self.ratios],
            "local_ns": self.local_ns,
            "line_bytes": LINE_BYTES,
            "lines": self.lines,
            "ways": self.ways,
            "cache_kib": self.lines * LINE_BYTES // 1024,
            "set_sample": self.sample,
            "chunk_ns": self.chunk_ns,
            "charge_ns": [[self.cost_ps(i, j) / 1000 for j in n] for i in n],
            "vcpu_nodes": list(self.vcpu_nodes),
            "starts": "at the workload's start (the boot is not modelled)" if self.from_workload else "at the boot",
            "streams": self.stream_dict(),
            "coherence": self.coherence_dict(),
        }

    def coherence_dict(self) -> dict:
        """Whether a line moving between nodes is charged, and what, for the manifest."""
        if not self.coherence:
            return {"modelled": False, "why": "off (--coherence on models it)"}
        n = range(len(self.ratios))
        by_llc = (
            {"llc_transfer_ns": [self.llc_transfer_ps(j) / 1000 if self.node_llc_count(j) > 1 else None for j in n],
             "vcpu_llcs": list(self.vcpu_llcs)} if self.llc_owners else {}
        )  # fmt: skip
        return {
            "modelled": True,
            "model": (
                "a directory of every line by LLC: a line another LLC wrote last, read or written by an LLC without a "
                "current copy, is a transfer charged the node's LLC-to-LLC cost within a node and the pair's miss cost "
                "between nodes, unless it has left the owner's caches (their size in lines brought in since); a line "
                "only read stays shared"
                if self.llc_owners
                else "a directory of every line by node: a line another node wrote last, read or written by a node "
                "without a current copy, is a transfer charged the pair's miss cost, unless it has left the owner's "
                "caches (their size in lines brought in since); a line only read stays shared"
            ),
            "transfer_ns": [[self.transfer_ps(i, j) / 1000 for j in n] for i in n],
            "llc_mib": self.coherence_mib or None,  # None: no limit
            "node_cache_mib": [self.node_cache_mib(j) or None for j in n],  # each node's LLCs' total
            # a line's owner: "llc" on a machine of several LLCs a node (a move between two LLCs of one node charged
            # llc_transfer_ns, per node: None on a node of one LLC), else "node"
            "owners": "llc" if self.llc_owners else "node",
            **by_llc,
        }

    def stream_dict(self) -> dict:
        """The stream model for the manifest: off, or its bandwidths and what a stream miss is charged."""
        if not self.streams:
            return {"detector": "off", "local_gbs": 0.0}
        n = range(len(self.ratios))
        return {
            "detector": "a miss whose neighbouring line is among the vCPU's last 8 lines touched",
            "local_gbs": self.local_gbs,
            "bandwidth_source": self.bandwidth_source or self.source,
            "bandwidth_ratios": [list(r) for r in self.bw_ratios],
            "bandwidth_gbs": [[round(self.local_gbs / self.bw_ratios[i][j], 4) for j in n] for i in n],
            "charge_ns": [[self.stream_cost_ps(i, j) / 1000 for j in n] for i in n],
            "contention": self.contention_dict(),
        }

    def contention_dict(self) -> dict:
        """How a node's bandwidth is shared by concurrent streams, for the manifest."""
        if not self.shared:
            if not self.streams:
                why = "no streams (--remote-bandwidth-gbs 0)"
            else:
                why = "not modelled under the host's clock" if not self.virtual else "off"
            return {"shared": False, "why": why}
        n = range(len(self.ratios))
        return {
            "shared": True,
            "model": "a stream miss costs the line at the larger of its pair's price and the vCPU's part of its "
            "node's total: what the other vCPUs streaming from the node in the window left of it, at least an "
            "equal share",
            "window_ns": self.share_window_ns,
            "node_gbs": [round(self.node_gbs(j), 4) for j in n],
        }


MAX_COHERENCE_MIB = 65536  # 64 GiB an owner: the plugin counts an owner's lines in 32 bits (coh_lines < 2^31)


def check_coherence_mib(value: int) -> None:
    """--coherence-mib: 0 (no limit) to MAX_COHERENCE_MIB, a whole number; a one-line error otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COHERENCE_MIB:
        raise LabError(f"--coherence-mib: {value!r} is not a whole number of MiB from 0 (no limit) to "
                       f"{MAX_COHERENCE_MIB}")  # fmt: skip


def _runs(values: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """Runs of equal values: (first index, last index, value)."""
    out: list[tuple[int, int, int]] = []
    for i, v in enumerate(values):
        if out and out[-1][2] == v and out[-1][1] == i - 1:
            out[-1] = (out[-1][0], i, v)
        else:
            out.append((i, i, v))
    return out


def slit_ratios(topo: Topology) -> tuple[tuple[float, ...], ...]:
    """distance / 10 for every (CPU node, memory node)."""
    return tuple(tuple(d / LOCAL_DISTANCE for d in row) for row in topo.distances)


def model_for(
    topo: Topology,
    mode: str,
    local_ns: float = DEFAULT_LOCAL_NS,
    clock: str = "host",
    local_gbs: float = 0.0,
    share_window: int = 0,
    coherence: bool = False,
    coherence_mib: int | None = None,
) -> LatencyModel | None:
    """The model ``--remote-latency mode`` asks for on ``topo`` under ``--clock clock`` (None for off), stream
    misses at ``local_gbs`` (0: none) over the spec's ``bandwidth_ratio:`` or else the latency ratios, a node's
    stream bandwidth shared in windows of ``share_window`` ns of guest time (0: not shared), lines moving between
    nodes charged (``coherence``; off by default), each LLC ``coherence_mib`` (0: no limit; None: the spec's
    ``llc: size_mib:``, else 32), lines moving between two LLCs of one node charged the spec's ``llc: transfer_ns:``."""
    if mode not in REMOTE_LATENCY:
        raise LabError(f"--remote-latency: {mode!r} is not one of {', '.join(REMOTE_LATENCY)}")
    if mode == "off":
        return None
    check_local_ns(local_ns)
    check_local_gbs(local_gbs)
    if coherence_mib is None:
        coherence_mib = topo.llc_costs.size
    check_coherence_mib(coherence_mib)
    llcs = tuple(topo.node_llcs())  # (by LLC on a node of several, so the plugin's 32-bit count is one LLC's)
    vcpu_nodes = tuple(n for n, cpus in enumerate(topo.node_cpus()) for _ in cpus)
    owners = vcpu_llcs(topo) if coherence and max(llcs, default=1) > 1 else ()
    if len(set(owners)) > MAX_COHERENCE_OWNERS:
        raise LabError(f"--coherence on: {topo.name} has {len(set(owners))} LLCs; the model follows lines among at "
                       f"most {MAX_COHERENCE_OWNERS}")  # fmt: skip
    if coherence and not owners and len(llcs) > MAX_COHERENCE_OWNERS:
        raise LabError(f"--coherence on: {topo.name} has {len(llcs)} nodes; the model follows lines among at most "
                       f"{MAX_COHERENCE_OWNERS}")  # fmt: skip
    if mode == "table":
        if topo.latency_ratio is None:
            raise LabError(f"--remote-latency table: topology {topo.name} has no latency_ratio: matrix (give one in "
                           "its spec, or use --remote-latency slit)")  # fmt: skip
        ratios, source = topo.latency_ratio, "latency_ratio"
    else:
        ratios, source = slit_ratios(topo), "slit"
    chunk = VIRTUAL_CHUNK_NS if clock == "virtual" else DEFAULT_CHUNK_NS
    bw, bw_source = (topo.bandwidth_ratio, "bandwidth_ratio") if topo.bandwidth_ratio else (None, source)
    return LatencyModel(ratios, local_ns, vcpu_nodes, chunk_ns=chunk, source=source, clock=clock,
                        local_gbs=local_gbs, bandwidth_ratios=bw, bandwidth_source=bw_source,
                        share_window_ns=share_window if clock == "virtual" and local_gbs > 0 else 0,
                        coherence=coherence, coherence_mib=coherence_mib,
                        node_llcs=llcs, vcpu_llcs=owners, llc_transfer_ns=topo.llc_costs.transfer)  # fmt: skip
