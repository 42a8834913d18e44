"""Per-run metrics and the registry of comparable metrics (with their better direction)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from lab.analysis.llc import MIGRATION_KINDS, WAKEUP_KINDS
from lab.analysis.lost import completeness, lost_per_cpu
from lab.analysis.mmtests import VMSTAT_NUMA_KEYS, autonuma_cost, deltas, derived_rows, hint_local_percent
from lab.analysis.node_memory import node_memory
from lab.analysis.numa import ANALYSIS_EVENTS, analyse_trace, format_notes
from lab.analysis.readback import read_vmstat, read_vmstat_series
from lab.analysis.trajectory import fingerprint
from lab.errors import LabError
from lab.events import MIGRATE_PAGES, NUMA_DECISIONS
from lab.min_effect import parse_pct
from lab.record_files import TRACE_DAT, TRACE_STATS, VMSTAT_END, VMSTAT_SERIES, VMSTAT_START, WORKLOAD_OUT
from lab.topology.model.topology import Topology
from lab.trace.tracedat import read_trace, stats_lost, stats_per_cpu
from lab.workloads.metric_declarations import WorkloadMetric, is_rate_unit, twin_name, twin_unit_of
from lab.workloads.registry import WORKLOADS

NEUTRAL = "neutral"  # a mechanism counter's "better": shown with its change and significance, not judged
SERIES_KEYS = ("numa_hint_faults", "numa_hint_faults_local", "numa_pages_migrated", "numa_pte_updates")


def vmstat_series(run_dir: Path, t0: float | None) -> dict:
    """Cumulative NUMA counters per sample, from the workload start, and hint-local % per interval."""
    samples = read_vmstat_series(run_dir / VMSTAT_SERIES)
    if not samples:
        return {}
    start_t = t0 if t0 is not None else samples[0][0]
    first = samples[0][1]
    out: dict = {"t": [], **{k: [] for k in SERIES_KEYS}, "hint_local_pct": []}
    prev = first
    for t, vals in samples:
        out["t"].append(round(t - start_t, 2))
        for k in SERIES_KEYS:
            out[k].append(vals.get(k, 0) - first.get(k, 0))
        df = vals.get("numa_hint_faults", 0) - prev.get("numa_hint_faults", 0)
        dl = vals.get("numa_hint_faults_local", 0) - prev.get("numa_hint_faults_local", 0)
        out["hint_local_pct"].append(hint_local_percent(df, dl) if df else None)
        prev = vals
    return out


def run_metrics(run_dir: Path, topo: Topology, recorded: tuple[str, ...], t0: float | None) -> dict:
    """Everything measurable about one run, as JSON-ready data."""
    out: dict = {"trace_problems": []}
    notes: list[str] = []  # what numalab reads that this kernel does not have (interface_notes)
    recorded_names = {e.split(":")[-1] for e in recorded}
    trace = run_dir / TRACE_DAT
    events = None  # the decoded NUMA events, for the trajectory's fingerprint
    if trace.exists():
        try:
            data = read_trace(trace, ANALYSIS_EVENTS)
            events = data.events
            counts = data.counts
            out["events"] = {n: counts.get(n, 0) for n in sorted(recorded_names)}
            stats = stats_lost(run_dir / TRACE_STATS)
            # Each loss once: the per-CPU stats and trace-cmd's DROPPED notices see the same overruns.
            per_cpu = lost_per_cpu(stats_per_cpu(run_dir / TRACE_STATS), data.dropped)
            held = sum(counts.values())
            out["lost_events"] = sum(per_cpu.values())
            out["lost_per_cpu"] = {str(c): n for c, n in per_cpu.items() if n}
            out["trace_records"] = held
            out |= completeness(held, out["lost_events"])
            if stats["entries"] and held < stats["entries"]:
                data.problems.append(f"trace.dat holds {held} of the {stats['entries']} events the guest buffered")
            out["trace_problems"] = data.problems
            out["numa"] = analyse_trace(data, topo, recorded_names, t0 or 0.0)
            notes += format_notes(data.formats, recorded_names)
        except LabError as err:
            out["trace_problems"].append(str(err))
    elif recorded:
        out["trace_problems"].append("no trace.dat in the run")
    if recorded and out["trace_problems"]:
        # Counts from a trace that could not be read whole are not counts: such a run is left out of
        # comparisons as one that lost events is (lab.analysis.lost, compare), and its counts are null, not 0.
        out["trace_unreadable"] = True
        out["trace_incomplete"] = True
        out["events"] = dict.fromkeys(sorted(recorded_names))
    start, end = read_vmstat(run_dir / VMSTAT_START), read_vmstat(run_dir / VMSTAT_END)
    if start and end:
        d = deltas(start, end)
        # Unrounded: figures are rounded once, when shown (lab.analysis.display).
        # None with no hint faults: mmtests' 100% "local" of nothing would read as perfect locality.
        d["hint_local_pct"] = (
            hint_local_percent(d["numa_hint_faults"], d.get("numa_hint_faults_local", 0))
            if d.get("numa_hint_faults")
            else None
        )
        # The figures made of several counters only when the kernel has them all: not from zeros.
        if all(k in d for k in MMTESTS_INPUTS):
            d["autonuma_cost"] = autonuma_cost(d["numa_pte_updates"], d["numa_hint_faults"], d["numa_pages_migrated"])
            out["mmtests"] = derived_rows(d)
        out["vmstat"] = d
        out["vmstat_series"] = vmstat_series(run_dir, t0)
        notes += vmstat_notes(start, end)
    # Which path the guest took (lab.analysis.trajectory): equal under --clock virtual for runs that repeat.
    if path := fingerprint(events if not out.get("trace_unreadable") else None, start, end, run_dir / WORKLOAD_OUT):
        out["trajectory"] = path
    if nodes := node_memory(run_dir, topo, t0):
        out["node_memory"] = nodes  # each node's memory over time, the workload's pages per node (its checks too)
    if notes:
        out["interface_notes"] = notes
    return out


# The counters mmtests' derived rows and the AutoNUMA cost are made of.
MMTESTS_INPUTS = (
    "numa_pte_updates",
    "numa_huge_pte_updates",
    "numa_hint_faults",
    "numa_hint_faults_local",
    "numa_pages_migrated",
)


def vmstat_notes(start: dict[str, int], end: dict[str, int]) -> list[str]:
    """A line naming the /proc/vmstat counters numalab reads that this kernel does not have (a rename, or a
    config without NUMA balancing): they are left out of the metrics, never counted as 0. [] if all are there."""
    gone = [k for k in VMSTAT_NUMA_KEYS if k not in start and k not in end]
    if not gone:
        return []
    return [
        f"/proc/vmstat: this kernel has no {', '.join(gone)} (renamed, or not built in): left out, not counted as 0"
    ]


@dataclass(frozen=True)
class Twin:
    """A throughput metric's per-vCPU-second twin: the same work divided by vCPU CPU time, not guest time."""

    rate: str  # the workload result's rate, e.g. "gbps" (work per guest second)
    key: str  # the twin's name in workload.*, e.g. "gbps_per_vcpu_s"
    work: str  # the result's count of the same work, e.g. "bytes_touched"
    scale: float  # work units per count (1e-9: bytes -> GB)


