"""The guest's view of its CPUs (``cpus.txt``: sysfs topology ids and caches) read back and checked against
the prediction of ``lab.topology.cpu_view``."""

from __future__ import annotations

import re
from pathlib import Path

from lab.cpulist import MAX_CPU_ID, checked_cpulist, format_cpulist
from lab.record_files import CPUS
from lab.topology.cpu_grid import CPUID_VENDOR_IDS
from lab.topology.cpu_view import ALL_LEVELS, predict_cpus
from lab.topology.model import Topology
from lab.untrusted import read_guest_text, shown, to_int

_LINE = re.compile(
    r".*/cpu(\d{1,5})/(?:topology/(physical_package_id|die_id|cluster_id|core_id|thread_siblings_list)"
    r"|cache/index(\d{1,2})/(level|type|shared_cpu_list|id|size)):(.*)$"
)
_IDS = {"physical_package_id": "package", "die_id": "die", "cluster_id": "cluster", "core_id": "core"}
_CACHE_TYPES = {"Data": "d", "Instruction": "i", "Unified": ""}
_CPUID = re.compile(r"(cpu family|model)\s*:\s*(\d{1,3})\s*$")  # /proc/cpuinfo's first CPU, as the init greps it
_CPUID_KEYS = {"cpu family": "family", "model": "model"}
DOMAIN_LEVELS = ("SMT", "CLS", "MC", "DIE", "PKG")  # the sched domains below NUMA (lab.topology.cpu_view)


def _value(key: str, value: str) -> object:
    if key in ("thread_siblings_list", "shared_cpu_list"):
        cpus = checked_cpulist(value)
        return format_cpulist(cpus) if cpus is not None else None
    if key == "type":
        return value.strip() if value.strip() in _CACHE_TYPES else None
    if key == "size":  # cacheinfo's "32768K"
        return value.strip() if re.fullmatch(r"\d{1,10}K", value.strip()) else None
    n = to_int(value)  # (an id the kernel does not know is -1: left out)
    return n if n is not None else (None if value.strip() != "-1" else -1)


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
    cpus: dict[int, dict] = {}
    caches: dict[tuple[int, int], dict] = {}
    vendor = ""
    cpuid: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("vendor_id"):
            vendor = line.partition(":")[2].strip()[:32]
            continue
        if line.startswith(("cpu family", "model")):
            m = _CPUID.match(line)
            if m:
                cpuid[_CPUID_KEYS[m.group(1)]] = int(m.group(2))
            else:
                problems.append(f"{CPUS} line {n}: {shown(line)} is not a CPU family or model")
            continue
        m = _LINE.match(line)
        if not m:
            continue
        cpu = int(m.group(1))
        if cpu > MAX_CPU_ID:
            problems.append(f"{CPUS} line {n}: cpu {cpu} is not a CPU")
            continue
        key = m.group(2) or m.group(4)
        value = _value(key, m.group(5))
        if value is None:
            problems.append(f"{CPUS} line {n}: {shown(m.group(5))} is not a {key}")
            continue
        if m.group(2):
            cpus.setdefault(cpu, {})["thread_siblings" if key == "thread_siblings_list" else _IDS[key]] = value
        else:
            caches.setdefault((cpu, int(m.group(3))), {})[key] = value
    for (cpu, _), c in sorted(caches.items()):
        if isinstance(c.get("level"), int) and "shared_cpu_list" in c:
            name = f"L{c['level']}{_CACHE_TYPES.get(str(c.get('type')), '')}"
            cpus.setdefault(cpu, {}).setdefault("caches", {})[name] = c["shared_cpu_list"]
            if "size" in c:  # (since 7.x's cache-aware scheduling, which sizes a process against its LLC)
                cpus[cpu].setdefault("cache_sizes", {})[name] = c["size"]
    return {"vendor": vendor, **cpuid, "cpus": {str(k): cpus[k] for k in sorted(cpus)}}


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
    the kernel's config builds, lab.topology.cpu_view.configured_levels). Only a topology with a CPU grid is
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
