"""The settings a guest runs by: workload, NUMA-balancing settings, tracing. Rendered as /plan/plan.sh (the guest's
name for them, as the init reads it), and recorded as the manifest's ``settings``.

Which events to trace is the caller's to say (``trace_events``): the default set comes from the
analyses that need it (``lab.analysis.numa.default_events``), a layer above this one.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field

from lab.errors import LabError
from lab.events import MOVE_NUMA

# debugfs sched/numa_balancing knobs for short runs: start scanning after
# 100 ms and rescan often, so a 20 s run produces NUMA-balancing decisions.
SHORT_SCAN_KNOBS = {"scan_delay_ms": "100", "scan_period_min_ms": "100", "scan_period_max_ms": "1000"}
KNOB_NAMES = ("scan_delay_ms", "scan_period_min_ms", "scan_period_max_ms", "scan_size_mb", "hot_threshold_ms")
# Any other sched debugfs knob is DIR/NAME under /sys/kernel/debug/sched (a cache-aware kernel's
# llc_balancing/..., or domains/cpu0/domain1/imbalance_pct): the kernel the user brings decides which
# exist; a missing one fails the run at the init's "knob-DIR/NAME" stage, with the name.
_DEBUGFS_KNOB = re.compile(r"[a-z0-9_]{1,64}(/[a-z0-9_]{1,64}){1,3}")
_DEBUGFS_VALUE = re.compile(r"[A-Za-z0-9_.,:-]{1,64}")
# (the tests) and hostile=/host/path: a guest that attacks its share; stall-boot-once: the first boot stalls
# before init reports "booted" (a boot with numalab.boot_attempt= on its command line does not); mutate (with
# test_script): the guest-data fuzz tests' hook, a script the init runs after each phase's real work
TEST_FAULTS = ("", "panic", "hang", "stall-boot-once", "mutate")
MAX_DURATION_S = 86400.0  # a workload of a day
MIN_DURATION_S = 0.1  # the console is read every 0.1 s (lab.vm.console): the shortest window the host can time
MAX_TRACE_BUFFER_KB = 4 << 20  # 4 GiB per CPU
TRACE_MODES = ("raw", "extract", "record")
KERNEL_CMDLINE = "console=ttyS0 loglevel=4 sched_verbose panic=-1 mitigations=off"


def check_duration(seconds: float) -> None:
    """A workload's duration: a one-line error unless it is 0.1 s to a day (run, workload show, the matrix)."""
    if not (math.isfinite(seconds) and MIN_DURATION_S <= seconds <= MAX_DURATION_S):
        raise LabError(f"--duration: must be {MIN_DURATION_S:g} to {MAX_DURATION_S:g} seconds (the host reads the "
                       f"guest's stage marks every 0.1 s: a shorter workload cannot be timed), "
                       f"got {seconds:g}")  # fmt: skip


def check_knob(name: str, value: str) -> None:
    """A --knob: a NUMA-balancing knob's name and a whole number, or DIR/NAME of any other sched debugfs
    directory (``llc_balancing/enabled``) and a value of letters, digits and ``_.,:-``."""
    if "/" in name:
        if not _DEBUGFS_KNOB.fullmatch(name):
            raise LabError(
                f"--knob {name}: expected DIR/NAME under /sys/kernel/debug/sched, e.g. llc_balancing/enabled"
            )
        if not _DEBUGFS_VALUE.fullmatch(value):
            raise LabError(f"--knob {name}={value}: the value must be 1-64 letters, digits or _.,:-")
        return
    if name not in KNOB_NAMES:
        raise LabError(
            f"--knob {name}: unknown NUMA-balancing knob (known: {', '.join(KNOB_NAMES)}; any other sched "
            "debugfs knob is DIR/NAME, e.g. llc_balancing/enabled=1)"
        )
    if not re.fullmatch(r"\d+", value):
        raise LabError(f"--knob {name}={value}: value must be a whole number")


