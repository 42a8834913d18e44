"""What the guest said about itself, checked against the spec and the kernel-view oracle."""

from __future__ import annotations

import re
from pathlib import Path

from lab.cpulist import format_cpulist, parse_cpulist
from lab.record_files import SCHED_DOMAINS, SCHEDSTAT, TIERS, TOPOLOGY
from lab.topology.kernel_view import expected_numa_spans
from lab.topology.model import Topology
from lab.topology.tiers import check_tiers, predict_tiers, read_tiers, usable_mib

# The guest's per-node MemTotal is below the configured size: the kernel
# image, memmap and reservations come out of it (most on node 0).
MEM_TOLERANCE_MIB = 96
MEM_TOLERANCE_SHARE = 0.12


_RAW = re.compile(r".*/node(\d+)/(cpulist|distance|meminfo)$")


def read_topology(run_dir: Path) -> dict | None:
    """topology.txt -> {"nodes": {id: {cpus, distances, memtotal_mib}}, "online": "0-7"}.

    The guest writes ``grep -H`` output (``/sys/devices/system/node/node0/cpulist:0-1``,
    ``.../node0/meminfo:Node 0 MemTotal:  504384 kB``, ``/sys/devices/system/cpu/online:0-3``);
    records made before that have ``node 0 cpulist 0-1``, ``node 0 memtotal_kb 504384`` and
    ``online 0-3`` lines. Both are read."""
    path = run_dir / TOPOLOGY
    if not path.exists():
        return None
    nodes: dict[int, dict] = {}
    online = ""

    def put(node: int, key: str, value: str) -> None:
        entry = nodes.setdefault(node, {})
        if key == "cpulist":
            entry["cpus"] = parse_cpulist(value.strip())
        elif key == "distance":
            entry["distances"] = [int(x) for x in value.split()]
        elif key == "memtotal_kb" and value.strip():
            entry["memtotal_mib"] = int(value.split()[0]) // 1024

    for line in path.read_text().splitlines():
        if line.startswith("/"):
            file, _, value = line.partition(":")
            m = _RAW.match(file)
            if file.endswith("/cpu/online"):
                online = value.strip()
            elif m and m.group(2) == "meminfo":
                mem = re.search(r"MemTotal:\s*(\d+)", value)
                if mem:
                    put(int(m.group(1)), "memtotal_kb", mem.group(1))
            elif m:
                put(int(m.group(1)), m.group(2), value)
            continue
        parts = line.split()
        if parts[:1] == ["online"]:
            online = parts[1] if len(parts) > 1 else ""
        elif len(parts) >= 3 and parts[0] == "node":
            put(int(parts[1]), parts[2], " ".join(parts[3:]))
    out = {"nodes": {k: nodes[k] for k in sorted(nodes)}, "online": online}
    tiers = run_dir / TIERS
    if tiers.exists():  # memory tiers, demotion_enabled and HMAT access0 (lab.topology.tiers)
        out["memory_tiers"] = read_tiers(tiers.read_text())
    return out


def _mask_to_cpus(mask: str) -> list[int]:
    value = int(mask.replace(",", ""), 16)
    return [i for i in range(value.bit_length()) if value >> i & 1]


def read_sched_domains(run_dir: Path) -> dict[int, list[dict]]:
    """cpu -> [{"level", "name", "cpus"}] from /proc/schedstat masks and debugfs names."""
    names: dict[tuple[int, int], str] = {}
    dom_file = run_dir / SCHED_DOMAINS
    if dom_file.exists():
        for line in dom_file.read_text().splitlines():
            # "PATH VALUE" (older records) or grep -H's "PATH:VALUE"
            m = re.search(r"/cpu(\d+)/domain(\d+)/name[\s:]+(\S+)", line)
            if m:
                names[(int(m.group(1)), int(m.group(2)))] = m.group(3)
    out: dict[int, list[dict]] = {}
    stat = run_dir / SCHEDSTAT
    if not stat.exists():
        return out
    cpu = None
    for line in stat.read_text().splitlines():
        parts = line.split()
        if parts and parts[0].startswith("cpu") and parts[0][3:].isdigit():
            cpu = int(parts[0][3:])
            out[cpu] = []
        elif parts and parts[0].startswith("domain") and cpu is not None:
            level = int(parts[0][6:])
            out[cpu].append(
                {"level": level, "name": names.get((cpu, level), "?"), "cpus": format_cpulist(_mask_to_cpus(parts[1]))}
            )
    return out


def check_topology(topo: Topology, readback: dict | None, domains: dict[int, list[dict]]) -> list[str]:
    """Every way the guest's view differs from the spec; [] means it matches."""
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
                "DEV_DAX_HMEM and DEV_DAX_KMEM (--kernel stock, or numalab kernel build --fragment tiering)"
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
        want = usable_mib(topo, node.id) if topo.tiers else node.memory_mib
        slack = max(MEM_TOLERANCE_MIB, int(want * MEM_TOLERANCE_SHARE))
        if not want - slack <= mem <= want:
            problems.append(f"node {node.id} MemTotal {mem} MiB not within {slack} MiB below {want} MiB")
    if topo.tiers:
        if "memory_tiers" not in readback:
            problems.append("the guest wrote no memory-tier readback (tiers.txt)")
        else:
            problems += check_tiers(predict_tiers(topo), readback["memory_tiers"])
    if domains:
        for cpu, spans in sorted(expected_numa_spans(topo).items()):
            seen = [d["cpus"] for d in domains.get(cpu, []) if d["name"] == "NUMA"]
            if seen != spans:
                problems.append(f"cpu {cpu} NUMA domain spans {seen} != predicted {spans}")
                break
    return problems


def read_vmstat(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            k, _, v = line.partition(" ")
            if v.strip().lstrip("-").isdigit():
                out[k] = int(v)
    return out


def read_vmstat_series(path: Path) -> list[tuple[float, dict[str, int]]]:
    """The sampler's '@ <uptime>' blocks."""
    series: list[tuple[float, dict[str, int]]] = []
    if not path.exists():
        return series
    for line in path.read_text().splitlines():
        if line.startswith("@ "):
            try:
                series.append((float(line[2:]), {}))
            except ValueError:
                continue
        elif series:
            k, _, v = line.partition(" ")
            if v.strip().lstrip("-").isdigit():
                series[-1][1][k] = int(v)
    return series


def build_id(notes: Path) -> str | None:
    """The GNU build-id from /sys/kernel/notes (ELF note list), as hex."""
    if not notes.exists():
        return None
    data = notes.read_bytes()
    off = 0
    while off + 12 <= len(data):
        namesz, descsz, ntype = (int.from_bytes(data[off + i : off + i + 4], "little") for i in (0, 4, 8))
        name_start = off + 12
        desc_start = name_start + (namesz + 3) // 4 * 4
        if ntype == 3 and data[name_start : name_start + namesz].rstrip(b"\0") == b"GNU":
            return data[desc_start : desc_start + descsz].hex()
        off = desc_start + (descsz + 3) // 4 * 4
    return None
