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
from lab.errors import LabError, check_choice
from lab.guest.settings import SHORT_SCAN_KNOBS, GuestSettings, check_duration
from lab.guest.trace_options import TraceOptions
from lab.paths import json_text, utf8_path
from lab.placement.pinning import BACKINGS, PINNINGS
from lab.run.scheduler import split as split_scheduler
from lab.topology.model.ref import TopologyRef
from lab.vm.backend_options import BackendOptions
from lab.vm.tcg.access_options import AccessOptions
from lab.vm.tcg.clock_options import ClockOptions
from lab.vm.tcg.latency_options import LatencyOptions
from lab.workloads.user_workload import resolve_workload

MAX_REPEAT = 1000
MAX_TIMEOUT_S = 7 * 86400.0
NUMA_BALANCING = ("on", "off", "default", "tiering")
# The pieces: the run options that configure one module each, a typed value beside that module with its own
# check, by the name RunOptions holds it under. Their fields are run options like the others on the command
# line and in a saved options file (flat: ``{"clock": "virtual", "events": [...]}``); RunOptions.of builds them
# from those names, and to_dict writes them so.
PIECES: dict[str, type] = {
    "vm": BackendOptions,
    "guest_time": ClockOptions,
    "latency": LatencyOptions,
    "access": AccessOptions,
    "tracing": TraceOptions,
}
# The options whose value is one of a few words: the command line offers these as its choices.
CHOICES: dict[str, tuple[str, ...]] = {
    "numa_balancing": NUMA_BALANCING,
    "backing": BACKINGS,
    "pinning": PINNINGS,
}
OWN_CHOICES = tuple(CHOICES)  # (RunOptions' own; the pieces check theirs)
for _piece in PIECES.values():
    CHOICES |= _piece.CHOICES  # type: ignore[attr-defined]


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
    append: tuple[str, ...] = ()  # extra guest kernel arguments
    backing: str = "ram"
    prealloc: bool = False
    pinning: str = "auto"
    timeout: float | None = None
    boot_deadline: float | None = None  # TCG: re-boot once if init has not started by then; None default, 0 never
    guest_output_limit: str | None = None  # a size, e.g. 2G
    test_fault: str = ""  # panic, hang, hostile=/host/path (the tests)
    # The pieces (PIECES), each of the options that configure one module: the VM's backend (lab.vm.backend), the
    # guest clock (lab.vm.tcg.guest_clock), the memory charge (lab.vm.tcg.latency_model), the access matrix
    # (lab.vm.tcg.access_plugin) and the tracing (lab.guest.settings).
    vm: BackendOptions = field(default_factory=BackendOptions)
    guest_time: ClockOptions = field(default_factory=ClockOptions)
    latency: LatencyOptions = field(default_factory=LatencyOptions)
    access: AccessOptions = field(default_factory=AccessOptions)
    tracing: TraceOptions = field(default_factory=TraceOptions)

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
        self.check_pieces()
        if self.guest_output_limit is not None:
            self.output_limit_bytes()
        # (before anything is made: a record's path is in its UTF-8 files, the QEMU command line first)
        utf8_path(*((self.out, "--out") if self.out is not None else (self.runs_dir, "--runs-dir")))
        self.workload_of()
        # The guest settings' own checks (knobs, kernel arguments; the tracing's are its piece's), on settings of
        # these options (--test-fault mutate=SCRIPT: they get the script's text, read when the run is planned).
        mutate = self.test_fault.startswith("mutate=")
        GuestSettings("true", self.duration, knobs=self.knob_values(), trace_events=(),
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

    def check_pieces(self) -> None:
        """Each piece's own check (PIECES), then what a piece cannot know alone: the seed's range by the repeats,
        and the memory charge's needs (TCG when chosen, direct QEMU, the clock: lab.run.remote_latency)."""
        for name in PIECES:
            piece = getattr(self, name)
            if not isinstance(piece, PIECES[name]):
                raise LabError(f"{name}: expected a {PIECES[name].__name__}, got {piece!r} (RunOptions.of takes the "
                               "options by their flat names)")  # fmt: skip
        self.vm.check()
        self.guest_time.check(self.repeat)
        self.latency.check()
        self.access.check()
        self.tracing.check()
        if self.latency.on:
            from lab.run.remote_latency import check_request  # (on use: numalab's start loads this module)

            check_request(self.vm.asked_accel, self.vm.backend, self.guest_time.clock)

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
        from lab.topology.model.spec import parse_mib  # (on use: numalab's start loads this module)
        from lab.vm.share import ShareLimits  # (on use: numalab's start loads this module)

        limit = parse_mib(self.guest_output_limit, "--guest-output-limit") << 20
        ShareLimits(output_bytes=limit)  # the minimum, as a one-line error
        return limit

    def check_choices(self) -> None:
        """A one-line error for a word option that is none of its choices (the command line's argparse
        checks these too; options built in code or read from JSON come through here). The pieces check theirs."""
        for name in OWN_CHOICES:
            check_choice("--" + name.replace("_", "-"), getattr(self, name), CHOICES[name])

    @classmethod
    def of(cls, **flat: object) -> RunOptions:
        """Options from their flat names, as the command line, a saved options file and the matrix give them
        (``RunOptions.of(clock="virtual", events=(...,))``): the pieces' fields made into their pieces (PIECES),
        the rest RunOptions' own; checked. A name that is neither is a TypeError, as a constructor's."""
        pieces = {}
        for name, piece in PIECES.items():
            own = {f.name for f in dataclasses.fields(piece)}
            pieces[name] = piece(**{k: flat.pop(k) for k in list(flat) if k in own})
        return cls(**flat, **pieces)  # type: ignore[arg-type]

    def flat(self) -> dict[str, object]:
        """Every option by its flat name (the pieces' fields among the others), as :meth:`of` takes them."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in PIECES}
        for name in PIECES:
            piece = getattr(self, name)
            out |= {f.name: getattr(piece, f.name) for f in dataclasses.fields(piece)}
        return out

    def replaced(self, **flat: object) -> RunOptions:
        """These options with some changed, by their flat names (dataclasses.replace for the pieces' fields too)."""
        return RunOptions.of(**(self.flat() | flat))

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        """The flat names: RunOptions' own fields and the pieces' (what a saved options file may hold)."""
        return tuple(RunOptions().flat())

    def to_dict(self) -> dict:
        """Flat, as earlier releases wrote it: the pieces' fields among the others (saved options files, the
        matrix's children, the debug line)."""
        data = self.flat()
        for k, v in data.items():
            if isinstance(v, Path):
                data[k] = str(v)
            elif isinstance(v, tuple):
                data[k] = list(v)
            elif isinstance(v, TopologyRef):
                data[k] = dataclasses.asdict(v)
        return data

    def to_json(self) -> str:
        return json_text(self.to_dict(), indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: object, source: str = "run options") -> RunOptions:
        """Options from JSON data; an unknown field or a value of the wrong type is a one-line error."""
        if not isinstance(data, dict):
            raise LabError(f"{source}: expected an object of run options")
        hints = {k: v for c in (cls, *PIECES.values()) for k, v in typing.get_type_hints(c).items()}
        known = set(cls.option_names())
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
            return cls.of(**values)
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
