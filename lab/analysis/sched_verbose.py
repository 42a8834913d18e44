"""The sched groups the guest built (its ``sched_verbose`` dump), checked against the prediction.

6.1's debugfs ``domains/cpuN/domainM/`` has no groups (only ``name``,
``flags`` and tunables), so the groups come from the dump
``sched_domain_debug()`` prints at boot with ``sched_verbose``, which the
guest init saves as ``dmesg-boot.txt``::

    CPU2 attaching sched-domain(s):
     domain-0: span=2-3 level=MC
      groups: 2:{ span=2 }, 3:{ span=3 }
      domain-1: span=0-5 level=NUMA
       groups: 2:{ span=2-3 cap=2048 }, 4:{ span=4-5 cap=2048 }, 0:{ span=0-1 cap=2048 }

A ``KERN_ERR`` line the kernel prints inside a groups line (``ERROR:
domain->groups does not match domain->child``) splits it; the pieces are
joined again and the error kept with its domain. A CPU's last block wins
(domains are rebuilt on hotplug).
"""

from __future__ import annotations

import re
from pathlib import Path

from lab.cpulist import checked_cpulist, format_cpulist
from lab.record_files import DMESG_BOOT
from lab.topology.model.topology import Topology
from lab.topology.predictions.sched_groups import predict_groups
from lab.untrusted import read_guest_text

_TS = re.compile(r"^\[\s*\d+\.\d+\]\s?")
_ATTACH = re.compile(r"CPU(\d{1,5}) attaching sched-domain\(s\):")
_NULL = re.compile(r"CPU(\d{1,5}) attaching NULL sched-domain")
_DOMAIN = re.compile(r"^\s*domain-(\d{1,3}): span=(\S{1,4096}) level=(\S{1,64})")
_GROUPS = re.compile(r"^\s*groups:(.*)$")
_CONT = re.compile(r"^\s*(\}|,|\d+:\{)")
_GROUP = re.compile(r"(\d{1,5}):\{ span=([^\s}]+)(?: mask=([^\s}]+))?(?: cap=(\d+))?\s*\}")
_ERROR = re.compile(r"^\s*ERROR: (.*)$")


def parse_dump(text: str) -> dict[int, list[dict]]:
    """cpu -> [{"domain", "level", "span", "groups", "masks", "errors"}] from a dmesg with the dump."""
    out: dict[int, list[dict]] = {}
    cpu: int | None = None
    current: dict | None = None  # the domain whose groups line is being read
    raw: dict[int, str] = {}  # id(domain) -> its groups text

    for line in text.splitlines():
        line = _TS.sub("", line)
        m = _ATTACH.search(line)
        if m:
            cpu = int(m.group(1))
            out[cpu] = []
            current = None
            continue
        m = _NULL.search(line)
        if m:
            out.pop(int(m.group(1)), None)
            cpu, current = None, None
            continue
        if cpu is None:
            continue
        m = _DOMAIN.match(line)
        if m:
            current = {
                "domain": int(m.group(1)),
                "level": m.group(3),
                "span": m.group(2),
                "groups": [],
                "masks": [],
                "errors": [],
            }
            out[cpu].append(current)
            continue
        if current is None:
            continue
        m = _ERROR.match(line)
        if m:
            current["errors"].append(m.group(1).strip())
            continue
        m = _GROUPS.match(line)
        if m:
            raw[id(current)] = m.group(1)
            continue
        if _CONT.match(line) and id(current) in raw:
            raw[id(current)] += line
            continue
        cpu, current = None, None  # anything else ends the block
    for doms in out.values():
        for dom in doms:
            for g in _GROUP.finditer(raw.get(id(dom), "")):
                dom["groups"].append(g.group(2))
                dom["masks"].append(g.group(3) or g.group(2))
    return out


def read_sched_groups(run_dir: Path) -> dict[int, list[dict]]:
    return parse_dump(read_guest_text(run_dir / DMESG_BOOT) or "")


def _nodes_of(cpus: set[int], node_of: dict[int, int]) -> str:
    return ",".join(str(n) for n in sorted({node_of[c] for c in cpus if c in node_of}))


def _overlap(cpu: int, groups: list[str], node_of: dict[int, int]) -> str:
    """What is wrong with a domain's groups, for the message: the CPU in more than one group, with the CPUs
    those groups share; or any CPU shared by groups."""
    sets = [set(checked_cpulist(g) or ()) for g in groups]
    holding = [s for s in sets if cpu in s]
    if len(holding) > 1:
        shared = set.intersection(*holding)
        return (
            f"CPU {cpu} is in {len(holding)} groups, which overlap on CPUs {format_cpulist(sorted(shared))}"
            f" (nodes {_nodes_of(shared, node_of)})"
        )
    if not holding:
        return f"CPU {cpu} is in none of its groups"
    if sets and sets[0] != holding[0]:
        return f"CPU {cpu}'s own group is not the first"
    return "the groups differ"


def check_groups(topo: Topology, guest: dict[int, list[dict]]) -> list[str]:
    """Every CPU whose NUMA-domain groups differ from 6.1's; [] when they match or there is no dump."""
    if not guest:
        return []
    predicted = predict_groups(topo)
    node_cpus = topo.node_cpus()
    node_of = {c: n for n in topo.cpu_nodes for c in node_cpus[n]}
    problems: list[str] = []
    for cpu, want in sorted(predicted.items()):
        if cpu not in guest:
            continue  # not in the dump (the log buffer can wrap on large guests): unchecked, see groups_record
        seen = [d for d in guest[cpu] if d["level"] == "NUMA"]
        if len(seen) != len(want):
            problems.append(f"cpu {cpu}: {len(seen)} NUMA domains in the sched_verbose dump, predicted {len(want)}")
            continue
        for got, exp in zip(seen, want):
            if got["groups"] == exp["groups"]:
                continue
            what = _overlap(cpu, got["groups"], node_of)
            errors = f"; kernel: {'; '.join(got['errors'])}" if got["errors"] else ""
            problems.append(
                f"cpu {cpu} NUMA domain-{got['domain']} (span {got['span']}): sched groups "
                f"{' '.join('{' + g + '}' for g in got['groups'])} != predicted "
                f"{' '.join('{' + g + '}' for g in exp['groups'])}: {what}{errors}"
            )
    return problems


def groups_record(topo: Topology, guest: dict[int, list[dict]]) -> dict:
    """Both sides for the manifest: the predicted and the guest's NUMA-domain groups per CPU."""
    predicted = predict_groups(topo)
    return {
        "checked": bool(guest),
        "unchecked_cpus": [c for c in predicted if guest and c not in guest],
        "predicted": {str(c): d for c, d in predicted.items()},
        "guest": {str(c): [d for d in doms if d["level"] == "NUMA"] for c, doms in sorted(guest.items())},
    }
