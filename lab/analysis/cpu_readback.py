"""The guest's view of its CPUs (``cpus.txt``: sysfs topology ids and caches) read back and checked against
the prediction of ``lab.topology.predictions.cpu_view``."""

from __future__ import annotations

import re
from pathlib import Path

from lab.cpulist import format_cpulist
from lab.record_files import CPUS
from lab.topology.model.cpu_grid import CPUID_VENDOR_IDS
from lab.topology.model.sysfs import CpuFacts, SysfsReader, Trust, grep_files, read_cpu
from lab.topology.model.topology import Topology
from lab.topology.predictions.cpu_view import ALL_LEVELS, predict_cpus
from lab.untrusted import read_guest_text, shown

_CPUID = re.compile(r"(cpu family|model)\s*:\s*(\d{1,3})\s*$")  # /proc/cpuinfo's first CPU, as the init greps it
_CPUID_KEYS = {"cpu family": "family", "model": "model"}
DOMAIN_LEVELS = ("SMT", "CLS", "MC", "DIE", "PKG")  # the sched domains below NUMA (lab.topology.predictions.cpu_view)


def read_cpus(run_dir: Path, problems: list[str] | None = None) -> dict | None:
    """cpus.txt -> {"cpus": {cpu: {package, die, cluster, core, thread_siblings, caches: {"L1d": cpulist, ...},
    cache_sizes: {"L3": "32768K", ...}}},
    "vendor": ..., "family": F, "model": M}; None when the guest wrote none (a record from before it did);
    ``family`` and ``model`` only when the guest wrote them (it has since the spec's cpu_model). Lines that are not
    what the kernel writes are left out and named in ``problems``; this never raises."""
    problems = [] if problems is None else problems
    text = read_guest_text(run_dir / CPUS, problems)
    if text is None:
        return None
    vendor = ""
    cpuid: dict[str, int] = {}
    sysfs_lines = []
    found: list[str] = []  # (each "cpus.txt line N: ...", put in the order of the lines at the end)
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("vendor_id"):
            vendor = line.partition(":")[2].strip()[:32]
        elif line.startswith(("cpu family", "model")):
            m = _CPUID.match(line)
            if m:
                cpuid[_CPUID_KEYS[m.group(1)]] = int(m.group(2))
            else:
                found.append(f"{CPUS} line {n}: {shown(line)} is not a CPU family or model")
        else:
            sysfs_lines.append((n, line))
    files = grep_files(sysfs_lines, CPUS, found)
    reader = SysfsReader(files, Trust.UNTRUSTED, found)
    cpus = {}
    for cpu in files.numbered("", "cpu"):
        seen = _cpu_view(read_cpu(reader, cpu))
        if seen:
            cpus[str(cpu)] = seen
    problems += sorted(found, key=_line_number)
    return {"vendor": vendor, **cpuid, "cpus": cpus}


def _line_number(problem: str) -> int:
    m = re.match(rf"{re.escape(CPUS)} line (\d+):", problem)
    return int(m.group(1)) if m else 0


def _cpu_view(facts: CpuFacts) -> dict:
    """One CPU as :func:`read_cpus` records it: the ids it has, its thread siblings and, of its caches with a
    level and a shared_cpu_list, those lists and the sizes ({} when the guest said nothing believable of it)."""
    view = {k: format_cpulist(v) if k == "thread_siblings" else v for k, v in facts.ids.items()}
    for cache in facts.caches or ():
        if cache.level is not None and cache.shared_cpus is not None:
            view.setdefault("caches", {})[cache.name] = format_cpulist(cache.shared_cpus)
            if cache.size is not None:  # (since 7.x's cache-aware scheduling, which sizes a process against its LLC)
                view.setdefault("cache_sizes", {})[cache.name] = cache.size
    return view


