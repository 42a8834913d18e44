"""What one ``numalab run`` asks for, as a typed value: the library's entry point.

The command line (``lab.cli.main``), the matrix (``lab.matrix``) and the tests all
build a :class:`RunOptions` and hand it to :func:`lab.run.batch.run_options`;
nobody turns it back into command-line flags. A matrix child gets its
options as JSON (:meth:`RunOptions.to_json`, ``numalab run-options FILE``),
read back by :meth:`RunOptions.from_dict`, which refuses unknown or
ill-typed fields with a one-line error. So renaming a flag cannot silently
change what a matrix runs, and renaming a field breaks loudly where it is
used.

The value checks itself (:meth:`RunOptions.check`, run on construction): ranges,
choices, the workload's name, and options that conflict (``--no-trace`` with
``--event``). So ``numalab run``, ``numalab run-options`` and each run of a
matrix (``numalab matrix check`` too) refuse the same things with the same
one-line errors. What needs a file, a kernel or a host (the topology, the
kernels, the accelerator) is checked by :func:`lab.run.batch.requests_from_options`.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

from lab.datafile import load_json
from lab.errors import LabError
from lab.guest.init_plan import SHORT_SCAN_KNOBS, TRACE_MODES, GuestPlan, check_duration
from lab.paths import json_text, utf8_path
from lab.placement.pinning import BACKINGS, PINNINGS
from lab.run.scheduler import split as split_scheduler
from lab.topology.ref import TopologyRef
from lab.vm.qemu.firmware import FIRMWARES
from lab.vm.tcg.access_plugin import ADDRESS_MODES
from lab.vm.tcg.guest_clock import CLOCKS, MAX_SEED, check_insns_per_ns, check_quantum
from lab.vm.tcg.latency_model import REMOTE_LATENCY, check_coherence_mib, check_local_gbs, check_local_ns
from lab.workloads.user_workload import resolve_workload

MAX_REPEAT = 1000
MAX_TIMEOUT_S = 7 * 86400.0
NUMA_BALANCING = ("on", "off", "default", "tiering")
ACCELS = ("auto", "kvm", "tcg")
BACKENDS = ("qemu", "libvirt")
# The options whose value is one of a few words: the command line offers these as its choices.
CHOICES: dict[str, tuple[str, ...]] = {
    "numa_balancing": NUMA_BALANCING,
    "trace_mode": TRACE_MODES,
    "backing": BACKINGS,
    "pinning": PINNINGS,
    "firmware": FIRMWARES,
    "accel": ACCELS,
    "clock": CLOCKS,
    "backend": BACKENDS,
    "access_address_map": ("", *ADDRESS_MODES),
    "remote_latency": REMOTE_LATENCY,
    "coherence": ("", "on", "off"),
}


def check_seconds(value: float, option: str, maximum: float) -> None:
    """A number of seconds that is finite, > 0 and at most ``maximum`` (one-line error otherwise)."""
    if not math.isfinite(value) or value <= 0 or value > maximum:
        raise LabError(f"{option}: must be more than 0 and at most {maximum:g} seconds, got {value:g}")


@dataclass(frozen=True)
class RunOptions:
    topology: TopologyRef = field(default_factory=lambda: TopologyRef("ring-4"))
    kernels: tuple[str, ...] = ("stock",)  # two for an A/B run
    # --scheduler: fair (the kernel's own classes), or a sched_ext scheduler: NAME (an example built with the
    # kernel) or PATH, with its arguments (lab.run.scheduler); two (on one kernel) for an A/B run
    schedulers: tuple[str, ...] = ("fair",)
    workload: str = "numa01"  # a built-in's name, or a workload file (FILE.yaml: lab.workloads.user_workload)
    workload_cmd: str = ""  # a one-off workload: the guest's shell command (lab.workloads.user_workload)
    workload_files: tuple[str, ...] = ()  # host files the one-off command needs in the guest's /workload
    duration: float = 20.0
    repeat: int = 1
    out: Path | None = None  # the record (a parent of the records with repeats or two kernels)
    runs_dir: Path = Path("runs")
    numa_balancing: str = "on"  # on, off, default, tiering
    knobs: tuple[str, ...] = ()  # NAME=VALUE debugfs sched/numa_balancing knobs
    kernel_default_knobs: bool = False  # leave out numalab's short-scan knobs
    events: tuple[str, ...] = ()  # extra trace events (SYS:EVENT), beyond the default set
    trace_buffer_kb: int = 4096
    node_maps: bool = False  # the workload's pages per node, from numa_maps with every vmstat sample (--node-maps)
    no_trace: bool = False
    # --lean: only NUMA balancing's own events (no per-task residency events) and no per-node memory samples
    lean: bool = False
    trace_mode: str = "raw"
    append: tuple[str, ...] = ()  # extra guest kernel arguments
    backing: str = "ram"
    prealloc: bool = False
    pinning: str = "auto"
    firmware: str = "auto"
    accel: str = "auto"
    clock: str = "host"  # the guest's clock: host, or virtual (it counts instructions: lab.vm.tcg.guest_clock)
    seed: int | None = None  # --clock virtual: the first repeat's seed (repeat i gets seed + i); None: 0
    quantum: int = 0  # --clock virtual: each vCPU its own guest time, at most this many ns ahead; 0: one shared
    insns_per_ns: int = 1  # --clock virtual: instructions a vCPU executes in a guest ns
    timeout: float | None = None
    boot_deadline: float | None = None  # TCG: re-boot once if init has not started by then; None default, 0 never
    guest_output_limit: str | None = None  # a size, e.g. 2G
    test_fault: str = ""  # panic, hang, hostile=/host/path (the tests)
    backend: str = "qemu"
    qemu: str = ""  # the QEMU binary (path or command); "" is $NUMALAB_QEMU, else the PATH's qemu-system-x86_64
    connect: str | None = None  # libvirt URI
    pool_dir: str | None = None
    no_upload: bool = False
    access_matrix: bool = False
    access_sample: int | None = None
    access_address_map: str = ""  # ram-block or guest-physical; "" chooses by QEMU version
    remote_latency: str = "off"  # off, slit, table: remote misses cost (lab.vm.tcg.latency_model)
    remote_latency_ns: float | None = None  # L, the local miss latency; None: the default
    remote_bandwidth_gbs: float | None = None  # a stream miss's local bandwidth (0: no streams); None: the default
    coherence: str = ""  # on, off: lines moving between nodes charged; "": the default (off)
    coherence_mib: int | None = None  # an LLC's share of a node's caches with coherence on (0: no limit); None: 32

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Every check the options can make alone, conflicts between them included (one-line errors
        naming the command line's flag); what needs a file, a kernel or a host is lab.run.batch's."""
        self.check_choices()
        if not self.kernels:
            raise LabError("--kernel: give at least one kernel")
        self.check_schedulers()
        if not 1 <= self.repeat <= MAX_REPEAT:
            raise LabError(f"--repeat: must be 1..{MAX_REPEAT}, got {self.repeat}")
        check_duration(self.duration)
        if self.timeout is not None:
            check_seconds(self.timeout, "--timeout", MAX_TIMEOUT_S)
        if self.boot_deadline is not None and self.boot_deadline != 0:  # (0: never re-boot)
            check_seconds(self.boot_deadline, "--boot-deadline", MAX_TIMEOUT_S)
        if self.no_trace:
            if self.events:
                raise LabError(f"--event {self.events[0]}: not with --no-trace (nothing is traced)")
            if self.trace_mode != "raw":
                raise LabError(f"--trace-mode {self.trace_mode}: not with --no-trace (nothing is traced)")
        if self.lean and self.node_maps:
            raise LabError("--node-maps: not with --lean (a lean run takes no node memory samples)")
        if self.access_sample is not None and not self.access_matrix:
            raise LabError("--access-sample: only with --access-matrix")
        if self.backend != "qemu" and self.firmware == "qboot":  # (before any connection to a libvirt host)
            raise LabError("--firmware qboot: only with --backend qemu (libvirt hosts boot their default firmware)")
        self.check_remote_latency()
        self.check_seed()
        check_quantum(self.quantum, self.clock)
        check_insns_per_ns(self.insns_per_ns, self.clock)
        if self.backend != "libvirt":
            for opt in ("connect", "pool_dir", "no_upload"):
                if getattr(self, opt):
                    raise LabError(f"--{opt.replace('_', '-')}: only with --backend libvirt")
        if self.guest_output_limit is not None:
            self.output_limit_bytes()
        # (before anything is made: a record's path is in its UTF-8 files, the QEMU command line first)
        utf8_path(*((self.out, "--out") if self.out is not None else (self.runs_dir, "--runs-dir")))
        self.workload_of()
        # The guest plan's own checks (knobs, events, trace buffer, kernel arguments), on a plan of these options
        # (--test-fault mutate=SCRIPT: the plan gets the script's text, read when the run is planned).
        mutate = self.test_fault.startswith("mutate=")
        GuestPlan("true", self.duration, knobs=self.knob_values(), trace_events=self.events,
                  trace_buffer_kb=self.trace_buffer_kb, trace_mode=self.trace_mode,
                  test_fault="mutate" if mutate else self.test_fault, test_script=":" if mutate else "",
                  kernel_args=" ".join(self.append))  # fmt: skip

    def check_schedulers(self) -> None:
        """--scheduler's words (what needs the kernel is lab.run.batch's), and one A/B axis at a time."""
        if not self.schedulers:
            raise LabError("--scheduler: give at least one scheduler (fair: the kernel's own classes)")
        for spec in self.schedulers:
            split_scheduler(spec)
        if len(set(self.schedulers)) < len(self.schedulers):
            raise LabError(f"--scheduler: the schedulers must differ, got {', '.join(self.schedulers)}")
        if len(self.schedulers) > 1 and len(self.kernels) > 1:
            raise LabError("--scheduler: two schedulers make an A/B on one kernel; with two kernels give one "
                           "scheduler (it runs on both)")  # fmt: skip

    def workload_of(self):
        """The workload these options run (lab.workloads.workload_type.Workload): a built-in, a workload file or
        --workload-cmd, checked whole (files, libraries, packages, metrics) before any boot."""
        # (one validator: numalab workload show, matrix check and bisect read a workload file the same way)
        return resolve_workload(self.workload, self.workload_cmd, self.workload_files)

    def check_remote_latency(self) -> None:
        """--remote-latency: TCG (when chosen), direct QEMU, the host's clock; --remote-latency-ns only with it."""
        if self.coherence_mib is not None and self.coherence != "on":
            raise LabError("--coherence-mib: only with --coherence on")
        if self.remote_latency == "off":
            if self.remote_latency_ns is not None:
                raise LabError("--remote-latency-ns: only with --remote-latency slit")
            if self.remote_bandwidth_gbs is not None:
                raise LabError("--remote-bandwidth-gbs: only with --remote-latency slit or table")
            if self.coherence:
                raise LabError("--coherence: only with --remote-latency slit or table")
            return
        if self.remote_latency_ns is not None:
            check_local_ns(self.remote_latency_ns)
        if self.remote_bandwidth_gbs is not None:
            check_local_gbs(self.remote_bandwidth_gbs)
        if self.coherence_mib is not None:
            check_coherence_mib(self.coherence_mib)
        from lab.run.remote_latency import check_request  # (on use: numalab's start loads this module)

        check_request(None if self.accel == "auto" else self.accel, self.backend, self.clock)

    def check_seed(self) -> None:
        """--seed: a whole number 0..MAX_SEED - repeats, and only under the virtual clock (the host's clock does
        not repeat a run, so a seed would choose nothing)."""
        if self.seed is None:
            return
        if self.clock != "virtual":
            raise LabError("--seed: only with --clock virtual (under the host's clock no run repeats another)")
        top = MAX_SEED - self.repeat
        if not 0 <= self.seed <= top:
            raise LabError(f"--seed: must be 0..{top} (with --repeat {self.repeat}), got {self.seed}")

    def seed_of(self, repeat: int) -> int:
        """The seed of repeat ``repeat`` (0-based): --seed (default 0) plus the repeat. Both kernels of an A/B
        get the same seeds, so a difference between them is the kernels', not the seeds'."""
        return (self.seed or 0) + repeat

    def knob_values(self) -> dict[str, str]:
        """The debugfs knobs a run sets: numalab's short-scan ones (unless --kernel-default-knobs), then --knob's."""
        knobs = {} if self.kernel_default_knobs else dict(SHORT_SCAN_KNOBS)
        for kv in self.knobs:
            if "=" not in kv:
                raise LabError(f"--knob {kv}: expected NAME=VALUE, e.g. scan_delay_ms=100")
            k, v = kv.split("=", 1)
            knobs[k.strip()] = v.strip()
        return knobs

    def output_limit_bytes(self) -> int | None:
        """--guest-output-limit in bytes (None: the default)."""
        if self.guest_output_limit is None:
            return None
        from lab.topology.spec import parse_mib  # (on use: numalab's start loads this module)
        from lab.vm.share import ShareLimits  # (on use: numalab's start loads this module)

        limit = parse_mib(self.guest_output_limit, "--guest-output-limit") << 20
        ShareLimits(output_bytes=limit)  # the minimum, as a one-line error
        return limit

    def check_choices(self) -> None:
        """A one-line error for a word option that is none of its choices (the command line's argparse
        checks these too; options built in code or read from JSON come through here)."""
        for name, choices in CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                flag = "--" + name.replace("_", "-")
                raise LabError(f"{flag}: {value!r} is not one of {', '.join(c for c in choices if c)}")

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        for k, v in data.items():
            if isinstance(v, Path):
                data[k] = str(v)
            elif isinstance(v, tuple):
                data[k] = list(v)
        return data

    def to_json(self) -> str:
        return json_text(self.to_dict(), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: object, source: str = "run options") -> RunOptions:
        """Options from JSON data; an unknown field or a value of the wrong type is a one-line error."""
        if not isinstance(data, dict):
            raise LabError(f"{source}: expected an object of run options")
        hints = typing.get_type_hints(cls)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise LabError(f"{source}: {unknown[0]}: not a run option (known: {', '.join(sorted(known))})")
        values = {}
        for name, value in data.items():
            try:
                values[name] = _typed(value, hints[name])
            except (TypeError, ValueError) as err:
                raise LabError(f"{source}: {name}: {err}") from None
        try:
            return cls(**values)
        except LabError as err:
            raise LabError(f"{source}: {err}") from None

    @classmethod
    def load(cls, path: Path) -> RunOptions:
        return cls.from_dict(load_json(path), str(path))