def _declared_by_workloads() -> tuple[WorkloadMetric, ...]:
    """Every built-in workload's metrics (lab.workloads.registry), once each, in the registry's order."""
    seen: dict[str, WorkloadMetric] = {}
    for w in WORKLOADS.values():
        for m in w.metrics:
            seen.setdefault(m.name, m)
    return tuple(seen.values())


WORKLOAD_METRICS = _declared_by_workloads()
TWINS = tuple(Twin(m.name, m.twin_key, m.twin.work, m.twin.scale) for m in WORKLOAD_METRICS if m.twin and m.twin_key)
# Rates that are per CPU-second already (the guest's own usr+sys accounting): no twin of their own.
PER_CPU_SECOND = frozenset(f"workload.{m.name}" for m in WORKLOAD_METRICS if m.unit.endswith("/CPU-s"))


def per_vcpu_second(
    result: dict | None, vcpu_time: dict | None, declared: list | None = None, clock: str | None = "host"
) -> dict[str, float]:
    """Each throughput metric's twin, exactly: W / S, where

    * W is the work the workload reports for its run: its own count (``bytes_touched`` / 1e9 GB,
      ``round_trips``); a workload that gives only a rate (perf bench's GB/s) counts rate x its
      ``elapsed_s``; a rate a user's workload ``declared`` (a unit per second, lab.workloads.metric_declarations.
      is_rate_unit) counts rate x its result's ``elapsed_s`` when it reports one, else x the vCPU window's
      ``window_s`` (the host's time between the stage marks, which under the host clock is the guest's);
    * S is the vCPU threads' CPU seconds summed over all vCPUs between the guest's workload-start and
      workload-end stage marks (the manifest's ``vcpu_time.run_s``, lab.vm.vcpu_time): what the host
      gave the guest while it did that work, its kernel's share (tracing, NUMA balancing) included.

    A twin exists where its rate does. Empty when there is no such window (no vcpu_time, or S = 0), and
    under ``clock`` "virtual": S is then the one host thread that emulates every vCPU, so W / S measures
    how fast the host emulates the guest, not the guest (docs/reports.md, "Work per vCPU-second")."""
    run_s = (vcpu_time or {}).get("run_s")
    if clock == "virtual" or not result or not isinstance(run_s, (int, float)) or run_s <= 0:
        return {}
    out = {}
    for t in TWINS:
        work, rate, elapsed = result.get(t.work), result.get(t.rate), result.get("elapsed_s")
        if not _number(rate):
            continue  # a twin only where the workload reports the rate itself
        if _number(work):
            out[t.key] = work * t.scale / run_s
        elif _number(elapsed):
            out[t.key] = rate * elapsed / run_s
    elapsed = result.get("elapsed_s") if _number(result.get("elapsed_s")) else (vcpu_time or {}).get("window_s")
    for name, key in declared_rates(declared or []):
        rate = result.get(name)
        if _number(rate) and _number(elapsed) and elapsed > 0 and key not in out and math.isfinite(rate):
            out[key] = rate * elapsed / run_s
    return out


