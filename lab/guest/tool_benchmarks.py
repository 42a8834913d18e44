"""The everyday scheduler benchmarks from Debian packages, run in the guest as host tools: each one's
command, scaled to the VM and the duration, and the parser of its output.

* ``perf-sched-messaging``: ``perf bench sched messaging`` (hackbench's ancestor in perf): groups of 20
  senders and 20 receivers over sockets, one group per guest CPU; wakeups and load balancing under a
  burst of short-lived communicating tasks. ``messaging_s``: the mean time a run (lower is better).
* ``perf-sched-pipe``: ``perf bench sched pipe``: two tasks ping-pong over a pipe; the wakeup path and
  where the wakee is placed (same CPU, same LLC, another node). ``pipe_usecs_per_op`` (lower) and
  ``pipe_ops_per_s`` (higher).
* ``stress-ng-numa``: stress-ng's ``--numa`` stressor, one instance per guest node with CPUs: each moves its pages
  between nodes (``mbind``, ``migrate_pages``, ``move_pages``), so page migration and the NUMA memory
  policy paths. ``stressng_ops_per_s`` (bogo ops per second, real time) and ``stressng_ops_per_cpu_s``
  (per usr+sys second), higher is better. One of its operations moves a 4 MiB buffer around every node
  many times: under TCG one takes seconds (a 3 s run on ring-2 with an instance per CPU completed none),
  so give it 10 s or more; a run that completes no operation is a parse error, not a zero.
* ``stress-ng-vm``: stress-ng's ``--vm`` stressor (anonymous memory written and checked), one instance
  per guest CPU sharing numalab's memory share: page faults, reclaim pressure and, with balancing on, NUMA
  hinting faults on memory its task touches. The same two metrics.
* ``sysbench-memory``: sysbench's memory test, one thread per guest CPU, for the duration: memory
  bandwidth of 1 KiB blocks. ``sysbench_mib_per_s`` (higher is better).
* ``sysbench-threads``: sysbench's threads test, two threads per guest CPU contending for mutexes and
  yielding: the yield and wakeup paths. ``sysbench_events_per_s`` (higher) and
  ``sysbench_latency_avg_ms`` (lower).
* ``cyclictest``: rt-tests' cyclictest, one thread per guest CPU, each at a 1 ms interval (``-d 0``: not
  cyclictest's default of 0.5 ms more for each further thread), at the default
  SCHED_OTHER priority (the fair class's wakeup latency, not an RT figure). ``cyclictest_avg_us`` (the
  threads' mean) and ``cyclictest_max_us`` (the worst), lower is better. Under TCG both are mostly the
  emulator's: compare kernels on one host, never a TCG figure with hardware's.

Every parser is given the guest's output, which is untrusted: it reads numbers with
:func:`lab.untrusted.to_float`, and output without what it expects is ``{"parse_error": why}``.
"""

from __future__ import annotations

import re

from lab.guest.workload_metrics import WorkloadMetric, rate
from lab.topology.model import Topology
from lab.untrusted import to_float

MESSAGING_LOOPS = 20  # messages each sender sends per perf bench sched messaging run
PIPE_LOOPS = 2000  # round trips per perf bench sched pipe run


# Each tool's metrics: what its parser reports, compared as workload.<name>.
MESSAGING = (WorkloadMetric("messaging_s", "perf bench sched messaging time a run", "s", "lower"),)
PIPE = (
    WorkloadMetric("pipe_usecs_per_op", "perf bench sched pipe time a round trip", "us", "lower"),
    rate(
        "pipe_ops_per_s", "perf bench sched pipe round trips", "1/s", "pipe_ops", "pipe round trips per vCPU CPU-second"
    ),
)
STRESS_NG = (
    rate(
        "stressng_ops_per_s",
        "stress-ng bogo ops per second",
        "1/s",
        "stressng_ops",
        "stress-ng ops per vCPU CPU-second",
    ),
    # per guest usr+sys second already (stress-ng's own accounting): no twin
    WorkloadMetric("stressng_ops_per_cpu_s", "stress-ng bogo ops per usr+sys second", "1/CPU-s", "higher", "hmean"),
)
SYSBENCH_MEMORY = (
    rate(
        "sysbench_mib_per_s", "sysbench memory bandwidth", "MiB/s", "sysbench_mib", "sysbench MiB per vCPU CPU-second"
    ),
)
SYSBENCH_THREADS = (
    rate(
        "sysbench_events_per_s",
        "sysbench threads events",
        "1/s",
        "sysbench_events",
        "sysbench events per vCPU CPU-second",
    ),  # fmt: skip
    WorkloadMetric("sysbench_latency_avg_ms", "sysbench threads mean latency", "ms", "lower"),
)
CYCLICTEST = (
    WorkloadMetric("cyclictest_avg_us", "cyclictest mean wakeup latency", "us", "lower"),
    WorkloadMetric("cyclictest_max_us", "cyclictest worst wakeup latency", "us", "lower"),
)


