"""Workloads: the command a guest runs, scaled to the VM, and how to read its output.

* ``numa01``, ``numa01-thread-alloc``, ``numa02``, ``numa02-smt``: autonuma-
  benchmark semantics, our own static programs (``images/workloads``).
* ``perf-numa01`` … ``perf-numa05``: seed 000's ``perf bench numa mem`` lines
  with -p/-t and -P/-T scaled to the guest's CPUs, nodes and memory.
* ``pairs``: communicating task pairs over pipes (seed 003).
* ``nodes13``: CPU-bound tasks bound to nodes 1 and 3, all started on node 1
  (seed 002's worst case for sched groups built from one CPU's view).
* ``idle``: nothing, for boot-overhead measurements.
* ``hackbench``: rt-tests' hackbench over pipes, scaled to the guest's CPUs (the host's, as a tool layer).
* ``perf-sched-messaging``, ``perf-sched-pipe``, ``stress-ng-numa``, ``stress-ng-vm``, ``sysbench-memory``,
  ``sysbench-threads``, ``cyclictest``: the everyday
  scheduler benchmarks from Debian packages (lab.guest.tool_benchmarks).
* ``latency-matrix``: a pointer chase for every (CPU node, memory node) pair, its
  remote/local ratio (the check of ``numalab run --remote-latency``).

Each workload declares what the guest image must carry to run it (``programs``,
``tools``); lab.guest.image lays exactly those over its base.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from lab.errors import LabError
from lab.guest import tool_benchmarks as tb
from lab.guest import workload_metrics as wm
from lab.topology.model import Topology
from lab.untrusted import guest_json, shown, to_float

# Share of guest memory a workload may touch: TCG is slow and the guest
# kernel, initramfs and trace buffers need the rest.
MEM_SHARE = 0.35


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    command: Callable[[Topology, float], str]
    kind: str  # "lab" (NUMALAB_RESULT line) or "perf" (perf bench summary)
    # What the guest image must carry to run it (lab.guest.image): our own static programs, built from
    # images/workloads, and host tools (lab.guest.image.GUEST_TOOLS), each with its library closure.
    programs: tuple[str, ...] = field(kw_only=True)
    tools: tuple[str, ...] = field(default=(), kw_only=True)
    # The figures of its result that compare reads as metrics ("workload.<name>"; lab.analysis.metrics builds
    # its registry from these). A NUMALAB_RESULT object (kind "lab") must give each as a finite number.
    metrics: tuple[wm.WorkloadMetric, ...] = field(default=wm.MEMORY, kw_only=True)
    # A user's workload (kind "user": a workload file or --workload-cmd, lab.guest.user_workload): what it
    # carries into the guest, how its output is read and which metrics it declares. None for the built-ins.
    user: UserSpec | None = field(default=None, kw_only=True)
    # Kind "tool" (a benchmark from a Debian package, lab.guest.tool_benchmarks): its output's parser.
    parse: Callable[[str], dict] | None = field(default=None, kw_only=True, compare=False)


@dataclass(frozen=True)
class UserMetric:
    """A metric a user's workload declares: compared as ``workload.<name>`` (lab.analysis.metrics)."""

    name: str
    unit: str = ""
    higher_is_better: bool = True
    mean: str = "amean"  # amean or hmean (rates)
    min_effect: float | None = None  # percent of the baseline's central value (lab.min_effect); None: the default

    @property
    def twin_key(self) -> str | None:
        """Its per-vCPU-second twin's name when its unit is a rate (lab.analysis.metrics.per_vcpu_second)."""
        return wm.twin_name(self.name) if wm.is_rate_unit(self.unit) else None

    def to_dict(self) -> dict:
        out = {"name": self.name, "unit": self.unit, "better": "higher" if self.higher_is_better else "lower",
               "mean": self.mean}  # fmt: skip
        return out if self.min_effect is None else out | {"min_effect": self.min_effect}