def declared_rates(decls: list) -> list[tuple[str, str]]:
    """(name, twin name) of each rate among a user workload's declarations (the manifest's
    ``workload.metrics``): a well-formed declaration whose unit is per second and whose twin's name is
    neither a built-in metric nor another declared one."""
    if not isinstance(decls, list):
        return []
    ok = [d for d in decls[:256] if isinstance(d, dict) and isinstance(d.get("name"), str)]
    names = {d["name"] for d in ok}
    out = []
    for d in ok:
        unit = d.get("unit", "")
        if isinstance(unit, str) and is_rate_unit(unit) and _DECLARED_NAME.fullmatch(d["name"]):
            key = twin_name(d["name"])
            if key not in names and f"workload.{key}" not in METRIC_KEYS:
                out.append((d["name"], key))
    return out


def clock_mode(manifest: dict) -> str:
    """The guest clock a run recorded (``accelerator.clock.mode``, lab.vm.tcg.guest_clock): "host" or "virtual";
    "host" for a record made before the clock was recorded."""
    accel = manifest.get("accelerator") if isinstance(manifest, dict) else None
    clock = accel.get("clock") if isinstance(accel, dict) else None
    mode = clock.get("mode") if isinstance(clock, dict) else clock
    return mode if mode in ("host", "virtual") else "host"


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclass(frozen=True)
class Metric:
    key: str  # dotted path, e.g. "vmstat.numa_pages_migrated"
    label: str
    unit: str
    better: str  # "lower", "higher" or "neutral" (a mechanism counter: shown, not judged)
    # The mean compare uses: "hmean" only for rates (work per unit of time), as mmtests does for throughput;
    # "amean" for everything else, ratios and percentages above all (one near-zero run would make their
    # harmonic mean say nothing about the others).
    mean: str = "amean"
    # The minimum effect its verdicts use, in percent of the baseline's central value (lab.min_effect): a user
    # workload file's ``min_effect:``; None: the default (or the command line's --min-effect).
    min_effect: float | None = None
    # NUMA balancing's own figure: its scans, hint faults, page migrations and task decisions happen only for
    # fair-class tasks, so where a sched_ext scheduler ran the workload the row is marked as the fair class's
    # (lab.analysis.scheduler_class), never a verdict on the BPF scheduler.
    fair_only: bool = False

    def value(self, manifest: dict) -> float | None:
        node: object = manifest
        for part in self.key.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        ok = isinstance(node, (int, float)) and not isinstance(node, bool) and math.isfinite(node)
        return float(node) if ok else None  # (a record with NaN written by an older numalab: not a value)