def _repeat(d: float, cmd: str) -> str:
    """``cmd`` run again and again until ``d`` seconds are over (at least once); a failing run ends it."""
    return f'end=$(($(date +%s) + {max(1, round(d))})); while [ "$(date +%s)" -lt "$end" ]; do {cmd} || exit; done'


def perf_sched_messaging(topo: Topology, d: float) -> str:
    return _repeat(d, f"perf bench sched messaging -g {max(1, topo.total_cpus)} -l {MESSAGING_LOOPS}")


def perf_sched_pipe(topo: Topology, d: float) -> str:
    return _repeat(d, f"perf bench sched pipe -l {PIPE_LOOPS}")


def stress_ng(stressor: str, mem_share: float = 0.0, per: str = "cpu"):
    """stress-ng with one ``stressor`` instance per guest CPU (``per`` "cpu") or node ("node") for the
    duration (``--vm``: the instances share ``mem_share`` of the guest's memory); its metrics to stdout."""

    def cmd(topo: Topology, d: float) -> str:
        n = max(1, topo.total_cpus if per == "cpu" else len(topo.cpu_nodes))
        extra = f" --vm-bytes {max(4, int(topo.total_memory_mib * mem_share) // n)}M" if stressor == "vm" else ""
        return f"stress-ng --{stressor} {n}{extra} -t {max(1, round(d))}s --metrics-brief 2>&1"

    return cmd


_TOTAL_TIME = re.compile(r"^\s*Total time:\s*(\S+)\s*\[sec\]\s*$", re.MULTILINE)
_USECS_OP = re.compile(r"^\s*(\S+)\s+usecs/op\s*$", re.MULTILINE)
_OPS_SEC = re.compile(r"^\s*(\S+)\s+ops/sec\s*$", re.MULTILINE)


def _numbers(pattern: re.Pattern[str], text: str) -> list[float]:
    return [v for t in pattern.findall(text) if (v := to_float(t)) is not None and v >= 0]


def parse_perf_messaging(stdout: str) -> dict:
    times = _numbers(_TOTAL_TIME, stdout)
    if not times:
        return {"parse_error": "no perf bench sched messaging 'Total time:' line in the workload output"}
    return {"messaging_s": sum(times) / len(times), "messaging_runs": len(times)}


def parse_perf_pipe(stdout: str) -> dict:
    usecs, ops = _numbers(_USECS_OP, stdout), _numbers(_OPS_SEC, stdout)
    if not usecs or not ops or len(usecs) != len(ops):
        return {"parse_error": "no perf bench sched pipe 'usecs/op' and 'ops/sec' lines in the workload output"}
    return {"pipe_usecs_per_op": sum(usecs) / len(usecs), "pipe_ops_per_s": sum(ops) / len(ops),
            "pipe_runs": len(ops), "pipe_ops": len(ops) * PIPE_LOOPS}  # fmt: skip


# stress-ng --metrics-brief: "stress-ng: metrc: [PID] numa  24  3.06  0.08  5.77  7.85  4.10"
# (stressor, bogo ops, real s, usr s, sys s, bogo ops/s real time, bogo ops/s usr+sys time)
_METRC = re.compile(r"metrc:\s*\[\d+\]\s+([a-z0-9-]+)" + r"\s+(\S+)" * 6 + r"\s*$", re.MULTILINE)


