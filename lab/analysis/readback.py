"""What the guest said about itself, checked against the spec and the kernel-view oracle."""

from __future__ import annotations

import re
from pathlib import Path

from lab.cpulist import MAX_CPU_ID, checked_cpulist, format_cpulist
from lab.kernel.identity import notes_build_id
from lab.record_files import SCHED_DOMAINS, SCHEDSTAT, TIERS, TOPOLOGY
from lab.topology.model.tiers import check_tiers, predict_tiers, read_tiers
from lab.topology.model.topology import Topology
from lab.topology.predictions.kernel_view import expected_numa_spans
from lab.untrusted import read_guest_text, shown, to_float, to_int

# The guest's per-node MemTotal is below the configured size: the kernel
# image, memmap and reservations come out of it (most on node 0).
MEM_TOLERANCE_MIB = 96
MEM_TOLERANCE_SHARE = 0.12


_RAW = re.compile(r".*/node(\d+)/(cpulist|distance|meminfo)$")
MAX_NODE = 1023  # Linux's MAX_NUMNODES is at most 1 << 10


def _put(nodes: dict[int, dict], node_text: str, key: str, value: str) -> str | None:
    """Store one value of a node in ``nodes``; what is wrong with it, or None."""
    node = to_int(node_text)
    if node is None or not 0 <= node <= MAX_NODE:
        return f"node {shown(node_text, 20)} is not a node number"
    if key == "cpulist":
        cpus = checked_cpulist(value)
        if cpus is None:
            return f"{shown(value)} is not a cpulist"
        nodes.setdefault(node, {})["cpus"] = cpus
    elif key == "distance":
        dist = [to_int(x) for x in value.split()]
        if len(dist) > MAX_NODE + 1 or any(d is None or d < 0 for d in dist):
            return f"{shown(value)} is not a row of distances"
        nodes.setdefault(node, {})["distances"] = dist
    elif key == "memtotal_kb":
        kb = to_int(value.split()[0]) if value.split() else None
        if kb is None or kb < 0:
            return f"{shown(value)} is not a size in kB"
        nodes.setdefault(node, {})["memtotal_mib"] = kb // 1024
    return None


def _grep_line(line: str, nodes: dict[int, dict]) -> tuple[str | None, str | None]:
    """One ``grep -H`` line (``PATH:VALUE``) into ``nodes``: (the online list if it is that line, else None;
    what is wrong with it, or None)."""
    file, _, value = line.partition(":")
    m = _RAW.match(file)
    if file.endswith("/cpu/online"):
        online = value.strip() if checked_cpulist(value) is not None else ""
        return online, (None if online or not value.strip() else f"{shown(value)} is not a cpulist")
    if m and m.group(2) == "meminfo":
        mem = re.search(r"MemTotal:\s*(\S+)", value)
        return None, (_put(nodes, m.group(1), "memtotal_kb", mem.group(1)) if mem else None)
    if m:
        return None, _put(nodes, m.group(1), m.group(2), value)
    return None, None


def _old_line(line: str, nodes: dict[int, dict]) -> tuple[str | None, str | None]:
    """One line of an older record (``node 0 cpulist 0-1``, ``online 0-3``) into ``nodes``: (the online list
    if it is that line, else None; what is wrong with it, or None)."""
    parts = line.split()
    if parts[:1] == ["online"]:
        return (parts[1] if len(parts) > 1 and checked_cpulist(parts[1]) is not None else ""), None
    if len(parts) >= 3 and parts[0] == "node":
        return None, _put(nodes, parts[1], parts[2], " ".join(parts[3:]))
    return None, None


def read_topology(run_dir: Path, problems: list[str] | None = None) -> dict | None:
    """topology.txt -> {"nodes": {id: {cpus, distances, memtotal_mib}}, "online": "0-7"}.

    The guest writes ``grep -H`` output (``/sys/devices/system/node/node0/cpulist:0-1``,
    ``.../node0/meminfo:Node 0 MemTotal:  504384 kB``, ``/sys/devices/system/cpu/online:0-3``);
    records made before that have ``node 0 cpulist 0-1``, ``node 0 memtotal_kb 504384`` and
    ``online 0-3`` lines. Both are read. A line that is not what the guest's kernel writes (the
    guest is untrusted) is left out and named in ``problems``; this never raises."""
    problems = [] if problems is None else problems
    text = read_guest_text(run_dir / TOPOLOGY, problems)
    if text is None:
        return None
    nodes: dict[int, dict] = {}
    online = ""
    for n, line in enumerate(text.splitlines(), 1):
        line_online, wrong = _grep_line(line, nodes) if line.startswith("/") else _old_line(line, nodes)
        if line_online is not None:
            online = line_online
        if wrong:
            problems.append(f"{TOPOLOGY} line {n}: {wrong}")
    out = {"nodes": {k: nodes[k] for k in sorted(nodes)}, "online": online}
    tiers = read_guest_text(run_dir / TIERS, problems)
    if tiers is not None:  # memory tiers, demotion_enabled and HMAT access0 (lab.topology.model.tiers)
        out["memory_tiers"] = read_tiers(tiers)
    return out