def _typed(value: object, hint: object) -> object:
    """``value`` (from JSON) as type ``hint``, or TypeError naming what was expected."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        return _typed(value, next(a for a in options if a is not type(None)))
    if origin is tuple:
        (item, _ellipsis) = typing.get_args(hint)
        if not isinstance(value, list):
            raise TypeError(f"expected a list, got {value!r}")
        return tuple(_typed(v, item) for v in value)
    if hint is TopologyRef:
        if not isinstance(value, dict):
            raise TypeError(f"expected {{name, cpus_per_node, mem_per_node, threads}}, got {value!r}")
        ref_hints = typing.get_type_hints(TopologyRef)
        unknown = sorted(set(value) - set(ref_hints))
        if unknown or "name" not in value:
            raise TypeError(f"expected {{name, cpus_per_node, mem_per_node, threads}}, got {value!r}")
        return TopologyRef(**{k: _typed(v, ref_hints[k]) for k, v in value.items()})
    if hint is Path:
        if not isinstance(value, str):
            raise TypeError(f"expected a path, got {value!r}")
        return Path(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"expected a number, got {value!r}")
        return float(value)
    if hint is int or hint is bool or hint is str:
        if type(value) is not hint:
            raise TypeError(f"expected {hint.__name__}, got {value!r}")  # type: ignore[union-attr]
        return value
    raise TypeError(f"cannot read a {hint!r}")  # a field type this reader does not know: fix the reader