MIGRATE_REASONS = ("numa_misplaced", "demotion")  # NUMA balancing's (promotion, in tiering mode) and demotion


def _migrated_by_reason(m: dict) -> dict:
    """Pages the mm_migrate_pages events say were moved, per reason (0 when traced and none were)."""
    by = (m.get("numa") or {}).get("migrate_pages")
    if not isinstance(by, dict):
        return {}
    return {r: (by.get(r) or {}).get("succeeded", 0) for r in MIGRATE_REASONS}


TASK_FIGURES = ("convergence_s", "pingpong", "pingpong_numa")
# From the generic scheduler events alone (any scheduler: lab.analysis.residency); absent from records made before.
GENERIC_TASK_FIGURES = ("settled_s", "migrations_between_nodes", "migrations_within_node")


def _tasks(m: dict) -> dict:
    """The workload's residency figures (lab.analysis.residency): none without tasks; each only where it is
    defined (convergence and NUMA ping-pongs: where balancing decided about a task; ping-pongs: on more
    than one node). A record made before numalab said so (no ``targeted``) is read by the same rule from its
    tasks' NUMA marks: its convergence, where no task had one, was a task that never had to move."""
    res = (m.get("numa") or {}).get("residency") or {}
    w = res.get("workload")
    if not isinstance(w, dict) or not w.get("tasks"):
        return {}
    if "targeted" in w:
        return {k: w.get(k) for k in (*TASK_FIGURES, *GENERIC_TASK_FIGURES)}
    tasks = [t for t in res.get("tasks") or [] if isinstance(t, dict)] if isinstance(res.get("tasks"), list) else []
    events = m.get("events") if isinstance(m.get("events"), dict) else {}
    decided = any(t.get("marks") for t in tasks) or any(events.get(e.name) for e in NUMA_DECISIONS)
    several = any(_nodes_of(t) > 1 for t in tasks)
    return {
        "convergence_s": w.get("convergence_s") if decided else None,
        "pingpong": w.get("pingpong") if several else None,
        "pingpong_numa": w.get("pingpong_numa") if decided and several else None,
    }


def _nodes_of(task: dict) -> int:
    """How many nodes a task's residency row has (its first interval's), 0 without one."""
    seconds = task.get("seconds")
    first = seconds[0] if isinstance(seconds, list) and seconds else None
    return len(first) if isinstance(first, list) else 0


# The LLC split's kinds compared as llc.migrations_*: those between nodes are tasks.migrations_between_nodes, the
# same figure on every machine (_tasks), not given a second name (the record's LLC split and its view keep them).
LLC_MIGRATION_KINDS = tuple(k for k in MIGRATION_KINDS if k != "between_nodes")