MAX_MASK_DIGITS = 2048  # hex digits of a cpumask: 8192 CPUs


def _mask_to_cpus(mask: str) -> list[int] | None:
    digits = mask.replace(",", "")
    if not re.fullmatch(rf"[0-9a-fA-F]{{1,{MAX_MASK_DIGITS}}}", digits):
        return None
    value = int(digits, 16)
    return [i for i in range(value.bit_length()) if value >> i & 1]


# /proc/schedstat's formats numalab reads (kernel/sched/stats.c's SCHEDSTAT_VERSION): 15 (Debian's 6.1), 16
# (Debian's 6.12: the load balancer's imbalance counted four ways; the domain line is still "domainN MASK ...") and
# 17 (7.x: the domain's name before its mask, "domainN MC MASK ...").
SCHEDSTAT_VERSIONS = frozenset({15, 16, 17})
_DOMAIN_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,15}")


def read_sched_domains(run_dir: Path, problems: list[str] | None = None) -> dict[int, list[dict]]:
    """cpu -> [{"level", "name", "cpus"}] from /proc/schedstat masks and debugfs names (version 17's own names
    where debugfs gives none). A version numalab does not read leaves nothing, named in ``problems``; so do
    lines that are not what the kernel writes; this never raises."""
    problems = [] if problems is None else problems
    names: dict[tuple[int, int], str] = {}
    dom_text = read_guest_text(run_dir / SCHED_DOMAINS, problems)
    for line in (dom_text or "").splitlines():
        # "PATH VALUE" (older records) or grep -H's "PATH:VALUE"
        m = re.search(r"/cpu(\d{1,5})/domain(\d{1,3})/name[\s:]+(\S{1,64})", line)
        if m:
            names[(int(m.group(1)), int(m.group(2)))] = m.group(3)
    out: dict[int, list[dict]] = {}
    text = read_guest_text(run_dir / SCHEDSTAT, problems)
    if text is None:
        return out
    cpu = None
    version = None
    for n, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if parts[:1] == ["version"]:
            version = to_int(parts[1]) if len(parts) == 2 else None
            if version not in SCHEDSTAT_VERSIONS:
                said = version if version is not None else shown(" ".join(parts[1:]), 20)
                problems.append(f"{SCHEDSTAT}: version {said}, which numalab does not read "
                                f"(it reads {', '.join(map(str, sorted(SCHEDSTAT_VERSIONS)))})")  # fmt: skip
                return {}
        elif parts and parts[0].startswith("cpu") and parts[0][3:].isdigit():
            cpu = to_int(parts[0][3:])
            if cpu is None or cpu > MAX_CPU_ID:
                problems.append(f"{SCHEDSTAT} line {n}: {shown(parts[0], 20)} is not a CPU")
                cpu = None
                continue
            out[cpu] = []
        elif parts and parts[0].startswith("domain") and cpu is not None:
            level = to_int(parts[0][6:])
            named = version is not None and version >= 17  # "domainN NAME MASK ..." since version 17 (Linux 7.x)
            at = 2 if named else 1
            cpus = _mask_to_cpus(parts[at]) if len(parts) > at else None
            own = parts[1] if named and _DOMAIN_NAME.fullmatch(parts[1]) else None
            if level is None or not 0 <= level < 64 or cpus is None or (named and own is None):
                problems.append(f"{SCHEDSTAT} line {n}: {shown(line)} is not a domain line of version "
                                f"{version if version is not None else '15 or 16 (no version line)'}")  # fmt: skip
                continue
            name = names.get((cpu, level), own or "?")
            if own is not None and (cpu, level) in names and names[(cpu, level)] != own:
                problems.append(f"{SCHEDSTAT} line {n}: cpu{cpu} domain{level} is {shown(own, 20)} here and "
                                f"{shown(names[(cpu, level)], 20)} in {SCHED_DOMAINS}")  # fmt: skip
            out[cpu].append({"level": level, "name": name, "cpus": format_cpulist(cpus)})
    return out