@dataclass(frozen=True)
class GuestSettings:
    workload_cmd: str
    duration_s: float
    numa_balancing: str | None = "1"  # "1", "0", or None to leave the kernel's default
    knobs: dict[str, str] = field(default_factory=lambda: dict(SHORT_SCAN_KNOBS))
    # SYSTEM:EVENT names, () for no trace; no default here (see the module doc)
    trace_events: tuple[str, ...] = field(kw_only=True)
    trace_buffer_kb: int = 4096
    # "raw": tracefs buffers, copied out raw and assembled on the host (lab.trace.assemble);
    # "extract": the same buffers, then trace-cmd extract in the guest; "record": trace-cmd record
    trace_mode: str = "raw"
    vmstat_interval_s: float = 1.0
    # with the node memory samples, each workload process's /proc/PID/numa_maps and VmRSS (--node-maps: it
    # costs the workload, docs/reports.md "What it costs a run")
    node_maps: bool = False
    node_samples: bool = True  # every node's meminfo at vmstat's interval (numa-nodes.series); off with --lean
    test_fault: str = ""
    kernel_args: str = ""  # appended to KERNEL_CMDLINE (numalab run --append)
    demotion: str = ""  # /sys/kernel/mm/numa/demotion_enabled: "true", "false", or "" to leave it
    # test_fault "mutate" only (the tests): the body of the shell function numalab_mutate, which the guest
    # init calls as `numalab_mutate PHASE DIR` after the readback, after the results and after sending them
    test_script: str = ""
    # --scheduler: the sched_ext scheduler's command line in the guest (shell words, its binary under
    # /scheduler), and the ops name it must show in /sys/kernel/sched_ext/root/ops ("" for a user's binary,
    # whose name numalab does not know: any). "" for the kernel's own classes (nothing is loaded).
    scheduler_cmd: str = ""
    scheduler_ops: str = ""
    scheduler_wait_s: float = 10.0  # how long the init waits for it to be enabled (guest seconds)
    # the init runs numalab-model-start just before the workload: the access-matrix plugin's model starts there
    # (its arm=mark; lab.vm.tcg.latency_model.LatencyModel.from_workload)
    model_start: bool = False

    def __post_init__(self) -> None:
        check_duration(self.duration_s)
        for k, v in self.knobs.items():
            check_knob(k, v)
        for e in self.trace_events:
            if not re.fullmatch(r"\w+:\w+", e):
                raise LabError(f"--event {e}: expected SYSTEM:EVENT, e.g. {MOVE_NUMA.full}")
        if not 0 < self.trace_buffer_kb <= MAX_TRACE_BUFFER_KB:
            raise LabError(f"--trace-buffer-kb: must be 1..{MAX_TRACE_BUFFER_KB}, got {self.trace_buffer_kb}")
        if self.trace_mode not in TRACE_MODES:
            raise LabError(f"--trace-mode {self.trace_mode}: not one of {', '.join(TRACE_MODES)}")
        if self.test_fault not in TEST_FAULTS and not re.fullmatch(r"hostile=/[\w./-]+", self.test_fault):
            raise LabError(f"test fault {self.test_fault!r}: not one of {TEST_FAULTS}")
        if self.node_maps and not self.node_samples:
            raise LabError("--node-maps: needs the node memory samples (not with --lean)")
        if (self.test_fault == "mutate") != bool(self.test_script):
            raise LabError("test fault mutate: needs a script (--test-fault mutate=/path/to/script.sh), and only it")
        if self.demotion not in ("", "true", "false"):
            raise LabError(f"demotion: {self.demotion!r} is not true, false or empty")
        if not self.scheduler_cmd.isprintable() or len(self.scheduler_cmd) > 1024:
            raise LabError("--scheduler: the scheduler's command must be one printable line of at most 1024 characters")
        if not re.fullmatch(r"[\w.-]{0,64}", self.scheduler_ops):
            raise LabError(f"--scheduler: {self.scheduler_ops!r} is not an ops name")
        if not self.kernel_args.isprintable() or len(self.kernel_args) > 1024:
            raise LabError("--append: kernel arguments must be one printable line of at most 1024 characters")

    def cmdline(self) -> str:
        """The guest kernel's command line (before the TCG arguments, lab.vm.tcg.tcg_boot). Unless trace-cmd record sets
        up the trace itself, the kernel enables the traced events and sizes the trace buffers at
        boot (the init then empties them if boot left events in them, and turns tracing on around
        the workload)."""
        args = [KERNEL_CMDLINE]
        if self.trace_events and self.trace_mode != "record":
            args += [f"trace_event={','.join(self.trace_events)}", f"trace_buf_size={self.trace_buffer_kb}K"]
        return " ".join([*args, self.kernel_args.strip()]).strip()

    def to_shell(self) -> str:
        env = {
            "WORKLOAD_CMD": self.workload_cmd,
            "DURATION": f"{self.duration_s:g}",
            "NUMA_BALANCING": self.numa_balancing or "",
            "KNOBS": " ".join(f"{k}={v}" for k, v in sorted(self.knobs.items())),
            "TRACE_EVENTS": " ".join(self.trace_events),
            "TRACE_BUFFER_KB": str(self.trace_buffer_kb),
            "TRACE_MODE": self.trace_mode,
            "VMSTAT_INTERVAL": f"{self.vmstat_interval_s:g}",
            "NODE_MAPS": "1" if self.node_maps else "",
            "TEST_FAULT": self.test_fault.partition("=")[0],
            "FAULT_TARGET": self.test_fault.partition("=")[2],
            "DEMOTION": self.demotion,
        }
        if not self.node_samples:  # (only then: the plan.sh of other runs stays as it was)
            env["NODE_SAMPLES"] = "0"
        if self.model_start:  # (the same)
            env["MODEL_START"] = "1"
        if self.scheduler_cmd:  # (only then: the plan.sh of fair-class runs stays as it was)
            env |= {"SCHEDULER": self.scheduler_cmd, "SCHEDULER_OPS": self.scheduler_ops,
                    "SCHEDULER_WAIT": str(max(1, round(self.scheduler_wait_s * 10)))}  # fmt: skip
        lines = ["# numalab guest plan (generated)"]
        lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
        if self.test_script:
            lines += ["numalab_mutate() {", self.test_script.rstrip("\n"), ":", "}"]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict:
        out = {
            "workload_cmd": self.workload_cmd,
            "duration_s": self.duration_s,
            "numa_balancing": self.numa_balancing,
            "knobs": dict(self.knobs),
            "trace_events": list(self.trace_events),
            "trace_buffer_kb": self.trace_buffer_kb,
            "trace_mode": self.trace_mode,
            "vmstat_interval_s": self.vmstat_interval_s,
            "node_maps": self.node_maps,
            "test_fault": self.test_fault,
            "kernel_args": self.kernel_args,
            "demotion": self.demotion,
        }
        if self.scheduler_cmd:
            out |= {"scheduler_cmd": self.scheduler_cmd, "scheduler_ops": self.scheduler_ops}
        if not self.node_samples:
            out["node_samples"] = False
        if self.model_start:
            out["model_start"] = True
        return out