def _llc(m: dict) -> dict:
    """Where the workload's tasks moved and were woken, by LLC (lab.analysis.llc): its migrations within a node by
    how far they went on a machine with several LLCs in a node (elsewhere "between LLCs" is 0 by construction),
    its wakeups' shares when they were traced (--event)."""
    numa = m.get("numa") or {}
    view, wakeups = numa.get("llc"), numa.get("llc_wakeups")
    out: dict = {}
    table = (view.get("llcs") or []) if isinstance(view, dict) else []
    n_llcs, n_nodes = len(table), len({x.get("node") for x in table if isinstance(x, dict)})
    # What is 0 by construction is left out, not shown as a count: on another node on one node, another LLC of
    # the waker's node where a node has one LLC.
    never = {"other_node": n_nodes == 1, "waker_node": 0 < n_llcs <= n_nodes}
    if isinstance(view, dict) and (view.get("residency") or {}).get("tasks"):
        mig = (view.get("migrations") or {}).get("workload")
        if isinstance(mig, dict) and n_llcs > n_nodes:
            out |= {f"migrations_{k}": mig.get(k) for k in LLC_MIGRATION_KINDS}
        late = view["residency"].get("one_llc_share_late")
        if isinstance(late, (int, float)) and n_llcs > n_nodes:  # (an LLC a node: the node residency's already)
            out["one_llc_share_late_pct"] = 100.0 * late
    w = wakeups.get("workload") if isinstance(wakeups, dict) else None
    if isinstance(w, dict) and w.get("wakeups"):
        out |= {f"wakeups_{k}_pct": w.get(f"{k}_pct") for k in WAKEUP_KINDS if not never.get(k)}
    return out


def _flat(manifest: dict) -> dict:
    """The manifest plus short aliases under which metrics are addressed."""
    m = manifest.get("metrics", {})
    # Twins under the virtual clock measure the host's emulation, not the guest (per_vcpu_second): records
    # made before numalab left them out have them, and they are not compared either.
    virtual = clock_mode(manifest) == "virtual"
    result = (manifest.get("workload") or {}).get("result") or {}
    result = result if isinstance(result, dict) else {}  # (a record whose result was a list, before it was refused)
    return {
        "workload": {k: v for k, v in result.items() if isinstance(v, (int, float))}
        | {"elapsed_s": result.get("elapsed_s"), "gbps": result.get("gbps")}
        | ({} if virtual else (m.get("per_vcpu_s") or {})),
        "events": m.get("events", {}),
        "tasks": _tasks(m),
        "llc": _llc(m),
        "vmstat": m.get("vmstat", {}),
        "migrate": _migrated_by_reason(m),
        "timings": manifest.get("timings", {}),
        "trace": {"lost_events": m.get("lost_events")},
        "access_local_pct": (manifest.get("access_matrix") or {}).get("local_pct"),
    }


def _workload_metric(m: WorkloadMetric) -> tuple[Metric, ...]:
    """A workload's metric, then its twin per vCPU CPU-second if it is a rate that has one."""
    own = Metric(f"workload.{m.name}", m.label, m.unit, m.better, m.mean)
    if m.twin is None or m.twin_key is None:
        return (own,)
    return own, Metric(f"workload.{m.twin_key}", m.twin.label, m.twin_unit, "higher", "hmean")


