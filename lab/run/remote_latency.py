"""The memory charge (``numalab run --remote-latency slit``, with ``--coherence on`` its coherence model), one
instrument of the run (lab.run.instrument): the plugin charges the modelled misses and transfers; its charges go
into the run record.

Its options are a piece of the run's (lab.vm.tcg.latency_options); the model, its coherence part included (by node
or by LLC), is lab.vm.tcg.latency_model's; the plugin is the access-matrix plugin (one ``-plugin``, its build and
address map; lab.vm.tcg.access_plugin). Coherence is a part of this instrument, not one of its own: its counts are
columns of the charge's file, its prices the charge's (ratio * L), its record the charge's ``model.coherence``.

Its counts go to ``remote-latency.txt``; the manifest's ``remote_latency`` has the model and, per vCPU, the misses
it saw by memory node and the nanoseconds it charged and held the vCPU for, over the whole run and over the
workload window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lab.analysis.access_counts import bracket, read_plugin_file
from lab.errors import LabError
from lab.record_files import REMOTE_LATENCY_JSON, REMOTE_LATENCY_TXT
from lab.run.access_matrix import STATUS
from lab.run.instrument import InstrumentResult, Plan, Window, keep_counts, record_section, section_lines
from lab.topology.model.topology import Topology
from lab.vm.qemu.emulator import Emulator
from lab.vm.tcg.access_plugin import AccessPlugin
from lab.vm.tcg.clock_options import ClockOptions
from lab.vm.tcg.latency_model import LatencyModel
from lab.vm.tcg.latency_options import LatencyOptions

KEY = "remote_latency"  # its section of the manifest
RAW_FILE = REMOTE_LATENCY_TXT
JSON_FILE = REMOTE_LATENCY_JSON
# A row's columns: these, then misses by node, then other misses, charged, held, io, streams, shared streams,
# coherence's transfers and their charge, and (version 6) those between two LLCs of one node and their charge
# (read_log's width: nodes + 10 in version 5, nodes + 12 in 6)
FIXED = ("looked_up", "hits")
# A correct address map leaves only MMIO and firmware accesses outside the nodes; a wrong one leaves
# whole nodes' misses uncharged. More than this share of the modelled misses fails the run.
OTHER_LIMIT = 0.01
# Host seconds a guest second may take under --clock virtual, times this with --coherence on: the plugin looks its
# directory up at every access (lab.run.request._virtual_scale).
COHERENCE_SCALE = 2.5


def check_request(accel: str | None, backend: str, clock: str, emulator: Emulator | None = None) -> None:
    """One-line errors for what --remote-latency cannot do (``accel`` None, ``emulator`` None: not known yet).
    Under --clock virtual the charge goes to the guest's clock, which only a QEMU with numalab's patch can do
    (lab.host.qemu_charge): holding the vCPU does not advance an instruction-counting clock."""
    if accel is not None and accel != "tcg":
        raise LabError(f"--remote-latency: needs TCG (the plugin sees no access under {accel}); add --accel tcg")
    if backend != "qemu":
        raise LabError("--remote-latency: only with --backend qemu")
    if clock == "virtual" and emulator is not None and not emulator.charges_time:
        raise LabError(
            f"--remote-latency with --clock virtual: QEMU {emulator.short_version} ({emulator.binary}) cannot charge "
            "the guest's clock; build numalab's patched QEMU with make setup-qemu-charge, then add --qemu charge"
        )


def check_shared_bandwidth(clock: str, local_gbs: float, emulator: Emulator | None) -> None:
    """Under --clock virtual the stream model shares a node's bandwidth in guest time, for which the plugin reads
    each vCPU's own guest time: numalab's patch images/qemu/0008 (a build of an older series cannot)."""
    if clock == "virtual" and local_gbs > 0 and emulator is not None and not emulator.vcpu_clock:
        raise LabError(
            f"--remote-latency with --clock virtual: QEMU {emulator.short_version} ({emulator.binary}) cannot tell "
            "the plugin a vCPU's own guest time, which streams sharing a node's bandwidth need; rebuild numalab's "
            "QEMU with make setup-qemu-charge (images/qemu/0008), or add --remote-bandwidth-gbs 0 (no streams)"
        )


@dataclass(frozen=True)
class RemoteLatency:
    """The memory charge of a run: the plugin's latency model (its coherence part included)."""

    model: LatencyModel

    key = KEY

    @classmethod
    def asked(cls, options: LatencyOptions, clock: ClockOptions, topology: Topology) -> RemoteLatency | None:
        """The charge ``options`` ask for on ``topology`` under the guest clock's options (None: --remote-latency
        off); a one-line error for a model the machine cannot have (lab.vm.tcg.latency_model.model_for)."""
        model = options.model(topology, clock.clock, clock.quantum)
        return cls(model) if model is not None else None

    @property
    def from_workload(self) -> bool:
        return self.model.from_workload

    @property
    def host_time_scale(self) -> float:
        return COHERENCE_SCALE if self.model.coherence else 1.0

    def check(self, plan: Plan) -> None:
        check_request(plan.accel, plan.backend, plan.clock, plan.emulator)
        check_shared_bandwidth(plan.clock, self.model.local_gbs, plan.emulator)

    def plugin_args(self, workdir: Path) -> list[str]:
        return self.model.plugin_args(workdir / RAW_FILE)

    def collect(self, record_dir: Path, plugin: AccessPlugin, window: Window) -> InstrumentResult:
        return measure(record_dir, plugin.workdir / RAW_FILE, self.model, window.start_ns, window.end_ns)


