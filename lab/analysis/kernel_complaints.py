"""What the guest kernel said was wrong with its topology, from its boot log (dmesg-boot.txt).

A guest can match its spec exactly (the same nodes, CPUs and SLIT in /sys)
and still have a kernel that objected to it: an asymmetric SLIT makes 6.1's
sched_init_numa() print ``ERROR: Node-distance not symmetric`` (only with
``sched_verbose``, which numalab always boots with) and the sched-domain
debug dump then finds ``ERROR: groups don't span domain->span``. These
messages are collected here, each once with the CPUs it was seen on, so the
run's topology verdict can carry them.

The messages come from Linux 6.1: kernel/sched/topology.c (sched_numa_warn,
sched_domain_debug_one, build_sched_domain, init_numa_topology_type),
drivers/acpi/numa/srat.c, drivers/acpi/numa/hmat.c, arch/x86/mm/numa.c and
arch/x86/kernel/smpboot.c (topology_sane).
"""

from __future__ import annotations

import re
from pathlib import Path

from lab.record_files import DMESG_BOOT
from lab.untrusted import read_guest_text

_TS = re.compile(r"^\[\s*\d+\.\d+\]\s?")
_ATTACH = re.compile(r"^CPU(\d{1,5}) attaching sched-domain")
_DOMAIN = re.compile(r"^\s*domain-(\d{1,3}): span=(\S{1,4096}) level=(\S{1,64})")

# (source, pattern); the message is the matched text.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("slit", re.compile(r"ERROR: (?:Node-distance not symmetric|Invalid distance value range)")),
    ("slit", re.compile(r"SLIT table looks invalid\. Not used\.")),
    (
        "sched-domains",
        re.compile(
            r"ERROR: (?:domain->span does not contain CPU\d+|domain->groups does not contain CPU\d+"
            r"|flag \S+ set here but not in (?:child|parent)|group is NULL|empty group|repeated CPUs"
            r"|domain->groups does not match domain->child|groups don't span domain->span"
            r"|parent span is not a superset of domain->span)"
        ),
    ),
    ("sched-domains", re.compile(r"BUG: arch topology borken")),
    ("sched-domains", re.compile(r"the \S+ domain not a subset of the \S+ domain")),
    ("sched-domains", re.compile(r"Failed to find a NUMA topology type, defaulting to DIRECT")),
    ("sched-domains", re.compile(r"sched: CPU #\d+'s \S+-sibling CPU #\d+ is not on the same node!.*")),
    (
        "srat",
        re.compile(
            r"SRAT: (?:SRAT not used\.|Too many proximity domains\.|Unexpected header length.*"
            r"|Failed to add memblk.*|Failed to mark hotplug range.*)"
            r"|Found unsupported (?:x2apic \S+ )?SRAT entry.*"
        ),
    ),
    ("hmat", re.compile(r"(?:acpi/hmat|HMAT): .*(?:fail|invalid|ignor|unknown|error).*", re.I)),
    (
        "numa",
        re.compile(
            r"(?:NUMA: )?(?:Warning: invalid memblk node.*|Warning: node \d+ .*overlaps.*"
            r"|node \d+ \[mem .*\] overlaps with node.*|Warning: invalid distance parameter.*"
            r"|Warning: node ids are out of bound.*|Node alignment .* rejecting NUMA config"
            r"|No NUMA configuration found)"
        ),
    ),
)


def complaints(dmesg: str) -> list[dict]:
    """[{"source", "message", "cpus", "count"}], in order of first appearance, each message once."""
    found: dict[str, dict] = {}
    cpu: int | None = None
    domain = ""
    for raw in dmesg.splitlines():
        line = _TS.sub("", raw).rstrip()
        m = _ATTACH.match(line)
        if m:
            cpu, domain = int(m.group(1)), ""
            continue
        m = _DOMAIN.match(line)
        if m:
            domain = f"domain-{m.group(1)} ({m.group(3)}, span {m.group(2)})"
            continue
        for source, pattern in _PATTERNS:
            hit = pattern.search(line)
            if not hit:
                continue
            msg = hit.group(0).strip()
            entry = found.setdefault(msg, {"source": source, "message": msg, "cpus": [], "where": [], "count": 0})
            entry["count"] += 1
            if source == "sched-domains" and cpu is not None and cpu not in entry["cpus"]:
                entry["cpus"].append(cpu)
                if domain:
                    entry["where"].append(f"CPU{cpu} {domain}")
            break
    return list(found.values())


def read_complaints(run_dir: Path) -> list[dict]:
    """The complaints in a run record's dmesg-boot.txt ([] without one)."""
    return complaints(read_guest_text(run_dir / DMESG_BOOT) or "")


def summary(c: dict) -> str:
    """One line: 'ERROR: groups don't span domain->span (CPU0 domain-1 (NUMA, span 0-2))'."""
    where = "; ".join(c.get("where") or []) or ("CPUs " + ",".join(map(str, c["cpus"])) if c.get("cpus") else "")
    return f"{c['message']} ({where})" if where else c["message"]
