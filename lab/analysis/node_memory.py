"""Each node's memory over time, and the workload's pages per node, from the guest's numa-nodes.series.

The guest init samples, with every /proc/vmstat sample (the plan's ``vmstat_interval_s``), every node's
``/sys/devices/system/node/nodeN/meminfo`` and, for each process of the workload, its ``VmRSS`` and its
``/proc/PID/numa_maps`` (the ``N<node>=<pages>`` counts of each mapping), as mmtests' watch-numa-meminfo and
numastat monitors do (each process's ``/proc/PID/stat`` line starts its part). numa_maps is per process
(threads share their memory), so the workload's pages are per process, not per task.

The samples are checked before they are shown (``problems``; a check that fails says which sample):

* nodes against their total: each node's MemUsed + MemFree is its MemTotal, and its MemTotal is at most the
  memory the topology gave it;
* the workload against its footprint: each process's pages on all nodes (numa_maps) against its resident set
  (VmRSS, read just before and just after numa_maps), within :data:`FOOTPRINT_SLACK`; a process that exits
  during its reads (one of them has no VmRSS: its memory is gone, and numa_maps then reads empty) is not
  checked;
* the workload against the nodes: its pages on a node are at most that node's used memory (the larger of
  the reads before and after the processes: the files are read one after the other while it runs).
"""

from __future__ import annotations

import re
from pathlib import Path

from lab.record_files import NUMA_NODES_SERIES
from lab.topology.model.topology import Topology
from lab.untrusted import read_guest_text

_MEMINFO = re.compile(r"^Node (\d{1,4}) (MemTotal|MemFree|MemUsed|FilePages|AnonPages):\s+(\d{1,15}) kB$")
_NODE_PAGES = re.compile(r"\bN(\d{1,4})=(\d{1,15})\b")
_PAGE_KB = re.compile(r"\bkernelpagesize_kB=(\d{1,8})\b")
_RSS = re.compile(r"^VmRSS:\s+(\d{1,15}) kB$")
_STAT = re.compile(r"^(\d{1,9}) \(.{0,64}\) [A-Za-z] ")  # /proc/PID/stat: the line that starts a process
_STATUS = re.compile(r"^Name:\t")  # /proc/PID/status: the line that starts each of its two reads
FOOTPRINT_SLACK = (0.10, 4.0)  # |numa_maps - VmRSS| may be 10% of VmRSS plus 4 MiB
MAX_PROBLEMS = 8
MAX_PROCESSES = 16