@dataclass(frozen=True)
class UserSpec:
    """A user's workload, read and checked on the host before any boot (lab.guest.user_workload)."""

    source: str  # the workload file's path, or "--workload-cmd"
    sha256: str  # of the workload file's bytes (--workload-cmd: of the command and its files' contents)
    template: str  # the command, with {cpus} {nodes} {mem_mib} {duration} not yet filled in
    files: tuple[tuple[str, str], ...]  # (host path, name in the guest's /workload)
    tools: tuple[str, ...]  # host binaries, copied to the same path with their shared-library closure
    packages: tuple[str, ...]  # the Debian packages whose programs are among the tools
    json_prefix: str = ""  # results: a line starting with this, then a JSON object
    regex: tuple[tuple[str, str], ...] = ()  # results: (metric, pattern with one group)
    metrics: tuple[UserMetric, ...] = ()
    all_numeric: bool = False  # --workload-cmd: every numeric key of the JSON object is a metric (higher is better)

    def record(self) -> dict:
        """What the manifest says about it (``workload.spec``)."""
        return {
            "source": self.source,
            "sha256": self.sha256,
            "command": self.template,
            "files": [guest for _, guest in self.files],
            "tools": list(self.tools),
            "packages": list(self.packages),
            "results": {"json-line": self.json_prefix} if self.json_prefix else {"regex": dict(self.regex)},
        }

    def declarations(self, result: dict | None) -> list[dict]:
        """The metrics the run's record declares: the file's, or (--workload-cmd) every finite number of the
        result, higher being better."""
        if not self.all_numeric:
            return [m.to_dict() for m in self.metrics]
        nums = sorted(k for k, v in (result or {}).items() if _is_number(v) and RESULT_KEY.fullmatch(k))
        return [UserMetric(k).to_dict() for k in nums]


# A user's metric name (and a --workload-cmd result key taken as a metric): a word of up to 64 characters.
RESULT_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _mem(topo: Topology, parts: int, cap: int) -> int:
    return max(8, min(cap, int(topo.total_memory_mib * MEM_SHARE / max(parts, 1))))


def _dur(d: float) -> str:
    return f"{d:g}"