METRICS: tuple[Metric, ...] = (
    *(metric for m in WORKLOAD_METRICS for metric in _workload_metric(m)),
    # Mechanism counters: how much balancing did, not how well the workload ran ("neutral": shown with their
    # change and significance, never better or worse; lab.analysis.compare).
    # (fair_only: NUMA balancing's, which acts on fair-class tasks only.)
    *(Metric(f"events.{e.name}", e.name, "events", NEUTRAL, fair_only=True) for e in NUMA_DECISIONS),
    Metric(f"events.{MIGRATE_PAGES.name}", MIGRATE_PAGES.name, "events", NEUTRAL),
    Metric("vmstat.numa_pte_updates", "NUMA PTE updates", "pages", NEUTRAL, fair_only=True),
    Metric("vmstat.numa_hint_faults", "NUMA hint faults", "faults", NEUTRAL, fair_only=True),
    Metric("vmstat.numa_hint_faults_local", "NUMA hint local faults", "faults", NEUTRAL, fair_only=True),
    Metric("vmstat.hint_local_pct", "NUMA hint local percent", "%", "higher", fair_only=True),
    Metric("vmstat.numa_pages_migrated", "NUMA pages migrated", "pages", NEUTRAL, fair_only=True),
    Metric("vmstat.autonuma_cost", "AutoNUMA cost", "", NEUTRAL, fair_only=True),
    Metric("vmstat.pgpromote_success", "pages promoted", "pages", NEUTRAL, fair_only=True),
    Metric("vmstat.pgpromote_candidate", "promotion candidates", "pages", NEUTRAL, fair_only=True),
    Metric("vmstat.pgdemote_kswapd", "pages demoted (kswapd)", "pages", NEUTRAL),
    Metric("vmstat.pgdemote_direct", "pages demoted (direct)", "pages", NEUTRAL),
    Metric("migrate.numa_misplaced", "traced numa_misplaced migrations", "pages", NEUTRAL, fair_only=True),
    Metric("migrate.demotion", "traced demotion migrations", "pages", NEUTRAL),
    # Where the workload's tasks ran (lab.analysis.residency): when those balancing decided about settled (n/a
    # where it decided about none), and how often one came back to a node it had just left (n/a on one node).
    Metric("tasks.convergence_s", "task convergence time", "s", "lower", fair_only=True),
    Metric("tasks.pingpong", "task node ping-pongs", "returns", "lower"),
    Metric("tasks.pingpong_numa", "task node ping-pongs by NUMA moves", "returns", "lower", fair_only=True),
    # The same from the generic scheduler events only, for any scheduler (a sched_ext one too): how the workload's
    # tasks moved, and when those that changed node stayed on the node they ended on (n/a where none changed
    # node). Shown, not judged: a task can settle early on the wrong node, and fewer migrations is not better
    # in itself.
    Metric("tasks.settled_s", "time until the tasks that moved stayed on their final node", "s", NEUTRAL),
    Metric("tasks.migrations_between_nodes", "workload task migrations between nodes", "migrations", NEUTRAL),
    Metric("tasks.migrations_within_node", "workload task migrations within a node", "migrations", NEUTRAL),
    # The same by LLC (lab.analysis.llc): how far the workload's tasks moved within a node (between nodes is
    # tasks.migrations_between_nodes, the same figure: not given twice), and where their wakeups put them against
    # the waker's LLC (with --event sched:sched_waking --event sched:sched_wakeup). Mechanism counts.
    Metric("llc.migrations_within_llc", "workload task migrations within an LLC", "migrations", NEUTRAL),
    Metric("llc.migrations_between_llcs", "workload task migrations between LLCs of a node", "migrations", NEUTRAL),
    Metric("llc.one_llc_share_late_pct", "workload time on its most-used LLC, second half of the run", "%", NEUTRAL),
    Metric("llc.wakeups_waker_llc_pct", "workload wakeups in the waker's LLC", "%", NEUTRAL),
    Metric("llc.wakeups_waker_node_pct", "workload wakeups in another LLC of the waker's node", "%", NEUTRAL),
    Metric("llc.wakeups_other_node_pct", "workload wakeups on another node", "%", NEUTRAL),
    Metric("timings.boot_s", "boot time", "s", "lower"),
    Metric("access_local_pct", "access-local percent (plugin)", "%", "higher"),
)
METRIC_KEYS = {m.key: m for m in METRICS}
# Promotion and demotion: compared only for runs on topologies with a slow memory tier (lab.topology.model.tiers);
# elsewhere they are always 0.
TIERING_METRIC_KEYS = {
    "vmstat.pgpromote_success",
    "vmstat.pgpromote_candidate",
    "vmstat.pgdemote_kswapd",
    "vmstat.pgdemote_direct",
    "migrate.numa_misplaced",
    "migrate.demotion",
}