def _groups(cpus: dict[str, dict], keys: tuple[str, ...]) -> dict[str, str]:
    """Per CPU, the cpulist of the CPUs that agree with it on ``keys`` (as the guest numbers them)."""
    by: dict[tuple, list[int]] = {}
    for cpu, c in cpus.items():
        by.setdefault(tuple(c.get(k) for k in keys), []).append(int(cpu))
    return {cpu: format_cpulist(by[tuple(c.get(k) for k in keys)]) for cpu, c in cpus.items()}


def check_cpus(
    topo: Topology,
    seen: dict | None,
    domains: dict[int, list[dict]],
    release: str | None,
    levels: frozenset[str] = ALL_LEVELS,
) -> list[str]:
    """Every way the guest's view of its CPUs differs from the prediction; [] means it matches (``levels``: those
    the kernel's config builds, lab.topology.predictions.cpu_view.configured_levels). Only a topology with a CPU grid is
    checked (one without keeps QEMU's default CPU model, whose AMD leaves the kernels read
    differently: its view is recorded, not predicted)."""
    if topo.cpu_grid is None or seen is None:
        return []
    want = predict_cpus(topo, release, levels)
    cpuid = _check_cpuid(seen, want)
    got = seen["cpus"]
    if sorted(int(c) for c in got) != list(range(topo.total_cpus)):
        return [*cpuid, f"the guest's CPUs {format_cpulist([int(c) for c in got])} != 0-{topo.total_cpus - 1}"]
    problems: list[str] = []
    packages = _groups(got, ("package",))
    dies = _groups(got, ("package", "die"))
    clusters = _groups(got, ("package", "die", "cluster"))
    for v, w in enumerate(want["cpus"]):
        g = got[str(v)]
        caches = g.get("caches", {})
        checks = [
            ("physical_package_id", g.get("package"), w["package"]),
            ("package siblings", packages[str(v)], _same(want["cpus"], v, ("package",))),
            ("die siblings", dies[str(v)], w["l3_cpus"]),
            ("thread siblings", g.get("thread_siblings"), w["core_cpus"]),
            ("L2 shared_cpu_list", caches.get("L2"), w["l2_cpus"]),
            ("L3 shared_cpu_list", caches.get("L3"), w["l3_cpus"]),
        ]
        if topo.cpu_grid.has_clusters:
            checks.append(("cluster siblings", clusters[str(v)], w["l2_cpus"]))
        if domains:
            named = [(d["name"], d["cpus"]) for d in domains.get(v, []) if d["name"] in DOMAIN_LEVELS]
            checks.append(("sched domains", named, [(d["name"], d["cpus"]) for d in w["domains"]]))
        for what, have, should in checks:
            if have != should:
                problems.append(f"cpu {v} {what} {have!r} != predicted {should!r}")
        if problems:
            break  # (the first CPU that differs says what; the others mostly repeat it)
    return cpuid + problems


def _check_cpuid(seen: dict, want: dict) -> list[str]:
    """The CPUID vendor, family and model the guest saw against the spec's (cpu_vendor, cpu_model): a kernel path
    keyed on them (x86_vfm) is taken only if they are the machine's. Under KVM the guest is shown the host's CPU
    (-cpu host), which this says too rather than pass."""
    problems = []
    vendor = CPUID_VENDOR_IDS[want["vendor"]]
    if seen.get("vendor") and seen["vendor"] != vendor:
        problems.append(f"CPUID vendor {seen['vendor']!r} != predicted {vendor!r} (cpu_vendor)")
    model = want.get("cpu_model")
    if model is not None:
        have = (seen.get("family"), seen.get("model"))
        asked = f"the spec's family {model['family']} model {model['model']} (cpu_model)"
        if None in have:
            problems.append(f"the guest's CPUID family and model were not read back; {asked}")
        elif have != (model["family"], model["model"]):
            problems.append(f"CPUID family {have[0]} model {have[1]} != {asked}")
    if problems:
        problems[-1] += "; under KVM the guest is shown the host's CPU (-cpu host), under TCG the spec's"
    return problems


def _same(cpus: list[dict], v: int, keys: tuple[str, ...]) -> str:
    return format_cpulist([i for i, c in enumerate(cpus) if all(c[k] == cpus[v][k] for k in keys)])