def _blocks(text: str) -> list[tuple[float, list[str]]]:
    out: list[tuple[float, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("@ "):
            try:
                out.append((float(line[2:].split()[0]), []))
            except (ValueError, IndexError):
                continue
        elif out:
            out[-1][1].append(line)
    return [(t, lines) for t, lines in out if t == t and abs(t) < 1e9]  # (NaN and absurd times: left out)


def _sample(lines: list[str], n: int) -> tuple[list[dict[str, list[float]]], dict[int, dict]]:
    """The node meminfo reads of a sample (field -> MiB per node; the guest reads them before and after the
    processes), and pid -> {"rss": [MiB, ...] (its VmRSS reads), "nodes": MiB per node (numa_maps)}."""
    mems: list[dict[str, list[float]]] = []
    procs: dict[int, dict] = {}
    pid = None
    for line in lines:
        s = _STAT.match(line)
        if s:
            pid = int(s.group(1))
            procs.setdefault(pid, {"rss": [], "nodes": [0.0] * n, "status_reads": 0})
            continue
        m = _MEMINFO.match(line)
        if m:
            node, key, kb = int(m.group(1)), m.group(2), int(m.group(3))
            if not mems or pid is not None or (key == "MemTotal" and node == 0):
                mems.append({})  # (a new read of the nodes: the first, or the one after the processes)
            pid = None
            if node < n:
                mems[-1].setdefault(key, [0.0] * n)[node] = kb / 1024
            continue
        if pid is None:
            continue
        if _STATUS.match(line):
            procs[pid]["status_reads"] += 1
            continue
        r = _RSS.match(line)
        if r:
            procs[pid]["rss"].append(int(r.group(1)) / 1024)
            continue
        page = _PAGE_KB.search(line)
        kb = int(page.group(1)) if page else 4
        for node, pages in _NODE_PAGES.findall(line):
            if int(node) < n:
                procs[pid]["nodes"][int(node)] += int(pages) * kb / 1024
    return [m for m in mems if "MemTotal" in m], procs


def _used(mem: dict[str, list[float]], n: int) -> list[float]:
    if "MemUsed" in mem:
        return mem["MemUsed"]
    return [a - b for a, b in zip(mem["MemTotal"], mem.get("MemFree", [0.0] * n), strict=True)]


def _check(t: float, mems: list[dict], procs: dict, topo: Topology, problems: list[str]) -> None:
    for mem in mems:
        total, free, used = mem.get("MemTotal"), mem.get("MemFree"), mem.get("MemUsed")
        if total and free and used:
            for i, (a, b, c) in enumerate(zip(total, free, used, strict=True)):
                if abs(b + c - a) > 1 or c > a:
                    problems.append(f"t={t:.1f}s node {i}: MemUsed {c:.0f} + MemFree {b:.0f} MiB is not MemTotal "
                                    f"{a:.0f}")  # fmt: skip
                if a > topo.nodes[i].memory_mib:
                    problems.append(f"t={t:.1f}s node {i}: MemTotal {a:.0f} MiB, more than the "
                                    f"{topo.nodes[i].memory_mib} MiB the topology gives it")  # fmt: skip
    for pid, p in procs.items():
        pages = sum(p["nodes"])
        if len(p["rss"]) < p["status_reads"]:
            continue  # a read of its status without VmRSS: it was exiting (its memory gone), numa_maps may be empty
        if p["rss"] and (pages or max(p["rss"])):
            lo, hi = min(p["rss"]), max(p["rss"])
            slack = FOOTPRINT_SLACK[0] * hi + FOOTPRINT_SLACK[1]
            if not lo - slack <= pages <= hi + slack:
                problems.append(f"t={t:.1f}s pid {pid}: its pages on the nodes add up to {pages:.1f} MiB against a "
                                f"VmRSS of {lo:.1f}..{hi:.1f} MiB")  # fmt: skip
    if mems and procs:
        n = len(mems[0]["MemTotal"])
        most = [max(_used(m, n)[i] for m in mems) for i in range(n)]
        for i, u in enumerate(most):
            mine = sum(p["nodes"][i] for p in procs.values())
            if mine > u + 1:
                problems.append(f"t={t:.1f}s node {i}: the workload has {mine:.1f} MiB on it, more than its MemUsed "
                                f"{u:.1f} MiB")  # fmt: skip


def node_memory(run_dir: Path, topo: Topology, t0: float | None) -> dict:
    """The series (MiB, times from the workload's start ``t0``) and the checks' problems; {} without samples."""
    text = read_guest_text(run_dir / NUMA_NODES_SERIES)
    blocks = _blocks(text or "")
    if not blocks:
        return {}
    n = topo.n_nodes
    start = t0 if t0 is not None else blocks[0][0]
    out: dict = {"t": [], "total_mib": None, "used_mib": [], "workload_mib": [], "rss_mib": [], "processes": {}}
    problems: list[str] = []
    for t, lines in blocks:
        mems, procs = _sample(lines, n)
        if not mems:
            continue
        _check(t - start, mems, procs, topo, problems)
        out["t"].append(round(t - start, 2))
        out["total_mib"] = out["total_mib"] or [round(x, 1) for x in mems[-1]["MemTotal"]]
        out["used_mib"].append([round(x, 1) for x in _used(mems[-1], n)])  # (the read after the processes)
        out["workload_mib"].append([round(sum(p["nodes"][i] for p in procs.values()), 1) for i in range(n)] if procs
                                   else None)  # fmt: skip
        rss = [p["rss"][-1] for p in procs.values() if p["rss"]]
        out["rss_mib"].append(round(sum(rss), 1) if rss else None)
        for pid, p in procs.items():
            if str(pid) in out["processes"] or len(out["processes"]) < MAX_PROCESSES:
                series = out["processes"].setdefault(str(pid), {"t": [], "mib": []})
                series["t"].append(round(t - start, 2))
                series["mib"].append([round(x, 1) for x in p["nodes"]])
    # A process with no pages anywhere (the sh -c that only waits): not shown.
    out["processes"] = {k: v for k, v in out["processes"].items() if any(sum(r) for r in v["mib"])}
    out["problems"] = problems[:MAX_PROBLEMS] + (
        [f"... and {len(problems) - MAX_PROBLEMS} more"] if len(problems) > MAX_PROBLEMS else []
    )
    return out if out["t"] else {}