def metric_values(manifest: dict) -> dict[str, float]:
    flat = _flat(manifest)
    vm = flat["vmstat"]
    if "numa_hint_faults" in vm:
        # Derived again from the deltas: records made before the figures were stored unrounded have
        # them rounded to 2 decimals, and a mean of rounded values is rounded twice.
        flat["vmstat"] = vm | {
            "hint_local_pct": hint_local_percent(vm["numa_hint_faults"], vm.get("numa_hint_faults_local", 0)),
            "autonuma_cost": autonuma_cost(
                vm.get("numa_pte_updates", 0), vm["numa_hint_faults"], vm.get("numa_pages_migrated", 0)
            ),
        }
    if not flat["vmstat"].get("numa_hint_faults"):
        # mmtests reports 100% local with no hint faults; as a metric that
        # would make "no NUMA balancing" look perfect, so leave it out.
        flat["vmstat"] = {k: v for k, v in flat["vmstat"].items() if k != "hint_local_pct"}
    result = (manifest.get("workload") or {}).get("result")
    perf = result.get("converged_s") if isinstance(result, dict) else None
    if perf is not None:
        flat["workload"]["converged_s"] = perf
    if manifest.get("access_matrix"):
        # The access-matrix plugin slows the guest: its times and throughput are never compared.
        flat["workload"], flat["timings"] = {}, {}
    tiered = bool(((manifest.get("topology") or {}).get("tiers") or {}).get("slow_nodes"))
    return {
        m.key: v
        for m in (*METRICS, *declared_metrics(manifest))
        if (v := m.value(flat)) is not None and (tiered or m.key not in TIERING_METRIC_KEYS)
    }


# A user's workload declares its metrics (lab.workloads.user_workload); the run record keeps the declarations
# (manifest workload.metrics), so compare and the report read them back without the workload file.
_DECLARED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def declared_metrics(manifest: dict) -> tuple[Metric, ...]:
    """The metrics a run's user workload declared, as ``workload.<name>`` (a record is a user's file: a
    declaration that is not well formed, or that names a built-in metric, is left out)."""
    workload = manifest.get("workload") if isinstance(manifest, dict) else None
    decls = workload.get("metrics") if isinstance(workload, dict) else None
    if not isinstance(decls, list):
        return ()
    out: dict[str, Metric] = {}
    for d in decls[:256]:
        if not isinstance(d, dict):
            continue
        name, unit, better, mean = d.get("name"), d.get("unit", ""), d.get("better"), d.get("mean", "amean")
        if not (isinstance(name, str) and _DECLARED_NAME.fullmatch(name) and isinstance(unit, str)):
            continue
        key = f"workload.{name}"
        if better in ("higher", "lower") and mean in ("amean", "hmean") and key not in METRIC_KEYS:
            out.setdefault(key, Metric(key, name, unit[:32], better, mean, _effect(d.get("min_effect"))))
    for name, twin in declared_rates(decls[:256]):
        rate = out.get(f"workload.{name}")
        if rate is not None:  # the twin: the same work per vCPU CPU-second, judged as its rate is
            key = f"workload.{twin}"
            label = f"{name} per vCPU CPU-second"
            out.setdefault(key, Metric(key, label, twin_unit_of(rate.unit), rate.better, "hmean", rate.min_effect))
    return tuple(out.values())


def _effect(value: object) -> float | None:
    """A declaration's min_effect as the record has it (a user's file: anything else is left out)."""
    try:
        return None if value is None else parse_pct(value, "min_effect")
    except LabError:
        return None


def metrics_of(manifests: list[dict]) -> tuple[Metric, ...]:
    """The built-in metrics, then those the runs' user workloads declared (the first declaration of a name wins)."""
    declared: dict[str, Metric] = {}
    for m in manifests:
        for metric in declared_metrics(m):
            declared.setdefault(metric.key, metric)
    return (*METRICS, *declared.values())


def get_metric(key: str, manifests: list[dict] | None = None) -> Metric:
    """A metric by key: a built-in, or one the ``manifests``' user workloads declared."""
    known = {m.key: m for m in metrics_of(manifests or [])}
    if key not in known:
        raise LabError(f"metric {key!r}: unknown (known: {', '.join(known)})")
    return known[key]