MAGIC = "numalab-remote-latency "
VERSIONS = (5, 6)  # 6: the columns of transfers between LLCs of one node (earlier records are 5)


@dataclass
class LatencyLog:
    head: dict[str, int]
    vcpu_nodes: list[int]
    snaps: list[tuple[int, list[int]]] = field(default_factory=list)
    ended: bool = False
    version: int = 6
    vcpu_llcs: list[int] = field(default_factory=list)  # (version 6, coherence by LLC) each vCPU's LLC

    @property
    def width(self) -> int:
        return self.head["nodes"] + (12 if self.version >= 6 else 10)


def read_log(path: Path) -> LatencyLog:
    """The plugin's latency file; a missing or malformed one is a LabError naming it."""
    log = LatencyLog({}, [])
    try:
        with path.open() as f:
            first = f.readline().strip()
    except OSError:
        first = ""  # (read_plugin_file names the file and why)
    version = first.removeprefix(MAGIC)
    if first.startswith(MAGIC) and version.isdigit() and int(version) in VERSIONS:
        log.version = int(version)

    def header(words: list[str]) -> None:
        if words[0] == "vnode":
            log.vcpu_nodes.append(int(words[2]))
        elif words[0] == "vllc":
            log.vcpu_llcs.append(int(words[2]))
        elif words[0] not in ("cost", "bw", "node_bw", "coh_node", "llc_cost", "coh_llc"):
            log.head[words[0]] = int(words[1])

    log.snaps, log.ended = read_plugin_file(
        path, f"{MAGIC}{log.version}", "remote-latency", header, lambda: log.head["vcpus"] * log.width
    )
    return log


def _rows(log: LatencyLog, a: list[int], b: list[int]) -> list[dict]:
    """Per vCPU, the counts between two snapshots."""
    k, w = log.head["nodes"], log.width
    out = []
    for v in range(log.head["vcpus"]):
        d = [b[v * w + c] - a[v * w + c] for c in range(w)]
        out.append({
            "vcpu": v, "node": log.vcpu_nodes[v] if v < len(log.vcpu_nodes) else -1,
            "looked_up": d[0], "hits": d[1], "misses": d[2:2 + k], "other_misses": d[2 + k],
            "charged_ns": d[3 + k], "held_ns": d[4 + k], "io_accesses": d[5 + k], "stream_misses": d[6 + k],
            "shared_misses": d[7 + k], "transfers": d[8 + k], "transfer_ns": d[9 + k],
            "llc_transfers": d[10 + k] if w > 10 + k else 0, "llc_transfer_ns": d[11 + k] if w > 11 + k else 0,
        })  # fmt: skip
    return out


def _totals(rows: list[dict], sample: int) -> dict:
    misses = sum(sum(r["misses"]) for r in rows)
    remote = sum(m for r in rows for j, m in enumerate(r["misses"]) if j != r["node"])
    return {
        "modelled_misses": misses,
        "remote_miss_pct": round(100 * remote / misses, 2) if misses else None,
        # misses that continued a stream, charged at the pair's bandwidth (0 with the detector off)
        "stream_miss_pct": round(100 * sum(r["stream_misses"] for r in rows) / misses, 2) if misses else None,
        # stream misses charged the vCPU's part of a node's shared bandwidth, slower than the pair's
        "shared_miss_pct": round(100 * sum(r["shared_misses"] for r in rows) / misses, 2) if misses else None,
        "estimated_misses": misses * sample,  # set sampling: each modelled miss stands for `sample`
        "charged_s": round(sum(r["charged_ns"] for r in rows) / 1e9, 4),
        "held_s": round(sum(r["held_ns"] for r in rows) / 1e9, 4),
        # coherence: lines another node wrote, moved to this vCPU's node (every line, not sampled); their charge is
        # among charged_s
        "transfers": sum(r["transfers"] for r in rows),
        "transfer_s": round(sum(r["transfer_ns"] for r in rows) / 1e9, 6),
        # among them, lines moved between two LLCs of one node (coherence by LLC), and their charge
        "llc_transfers": sum(r["llc_transfers"] for r in rows),
        "llc_transfer_s": round(sum(r["llc_transfer_ns"] for r in rows) / 1e9, 6),
        "per_vcpu": rows,
    }


