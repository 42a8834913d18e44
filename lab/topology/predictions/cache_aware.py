"""Whether a 7.x kernel turns cache-aware scheduling on for a machine, predicted before the boot.

``CONFIG_SCHED_CACHE`` (7.x, ``default y``) gathers a process's threads on one LLC. The kernel's hardware switch
(``sched_cache_present``, kernel/sched/topology.c ``build_sched_domains``) is set when some CPU's topmost
LLC-sharing domain (``SD_SHARE_LLC``: SMT, CLS, MC) spans more than one CPU and has a parent of a wider span
(``sd_in_multi_llcs``). Any wider parent counts, a NUMA one too: a machine of one LLC a node turns it on as soon
as it has two nodes with CPUs, and a one-node machine whose LLC is all of it does not (the kernel's own comment:
"For systems with a single LLC per node, cache-aware scheduling is still enabled when multiple nodes exist").
With ``sched_verbose`` the kernel then logs ``enabling cache aware scheduling`` (the user switch,
``llc_balancing/enabled``, is 1 at boot) or ``cache aware scheduling not supported on this platform``.
"""

from __future__ import annotations

from lab.cpulist import checked_cpulist
from lab.topology.model.topology import Topology
from lab.topology.predictions.cpu_view import ALL_LEVELS, predict_cpus

ENABLING = "enabling"
DISABLING = "disabling"
NOT_SUPPORTED = "not supported"
LLC_LEVELS = ("SMT", "CLS", "MC")  # the x86 levels whose domains carry SD_SHARE_LLC


def llc_domain(domains: list[dict]) -> str | None:
    """The cpulist of the topmost LLC-sharing domain among a CPU's domains below NUMA, None without one."""
    shared = [d["cpus"] for d in domains if d["name"] in LLC_LEVELS]
    return shared[-1] if shared else None


def predict_sched_cache(topo: Topology, levels: frozenset[str] = ALL_LEVELS) -> str:
    """``enabling`` or ``not supported``: what a cache-aware kernel of ``levels`` says at boot on ``topo``."""
    total = topo.total_cpus
    for cpu in predict_cpus(topo, None, levels)["cpus"]:
        span = llc_domain(cpu["domains"])
        cpus = checked_cpulist(span) if span else None
        if cpus and 1 < len(cpus) < total:
            return ENABLING
    return NOT_SUPPORTED