def check_topology(topo: Topology, readback: dict | None, domains: dict[int, list[dict]],
                   sched: Topology | None = None, release: str | None = None) -> list[str]:  # fmt: skip
    """Every way the guest's view differs from the spec; [] means it matches. ``sched``: the topology as the
    kernel's scheduler sees its distances, when they are not the SLIT's (lab.topology.predictions.snc_fix);
    ``release``: the guest kernel's (its memory tiers: lab.topology.model.tiers.predict_tiers)."""
    if readback is None:
        return ["the guest wrote no topology readback"]
    problems: list[str] = []
    got = readback["nodes"]
    if sorted(got) != [n.id for n in topo.nodes]:
        problem = f"guest nodes {sorted(got)} != spec nodes 0..{topo.n_nodes - 1}"
        missing = sorted(set(range(topo.n_nodes)) - set(got))
        if topo.tiers and missing and set(missing) <= set(topo.tiers.slow_nodes):
            problem += (
                f": slow memory nodes {missing} never came online; the kernel needs ACPI_HMAT, EFI_SOFT_RESERVE, "
                "DEV_DAX_HMEM and DEV_DAX_KMEM (kernel-configs/tiering.config, one of numalab kernel build's default "
                "fragments; or --kernel stock)"
            )
        problems.append(problem)
        return problems
    for node, cpus in zip(topo.nodes, topo.node_cpus()):
        g = got[node.id]
        if g.get("cpus") != cpus:
            problems.append(f"node {node.id} cpus {format_cpulist(g.get('cpus', []))!r} != {format_cpulist(cpus)!r}")
        if g.get("distances") != list(topo.distances[node.id]):
            problems.append(f"node {node.id} distances {g.get('distances')} != {list(topo.distances[node.id])}")
        mem = g.get("memtotal_mib", 0)
        want = node.memory_mib
        slack = max(MEM_TOLERANCE_MIB, int(want * MEM_TOLERANCE_SHARE))
        if not want - slack <= mem <= want:
            problems.append(f"node {node.id} MemTotal {mem} MiB not within {slack} MiB below {want} MiB")
    if topo.tiers:
        if "memory_tiers" not in readback:
            problems.append("the guest wrote no memory-tier readback (tiers.txt)")
        else:
            problems += check_tiers(predict_tiers(topo, release), readback["memory_tiers"])
    if domains:
        for cpu, spans in sorted(expected_numa_spans(sched or topo).items()):
            seen = [d["cpus"] for d in domains.get(cpu, []) if d["name"] == "NUMA"]
            if seen != spans:
                problems.append(f"cpu {cpu} NUMA domain spans {seen} != predicted {spans}")
                break
    return problems


_VMSTAT_KEY = re.compile(r"[a-z0-9_]{1,64}")


def _vmstat_line(line: str) -> tuple[str, int] | None:
    k, _, v = line.partition(" ")
    n = to_int(v)
    return (k, n) if n is not None and _VMSTAT_KEY.fullmatch(k) else None


def read_vmstat(path: Path) -> dict[str, int]:
    """/proc/vmstat's "name value" lines; anything else is left out."""
    return dict(kv for line in (read_guest_text(path) or "").splitlines() if (kv := _vmstat_line(line)))


def read_vmstat_series(path: Path) -> list[tuple[float, dict[str, int]]]:
    """The sampler's '@ <uptime>' blocks."""
    series: list[tuple[float, dict[str, int]]] = []
    for line in (read_guest_text(path) or "").splitlines():
        if line.startswith("@ "):
            t = to_float(line[2:])
            if t is not None:
                series.append((t, {}))
        elif series and (kv := _vmstat_line(line)):
            series[-1][1][kv[0]] = kv[1]
    return series


def build_id(notes: Path) -> str | None:
    """The GNU build-id from /sys/kernel/notes (ELF note list), as hex."""
    try:
        data = notes.read_bytes()[: 1 << 16] if notes.is_file() else b""
    except OSError:
        return None
    return notes_build_id(data)
