"""The machine an scx scheduler says it built, read from what it printed, against the one numalab built (issue 68).

The sched-ext/scx project's schedulers build their own view of the machine at start (``scx_utils::Topology``,
read from the guest's sysfs) and decide by it: bpfland's per-node idle masks, rusty's domains (one an LLC),
layered's and p2dq's LLC modes. A scheduler that sees another machine than the kernel's is a finding whatever the
workload does, so a run's record keeps what it said and how that compares with numalab's prediction.

What each prints at its default log level (1.1.x, read in its source; ``scheduler.out`` holds its output):

* scx_bpfland: ``NUMA nodes: N`` (nodes with a CPU), ``scx_bpfland VERSION SMT on|off`` and ``primary CPU domain
  = 0xMASK`` (its policy's choice, all CPUs with its default ``-m auto``: kept, and checked only to be CPUs the
  machine has; a mask is hex, most significant CPU first, in comma-separated 32-bit groups, as the kernel prints
  one);
* scx_rusty: ``NODE[nn] mask= MASK`` per node and `` DOM[nn] mask= MASK`` per domain, one domain an LLC;
* scx_layered: ``CPUs: online/possible=N/M nr_cores=C`` and ``Topology awareness not specified, selecting
  enabled|disabled based on hardware`` (disabled on one node of one LLC);
* scx_p2dq: ``Single LLC detected - disabling multi-LLC optimizations`` when it sees one LLC (after its
  ``Running scx_p2dq`` line);
* scx_lavd names no count of nodes or LLCs at its default level, and the kernel's examples nothing.

The prediction is the kernel's view (lab.topology.predictions.cpu_view): the CPU nodes and their CPUs, the LLCs
cut at the node (the kernel's MC level), the cores and SMT. Pure functions of text and a topology; the collector
(lab.run.collect) stores :func:`scheduler_topology`'s dict as the manifest's ``scheduler.topology``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lab.cpulist import format_cpulist
from lab.topology.model.topology import Topology
from lab.topology.predictions.cpu_view import vcpu_llcs
from lab.untrusted import strip_colours, term_safe

MAX_LINES = 20_000  # of scheduler.out read (a guest's file: bounded)
MAX_KEPT = 64  # lines kept in the record as the evidence
MAX_CPUS = 4096  # a mask wider than this is not a guest numalab builds: not read

_MASK = r"([0-9a-fA-F]{1,8}(?:,[0-9a-fA-F]{8}){0,127})"
_BPF_NODES = re.compile(r"\bNUMA nodes: (\d{1,4})\s*$")
_BPF_SMT = re.compile(r"\bscx_bpfland .{1,80} SMT (on|off)\s*$")
_BPF_PRIMARY = re.compile(r"\bprimary CPU domain = 0x" + _MASK + r"\s*$")
_RUSTY_NODE = re.compile(r"\bNODE\[(\d{1,4})\] mask= " + _MASK + r"\s*$")
_RUSTY_DOM = re.compile(r"\bDOM\[(\d{1,5})\] mask= " + _MASK + r"\s*$")
_LAYERED_CPUS = re.compile(r"\bCPUs: online/possible=(\d{1,5})/(\d{1,5}) nr_cores=(\d{1,5})\b")
_LAYERED_TOPO = re.compile(r"\bTopology awareness not specified, selecting (enabled|disabled) based on hardware")
_P2DQ_RUNNING = re.compile(r"\bRunning scx_p2dq\b")
_P2DQ_SINGLE = re.compile(r"\bSingle LLC detected\b")


def mask_cpus(mask: str) -> tuple[int, ...] | None:
    """The CPUs of a cpumask as scx_utils prints one (``ff,ffffffff``: hex, CPU 0 the least significant bit),
    None when it is not one or is wider than any guest's."""
    digits = mask.replace(",", "")
    if not digits or len(digits) * 4 > MAX_CPUS or not re.fullmatch(r"[0-9a-fA-F]+", digits):
        return None
    value = int(digits, 16)
    return tuple(i for i in range(value.bit_length()) if value >> i & 1)