def _numa01(thread_alloc: bool) -> Callable[[Topology, float], str]:
    def cmd(topo: Topology, d: float) -> str:
        t = max(1, topo.total_cpus // 2)
        flag = " --thread-alloc" if thread_alloc else ""
        return f"numa01 --duration {_dur(d)} --threads {t} --mem-mib {_mem(topo, 2, 3072)}{flag}"

    return cmd


def _numa02(smt: bool) -> Callable[[Topology, float], str]:
    def cmd(topo: Topology, d: float) -> str:
        t = max(1, topo.total_cpus // 2 if smt else topo.total_cpus)
        return f"numa02 --duration {_dur(d)} --threads {t} --mem-mib-per-thread {_mem(topo, t, 32)}"

    return cmd


# The tiering workload's hot set: this much of the fast tier (the nodes that are not slow, dax kmem,
# nodes: lab.topology.tiers), but at most TIER_HOT_MAX of all guest memory.
TIER_HOT_FACTOR = 1.25
TIER_HOT_MAX = 0.55


def _tiering(topo: Topology, d: float) -> str:
    """numa02's threads, each writing its own memory over and over, with a hot set larger than the fast tier."""
    slow = set(topo.tiers.slow_nodes) if topo.tiers else set()
    fast = sum(n.memory_mib for n in topo.nodes if n.id not in slow)
    hot = min(int(fast * TIER_HOT_FACTOR), int(topo.total_memory_mib * TIER_HOT_MAX))
    t = max(1, topo.total_cpus)
    return f"numa02 --duration {_dur(d)} --threads {t} --mem-mib-per-thread {max(8, hot // t)}"


def _pairs(topo: Topology, d: float) -> str:
    return f"pairs --duration {_dur(d)} --pairs {max(1, topo.total_cpus // 4)}"


def _nodes13(topo: Topology, d: float) -> str:
    """Two tasks per CPU of nodes 1 and 3 together, all started on node 1."""
    cpus = topo.node_cpus()
    a, b = (cpus[n] if n < len(cpus) else [] for n in (1, 3))
    if not a or len(a) != len(b):
        raise LabError(
            f"--workload nodes13: topology {topo.name} needs nodes 1 and 3 with the same number of CPUs"
            f" (has {len(a)} and {len(b)})"
        )
    width = len(a)
    return f"nodes13 --duration {_dur(d)} --a-cpu {a[0]} --b-cpu {b[0]} --width {width} --tasks {4 * width}"


def _idle(topo: Topology, d: float) -> str:
    return f"idle --duration {_dur(d)}"


def _spin(topo: Topology, d: float) -> str:
    return f"spin --duration {_dur(d)} --threads {topo.total_cpus}"


def _latency_matrix(topo: Topology, d: float) -> str:
    """One buffer per (CPU node, memory node) pair, 32 MiB (128x the remote-latency model's 256 KiB cache, and
    as large as a host's last-level cache: the buffers together are larger) unless the guest is too small."""
    pairs = len(topo.cpu_nodes) * topo.n_nodes
    return f"latency-matrix --duration {_dur(d)} --mem-mib {_mem(topo, pairs, 32)}"


def _perf(procs: Callable[[int, int], int], threads: Callable[[int, int], int], per_thread_mem: bool):
    """Seed 000's ``perf bench numa mem --no-data_rand_walk -p P -t T -G 0 -P MB -T MB -l 50 -c -s S``.

    procs/threads map (cpus, nodes) to processes and threads per process.
    """

    def cmd(topo: Topology, d: float) -> str:
        cpus, nodes = topo.total_cpus, max(1, len(topo.cpu_nodes))
        p = max(1, procs(cpus, nodes))
        t = max(1, threads(cpus, nodes))
        if per_thread_mem:
            pm, tm = 0, _mem(topo, p * t, 32)
        else:
            pm, tm = _mem(topo, p, 3072), 0
        # -l is large so that -s (seconds) bounds the run, as our duration does.
        return (
            f"perf bench numa mem --no-data_rand_walk -p {p} -t {t} -G 0 -P {pm} -T {tm} "
            f"-l 1000000 -c -s {max(1, round(d))}"
        )

    return cmd


PERF_TOOL = ("perf",)  # perf bench numa: the host's perf, as a tool layer
HACKBENCH_LOOPS = 50  # messages each sender sends per hackbench run


def _hackbench(topo: Topology, d: float) -> str:
    """rt-tests' hackbench (mmtests' hackbench-process-pipes): a group of 4 senders and 4 receivers per guest
    CPU, run again and again until the duration is over (at least once); each run prints its ``Time:``."""
    groups = max(1, topo.total_cpus)
    return (
        f"end=$(($(date +%s) + {max(1, round(d))})); "
        f'while [ "$(date +%s)" -lt "$end" ]; do hackbench -p -g {groups} -f 4 -l {HACKBENCH_LOOPS} || exit; done'
    )


PERF_METRICS = (*wm.MEMORY, wm.CONVERGED)  # perf bench numa mem: GB/s, its time and its convergence

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in [
        Workload(
            "numa01",
            "2 processes, threads share each process's memory (adverse)",
            _numa01(False),
            "lab",
            programs=("numa01",),
        ),
        Workload(
            "numa01-thread-alloc",
            "numa01 with per-thread slices of the process memory",
            _numa01(True),
            "lab",
            programs=("numa01",),
        ),
        Workload(
            "numa02",
            "1 process, every thread its own private memory (ideal locality)",
            _numa02(False),
            "lab",
            programs=("numa02",),
        ),
        Workload("numa02-smt", "numa02 with half the threads", _numa02(True), "lab", programs=("numa02",)),
        Workload(
            "pairs",
            "communicating task pairs over pipes (seed 003)",
            _pairs,
            "lab",
            programs=("pairs",),
            metrics=(*wm.MEMORY, wm.ROUND_TRIPS),
        ),
        Workload(
            "nodes13",
            "2 x CPUs tasks bound to nodes 1 and 3, all started on node 1 (seed 002)",
            _nodes13,
            "lab",
            programs=("nodes13",),
            metrics=(*wm.MEMORY, wm.BALANCE),
        ),
        Workload(
            "tiering",
            "numa02 with a hot set 1.25x the fast memory tier: pages must be promoted and demoted",
            _tiering,
            "lab",
            programs=("numa02",),
        ),
        Workload("idle", "no work: boot and trace overhead only", _idle, "lab", programs=("idle",)),
        Workload(
            "spin",
            "a counted busy loop on every CPU: instructions per guest second (the --clock virtual check)",
            _spin,
            "lab",
            programs=("spin",),
            metrics=(*wm.MEMORY, wm.INSN),
        ),
        Workload(
            "hackbench",
            "rt-tests' hackbench over pipes: a group of 4 senders and 4 receivers per CPU, repeated for the duration",
            _hackbench,
            "hackbench",
            programs=(),
            tools=("hackbench",),
            metrics=(wm.HACKBENCH,),
        ),
        Workload(
            "perf-sched-messaging",
            "perf bench sched messaging: a group of 20 senders and 20 receivers per CPU, repeated for the duration",
            tb.perf_sched_messaging,
            "tool",
            programs=(),
            tools=PERF_TOOL,
            parse=tb.parse_perf_messaging,
            metrics=tb.MESSAGING,
        ),
        Workload(
            "perf-sched-pipe",
            "perf bench sched pipe: two tasks ping-pong over a pipe, repeated for the duration",
            tb.perf_sched_pipe,
            "tool",
            programs=(),
            tools=PERF_TOOL,
            parse=tb.parse_perf_pipe,
            metrics=tb.PIPE,
        ),
        Workload(
            "stress-ng-numa",
            "stress-ng --numa, one instance per node: pages moved between nodes (mbind, migrate_pages, move_pages)",
            tb.stress_ng("numa", per="node"),
            "tool",
            programs=(),
            tools=("stress-ng",),
            parse=tb.parse_stress_ng("numa"),
            metrics=tb.STRESS_NG,
        ),
        Workload(
            "stress-ng-vm",
            "stress-ng --vm, one instance per CPU: anonymous memory written and checked (faults, NUMA hinting)",
            tb.stress_ng("vm", MEM_SHARE),
            "tool",
            programs=(),
            tools=("stress-ng",),
            parse=tb.parse_stress_ng("vm"),
            metrics=tb.STRESS_NG,
        ),
        Workload(
            "sysbench-memory",
            "sysbench memory, one thread per CPU: memory bandwidth in 1 KiB blocks",
            tb.sysbench_memory,
            "tool",
            programs=(),
            tools=("sysbench",),
            parse=tb.parse_sysbench_memory,
            metrics=tb.SYSBENCH_MEMORY,
        ),
        Workload(
            "sysbench-threads",
            "sysbench threads, two threads per CPU contending for mutexes and yielding",
            tb.sysbench_threads,
            "tool",
            programs=(),
            tools=("sysbench",),
            parse=tb.parse_sysbench_threads,
            metrics=tb.SYSBENCH_THREADS,
        ),
        Workload(
            "cyclictest",
            "rt-tests' cyclictest, one SCHED_OTHER thread per CPU at a 1 ms interval: wakeup latency",
            tb.cyclictest,
            "tool",
            programs=(),
            tools=("cyclictest",),
            parse=tb.parse_cyclictest,
            metrics=tb.CYCLICTEST,
        ),
        Workload(
            "latency-matrix",
            "pointer-chase latency of every (CPU node, memory node) pair and its remote/local ratio",
            _latency_matrix,
            "lab",
            programs=("latency-matrix",),
            metrics=(*wm.MEMORY, wm.REMOTE_RATIO),
        ),
        Workload(
            "perf-numa01",
            "seed 000 numa01.sh: 2 procs x ncpus/2 threads, process-shared memory",
            _perf(lambda c, n: 2, lambda c, n: c // 2, False),
            "perf",
            programs=(),
            tools=PERF_TOOL,
            metrics=PERF_METRICS,
        ),
        Workload(
            "perf-numa02",
            "seed 000 numa02.sh: 1 proc x ncpus threads, 32MB thread-local memory",
            _perf(lambda c, n: 1, lambda c, n: c, True),
            "perf",
            programs=(),
            tools=PERF_TOOL,
            metrics=PERF_METRICS,
        ),
        Workload(
            "perf-numa03",
            "seed 000 numa03.sh: 1 proc x ncpus threads, process-shared memory",
            _perf(lambda c, n: 1, lambda c, n: c, False),
            "perf",
            programs=(),
            tools=PERF_TOOL,
            metrics=PERF_METRICS,
        ),
        Workload(
            "perf-numa04",
            "seed 000 numa04.sh: nr_nodes procs x ncpus/nr_nodes threads",
            _perf(lambda c, n: n, lambda c, n: c // n, False),
            "perf",
            programs=(),
            tools=PERF_TOOL,
            metrics=PERF_METRICS,
        ),
        Workload(
            "perf-numa05",
            "seed 000 numa05.sh: 2*nr_nodes procs x ncpus/(2*nr_nodes) threads",
            _perf(lambda c, n: 2 * n, lambda c, n: c // (2 * n), False),
            "perf",
            programs=(),
            tools=PERF_TOOL,
            metrics=PERF_METRICS,
        ),
    ]
}


def builtin_metric(name: str) -> wm.WorkloadMetric | None:
    """The built-in workload metric ``workload.<name>`` (or the rate whose per-vCPU-second twin it is), or
    None: a user's workload may not declare one (lab.guest.user_workload; compare fixes its direction)."""
    for w in WORKLOADS.values():
        for m in w.metrics:
            if name in (m.name, m.twin_key):
                return m
    return None


# The built-in figures that are durations (unit "s"): lab.analysis.plausible bounds them by the host's window.
SECONDS_METRICS = frozenset(m.name for w in WORKLOADS.values() for m in w.metrics if m.unit == "s")


def get_workload(name: str) -> Workload:
    if name not in WORKLOADS:
        raise LabError(f"--workload {name}: unknown workload (known: {', '.join(WORKLOADS)})")
    return WORKLOADS[name]


_PERF_LINE = re.compile(r"^\s*(\w+),\s+([-\d.]+),\s+([^,]+),\s+(\S+)\s*$")
_CONVERGED = re.compile(r"\(\s*([\d.]+)s converged\)")
RESULT_MARK = "NUMALAB_RESULT "


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_result(workload: Workload, result: object) -> str | None:
    """What is wrong with a NUMALAB_RESULT value (None if nothing): it must be a JSON object whose declared
    figures (``workload.metrics``) are finite numbers."""
    if not isinstance(result, dict):
        return f"NUMALAB_RESULT is a JSON {type(result).__name__}, not an object"
    for key in (m.name for m in workload.metrics):
        if key not in result:
            return f"NUMALAB_RESULT has no {key}"
        if not _is_number(result[key]):
            return f"NUMALAB_RESULT {key} is {shown(json.dumps(result[key])[:60], 60)}, not a finite number"
    return None


def _finite(result: dict) -> dict:
    """A parser's figures, or a parse error when one is out of range: a mean or sum of huge guest numbers
    can overflow to inf, which no comparison may take for a figure."""
    bad = [k for k, v in result.items() if isinstance(v, float) and not math.isfinite(v)]
    return {"parse_error": f"the workload output gives {bad[0]} out of range"} if bad else result


def parse_output(workload: Workload, stdout: str) -> dict:
    """The workload's own figures: a NUMALAB_RESULT JSON line or perf bench's summary. Never raises: output
    that is not what the workload writes (the guest is untrusted) gives ``{"parse_error": why}``, and
    nothing of it is kept that compare could take for a figure."""
    if workload.user is not None:
        return parse_user(workload.user, stdout)
    if workload.parse is not None:
        return _finite(workload.parse(stdout))
    if workload.kind == "hackbench":
        return parse_hackbench(stdout)
    if workload.kind == "lab":
        for line in reversed(stdout.splitlines()):
            if line.startswith(RESULT_MARK):
                try:
                    result = guest_json(line[len(RESULT_MARK) :])
                except ValueError as e:
                    return {"parse_error": f"NUMALAB_RESULT line: {e}"}
                wrong = check_result(workload, result)
                return {"parse_error": wrong} if wrong else result  # type: ignore[return-value]
        return {"parse_error": "no NUMALAB_RESULT line in the workload output"}
    out: dict = {"summary": {}}
    for line in stdout.splitlines():
        m = _PERF_LINE.match(line)
        if m and (value := to_float(m.group(2))) is not None:
            out["summary"][m.group(4)[:64]] = {"value": value, "unit": m.group(3).strip()[:32]}
    conv = [v for c in _CONVERGED.findall(stdout) if (v := to_float(c)) is not None]
    out["converged_s"] = conv[-1] if conv else None
    s = out["summary"]
    if not s:
        out["parse_error"] = "no perf bench summary lines in the workload output"
    else:
        out["elapsed_s"] = s.get("runtime-max/thread", {}).get("value")
        out["gbps"] = s.get("total-speed", {}).get("value")
    return out


def user_pattern(pattern: str):
    """A user's result pattern compiled by RE2 (``google-re2``), which matches in time linear in the text: the
    text is the untrusted guest's, and a pattern that backtracks (``^(a+)+$``) must not hang the host as
    Python's ``re`` would. ``^`` and ``$`` match at every line. Raises ValueError with RE2's one-line reason
    for a pattern RE2 cannot run (backreferences, lookaround) or that is too large."""
    try:
        import re2  # (a compiled dependency: missing, it is a one-line error below)
    except ImportError:  # (a dependency: make setup installs it)
        raise LabError("results.regex: needs the google-re2 package (make setup, or pip install google-re2)") from None
    options = re2.Options()
    options.log_errors = False  # (RE2 would print its complaint to stderr as well)
    try:
        return re2.compile(f"(?m){pattern}", options)
    except re2.error as e:
        why = e.args[0] if e.args else e
        raise ValueError(why.decode(errors="replace") if isinstance(why, bytes) else str(why)) from None
    except (TypeError, ValueError) as e:
        raise ValueError(str(e)) from None


MAX_RESULT_METRICS = 256  # a --workload-cmd result's figures taken as metrics
REGEX_SCAN_CHARS = 1 << 20  # results: regex reads the last MiB of the workload's output


def parse_user(spec: UserSpec, stdout: str) -> dict:
    """A user's workload's figures: its JSON line (the last one with the prefix) or one number per regex (its
    last match). Every declared metric must be there and a finite number (checked as the built-ins' are), or
    the result is ``{"parse_error": why}`` and the run ``workload-failed``."""
    if spec.json_prefix:
        line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(spec.json_prefix)), None)
        if line is None:
            return {"parse_error": f"no line starting with {shown(spec.json_prefix, 40)} in the workload output"}
        try:
            result = guest_json(line[len(spec.json_prefix) :])
        except ValueError as e:
            return {"parse_error": f"{spec.json_prefix.strip()} line: {e}"}
        if not isinstance(result, dict):
            return {
                "parse_error": f"the {spec.json_prefix.strip()} line is a JSON {type(result).__name__}, not an object"
            }
        for m in spec.metrics:
            if m.name not in result:
                return {"parse_error": f"the result has no {m.name}"}
            if not _is_number(result[m.name]):
                return {"parse_error": f"the result's {m.name} is {shown(json.dumps(result[m.name])[:60], 60)}, "
                        "not a finite number"}  # fmt: skip
        if spec.all_numeric:
            nums = [k for k, v in result.items() if _is_number(v) and RESULT_KEY.fullmatch(k)]
            if not nums:
                return {"parse_error": "the result has no number to compare"}
            if len(nums) > MAX_RESULT_METRICS:
                return {"parse_error": f"the result has {len(nums)} numbers, more than {MAX_RESULT_METRICS}"}
        return result
    out: dict = {}
    tail = stdout[-REGEX_SCAN_CHARS:]  # (the guest writes the text the user's patterns run over: bounded)
    for name, pattern in spec.regex:
        # (RE2: linear in the tail, whatever the pattern; the last match wins)
        last = functools.reduce(lambda _prev, m: m, user_pattern(pattern).finditer(tail), None)
        if last is None:
            return {"parse_error": f"{name}: no match for {shown(pattern, 60)} in the workload output"}
        value = to_float(last.group(1) or "")
        if value is None:
            return {"parse_error": f"{name}: {shown(last.group(1) or '', 60)} is not a finite number"}
        out[name] = value
    return out


_HACKBENCH_TIME = re.compile(r"^Time:\s*(\S+)\s*$", re.MULTILINE)


def parse_hackbench(stdout: str) -> dict:
    """hackbench's runs: the mean of their ``Time:`` lines (seconds a run, lower is better) and how many."""
    times = [v for t in _HACKBENCH_TIME.findall(stdout) if (v := to_float(t)) is not None and v >= 0]
    if not times:
        return {"parse_error": "no hackbench 'Time:' line in the workload output"}
    return {"hackbench_s": sum(times) / len(times), "hackbench_runs": len(times)}