def summarize(log: LatencyLog, start_ns: int | None, end_ns: int | None) -> dict:
    """Whole run (first to last snapshot) and, with both stamps, the workload window (the last snapshot at or
    before the start to the first at or after the end)."""
    sample = log.head.get("lat_sample", 1)
    first, last = log.snaps[0][1], log.snaps[-1][1]
    whole = _totals(_rows(log, first, last), sample)
    out: dict = {"complete": log.ended, "whole_run": whole}
    # numalab's QEMU (images/qemu/0005) passes the plugin a vCPU's changes of line only: looked_up and hits
    # then count those, not every access (misses and charges are the same)
    out["line_changes_only"] = bool(log.head.get("line_cb", 0))
    out["coherence"] = bool(log.head.get("coherence", 0))
    # arm=mark: the model started at the workload (numalab-model-start's instruction), the boot uninstrumented
    out["from_workload"] = bool(log.head.get("arm_mark", 0))
    other = sum(r["other_misses"] for r in whole["per_vcpu"])
    seen = other + whole["modelled_misses"]
    out["other_share"] = round(other / seen, 5) if seen else 0.0
    # MMIO (the LAPIC, the HPET...): not memory, neither cached nor charged; its share of the looked-up
    # accesses, for the record (an IPI-heavy workload such as pairs under TCG's xAPIC: ~5%)
    looked = sum(r["looked_up"] for r in whole["per_vcpu"])
    out["io_share"] = round(sum(r["io_accesses"] for r in whole["per_vcpu"]) / looked, 5) if looked else 0.0
    if start_ns is not None and end_ns is not None:
        i, j = bracket(log.snaps, start_ns, end_ns)
        a, b = log.snaps[i], log.snaps[j]
        out["window"] = _totals(_rows(log, a[1], b[1]), sample)
        out["window_s"] = [round((a[0] - start_ns) / 1e9, 3), round((b[0] - start_ns) / 1e9, 3)]
    return out


def measure(
    run_dir: Path, output: Path | None, model: LatencyModel, start_ns: int | None, end_ns: int | None
) -> InstrumentResult:
    """The plugin's latency counts -> remote-latency.{txt,json} and the manifest's section; a file that is
    missing or malformed, or misses that fell outside every node (a wrong address map), fail the run."""
    section: dict = {"model": model.to_dict()}
    keep_counts(output, run_dir / RAW_FILE)
    problem = None
    try:
        log = read_log(run_dir / RAW_FILE)
    except LabError as err:
        problem = f"remote latency: {err}"
    else:
        section |= summarize(log, start_ns, end_ns)
        looked = sum(r["looked_up"] for r in section["whole_run"]["per_vcpu"])
        if section["from_workload"] and not looked and section["complete"]:
            problem = (
                "remote latency: the model never started (no vCPU executed numalab-model-start's mark "
                "before the workload): nothing was charged"
            )
        elif section["other_share"] > OTHER_LIMIT:
            problem = (
                f"remote latency: {100 * section['other_share']:.2f}% of the modelled misses were in no node's "
                "memory (the address map is wrong for this QEMU): remote accesses were not charged"
            )
    return record_section(run_dir, KEY, section, problem, STATUS, (RAW_FILE, JSON_FILE))


def summary_lines(manifest: dict) -> list[str]:
    """The run summary's remote-latency line (none without --remote-latency)."""

    def line(s: dict) -> str:
        part = s.get("window") or s.get("whole_run") or {}
        m = s["model"]
        llc = part.get("llc_transfers") or 0
        paid = "to the guest's clock" if m.get("clock") == "virtual" else "held"
        return (
            f"  remote latency ({m['source']}, L={m['local_ns']:g} ns): charged {part.get('charged_s')}s, {paid} "
            f"{part.get('held_s')}s; {part.get('remote_miss_pct')}% of modelled misses remote"
            + (f", {part['stream_miss_pct']}% streams" if part.get("stream_miss_pct") else "")
            + (f", {part['transfers'] - llc} line transfers between nodes" if part.get("transfers", 0) > llc else "")
            + (f", {llc} between LLCs of a node" if llc else "")
        )

    return section_lines(manifest, KEY, "remote latency", line)