@dataclass(frozen=True)
class SchedulerView:
    """What a scheduler said of the machine; None: it did not say (each scheduler says a few of these)."""

    nodes: int | None = None  # the nodes with CPUs it counted (bpfland)
    node_cpus: tuple[tuple[int, ...], ...] | None = None  # each node's CPUs, in node order (rusty)
    llc_cpus: tuple[tuple[int, ...], ...] | None = None  # each LLC's CPUs, in its order (rusty's domains)
    cpus: int | None = None  # the online CPUs it counted (layered)
    primary: tuple[int, ...] | None = None  # bpfland's primary domain (its policy's choice: only checked to exist)
    cores: int | None = None  # physical cores (layered)
    smt: bool | None = None  # SMT on (bpfland)
    several_llcs: bool | None = None  # it saw more than one LLC, or one node of one LLC (p2dq, layered)
    lines: tuple[str, ...] = ()  # the lines it was read from, as printed (escaped)

    @property
    def said_anything(self) -> bool:
        return bool(self.lines)

    def to_dict(self) -> dict:
        out: dict = {}
        if self.nodes is not None:
            out["nodes"] = self.nodes
        if self.node_cpus is not None:
            out["node_cpus"] = [format_cpulist(c) for c in self.node_cpus]
        if self.llc_cpus is not None:
            out["llc_cpus"] = [format_cpulist(c) for c in self.llc_cpus]
        if self.primary is not None:
            out["primary"] = format_cpulist(self.primary)
        for key in ("cpus", "cores", "smt", "several_llcs"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


def read_view(text: str) -> SchedulerView:
    """The machine as the scheduler's output (``scheduler.out``) says it saw it; empty when it said nothing that
    is read here (the kernel's examples, scx_lavd, a user's own scheduler)."""
    got: dict = {}
    nodes: dict[int, tuple[int, ...]] = {}
    doms: dict[int, tuple[int, ...]] = {}
    p2dq = single = False
    kept: list[str] = []
    for raw in text.splitlines()[:MAX_LINES]:
        line = strip_colours(raw).rstrip()  # (simplelog's "\x1b[0mNUMA nodes": no word boundary before NUMA)
        hit = True
        if m := _BPF_NODES.search(line):
            got["nodes"] = int(m.group(1))
        elif m := _BPF_SMT.search(line):
            got["smt"] = m.group(1) == "on"
        elif (m := _BPF_PRIMARY.search(line)) and (cpus := mask_cpus(m.group(1))) is not None:
            got["primary"] = cpus
        elif (m := _RUSTY_NODE.search(line)) and (cpus := mask_cpus(m.group(2))) is not None:
            nodes.setdefault(int(m.group(1)), cpus)
        elif (m := _RUSTY_DOM.search(line)) and (cpus := mask_cpus(m.group(2))) is not None:
            doms.setdefault(int(m.group(1)), cpus)
        elif m := _LAYERED_CPUS.search(line):
            got["cpus"], got["cores"] = int(m.group(1)), int(m.group(3))
        elif m := _LAYERED_TOPO.search(line):
            got["several_llcs"] = m.group(1) == "enabled"
        elif _P2DQ_RUNNING.search(line):
            p2dq = True
        elif _P2DQ_SINGLE.search(line):
            single = True
        else:
            hit = False
        if hit and len(kept) < MAX_KEPT:
            kept.append(term_safe(line)[:200])
    if p2dq:
        got["several_llcs"] = not single
    if nodes:  # (a node without CPUs, if one is printed, has an empty mask: not a node it schedules on)
        got["node_cpus"] = tuple(cpus for _, cpus in sorted(nodes.items()) if cpus)
    if doms:
        got["llc_cpus"] = tuple(cpus for _, cpus in sorted(doms.items()))
    return SchedulerView(**got, lines=tuple(kept))


def predicted_view(topo: Topology) -> SchedulerView:
    """The machine as the guest kernel sees it, in the terms a scheduler says it in."""
    node_cpus = tuple(tuple(c) for n, c in zip(topo.nodes, topo.node_cpus()) if n.cpus > 0)
    by_llc: dict[int, list[int]] = {}
    for cpu, llc in enumerate(vcpu_llcs(topo)):
        by_llc.setdefault(llc, []).append(cpu)
    llcs = tuple(tuple(c) for c in by_llc.values())
    return SchedulerView(
        nodes=len(node_cpus),
        node_cpus=node_cpus,
        llc_cpus=llcs,
        cpus=topo.total_cpus,
        cores=topo.total_cpus // topo.threads,
        smt=topo.threads > 1,
        several_llcs=not (len(node_cpus) == 1 and len(llcs) == 1),
    )


def _sets(groups: tuple[tuple[int, ...], ...]) -> str:
    return " ".join(format_cpulist(g) for g in groups) or "none"


_SAID = {"nodes": "nodes with CPUs", "cpus": "CPUs", "cores": "cores", "smt": "SMT", "several_llcs": "LLCs"}
_LABELS = {
    "nodes": "nodes",
    "node_cpus": "nodes",
    "llc_cpus": "LLCs",
    "primary": "primary",
    "cpus": "CPUs",
    "cores": "cores",
    "smt": "SMT",
    "several_llcs": "LLCs",
}  # (the summary's words for what it saw)
_BOOL_WORDS = {"smt": ("on", "off"), "several_llcs": ("several", "one")}


def _word(key: str, v: object) -> str:
    if isinstance(v, bool):
        yes, no = _BOOL_WORDS[key]
        return yes if v else no
    return str(v)


def differences(seen: SchedulerView, predicted: SchedulerView) -> list[str]:
    """Where what the scheduler said differs from the prediction, one line each; [] when it agrees on all it
    said."""
    out = []
    for key, what in _SAID.items():
        s, p = getattr(seen, key), getattr(predicted, key)
        if s is not None and p is not None and s != p:
            out.append(f"{what}: it saw {_word(key, s)}, the machine has {_word(key, p)}")
    if seen.primary is not None and predicted.cpus is not None and any(c >= predicted.cpus for c in seen.primary):
        out.append(f"primary domain: it holds CPUs {format_cpulist(seen.primary)}, the machine has "
                   f"0-{predicted.cpus - 1}")  # fmt: skip
    for key, what in (("node_cpus", "nodes' CPUs"), ("llc_cpus", "LLCs (its domains)")):
        s, p = getattr(seen, key), getattr(predicted, key)
        if s is not None and p is not None and sorted(s) != sorted(p):
            out.append(f"{what}: it saw {_sets(s)}, the machine has {_sets(p)}")
    return out


def scheduler_topology(scheduler_out: str, topo: Topology) -> dict | None:
    """The manifest's ``scheduler.topology``: what it said (``seen``, and the lines), what numalab predicts of
    the same things, and whether they agree; None when it said nothing read here."""
    seen = read_view(scheduler_out)
    if not seen.said_anything:
        return None
    predicted = predicted_view(topo)
    diff = differences(seen, predicted)
    said = seen.to_dict()
    return {
        "seen": said,
        "predicted": {k: v for k, v in predicted.to_dict().items() if k in said},
        "agrees": not diff,
        "differences": diff,
        "lines": list(seen.lines),
    }


def summary_words(topology: dict | None) -> str:
    """The run summary's words on it: '' when the scheduler said nothing of the machine."""
    if not topology:
        return ""
    seen = topology.get("seen") or {}
    if topology.get("agrees"):
        what = ", ".join(f"{_LABELS[k]} {len(v) if isinstance(v, list) else _word(k, v)}" for k, v in seen.items())
        return f"; it saw the machine numalab built ({what})"
    return "; it saw another machine than the kernel's: " + "; ".join(topology.get("differences") or [])