_SUCCESS = re.compile(r"\bsuccessful run completed")  # (not "unsuccessful run completed")


def parse_stress_ng(stressor: str):
    def parse(stdout: str) -> dict:
        rows = [m for m in _METRC.finditer(stdout) if m.group(1) == stressor]
        if not rows:
            return {"parse_error": f"no stress-ng metrics line for the {stressor} stressor in the workload output"}
        vals = [to_float(g) for g in rows[-1].groups()[1:]]
        if any(v is None or v < 0 for v in vals):
            return {"parse_error": f"stress-ng's {stressor} metrics line has a value that is not a number"}
        ops, real_s, _usr, _sys, per_s, per_cpu_s = vals
        if not ops:
            why = f"stress-ng completed no {stressor} operation in {real_s:g}s: give a longer --duration"
            return {"parse_error": why}
        if not _SUCCESS.search(stdout):
            return {"parse_error": f"stress-ng did not report a successful {stressor} run"}
        return {"stressng_ops": ops, "stressng_real_s": real_s, "stressng_ops_per_s": per_s,
                "stressng_ops_per_cpu_s": per_cpu_s}  # fmt: skip

    return parse


def sysbench_memory(topo: Topology, d: float) -> str:
    return f"sysbench memory --threads={max(1, topo.total_cpus)} --time={max(1, round(d))} run"


def sysbench_threads(topo: Topology, d: float) -> str:
    return f"sysbench threads --threads={2 * max(1, topo.total_cpus)} --time={max(1, round(d))} run"


def cyclictest(topo: Topology, d: float) -> str:
    return f"cyclictest -q -m -t {max(1, topo.total_cpus)} -i 1000 -d 0 -D {max(1, round(d))}"


_MIB_S = re.compile(r"^\s*(\S+)\s+MiB transferred\s+\((\S+)\s+MiB/sec\)\s*$", re.MULTILINE)
_SB_EVENTS = re.compile(r"^\s*total number of events:\s+(\S+)\s*$", re.MULTILINE)
_SB_TIME = re.compile(r"^\s*total time:\s+(\S+?)s\s*$", re.MULTILINE)
_SB_AVG = re.compile(r"^\s*avg:\s+(\S+)\s*$", re.MULTILINE)
_CYCLIC = re.compile(r"^T:\s*\d+\s.*\bAvg:\s*(\S+)\s+Max:\s*(\S+)\s*$", re.MULTILINE)


def parse_sysbench_memory(stdout: str) -> dict:
    rows = [(to_float(m), to_float(r)) for m, r in _MIB_S.findall(stdout)]
    if not rows or any(v is None or v < 0 for v in rows[-1]):
        return {"parse_error": "no sysbench 'N MiB transferred (R MiB/sec)' line in the workload output"}
    mib, rate = rows[-1]
    return {"sysbench_mib": mib, "sysbench_mib_per_s": rate}


def parse_sysbench_threads(stdout: str) -> dict:
    events, secs, avg = _numbers(_SB_EVENTS, stdout), _numbers(_SB_TIME, stdout), _numbers(_SB_AVG, stdout)
    if not events or not secs or not avg or secs[-1] <= 0:
        return {"parse_error": "no sysbench 'total number of events', 'total time' and latency 'avg' lines"}
    return {"sysbench_events": events[-1], "sysbench_events_per_s": events[-1] / secs[-1],
            "sysbench_latency_avg_ms": avg[-1]}  # fmt: skip


def parse_cyclictest(stdout: str) -> dict:
    rows = [(to_float(a), to_float(m)) for a, m in _CYCLIC.findall(stdout)]
    vals = [(a, m) for a, m in rows if a is not None and m is not None and a >= 0 and m >= 0]
    if not vals or len(vals) != len(rows):
        return {"parse_error": "no cyclictest 'T: ... Avg: ... Max: ...' lines (or one is not a number)"}
    return {"cyclictest_avg_us": sum(a for a, _ in vals) / len(vals), "cyclictest_max_us": max(m for _, m in vals),
            "cyclictest_threads": len(vals)}  # fmt: skip
