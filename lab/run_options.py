"""What one ``numalab run`` asks for, as a typed value: the library's entry point.

The command line (``lab.cli``), the matrix (``lab.matrix``) and the tests all
build a :class:`RunOptions` and hand it to :func:`lab.runner.run_options`;
nobody turns it back into command-line flags. A matrix child gets its
options as JSON (:meth:`RunOptions.to_json`, ``numalab run-options FILE``),
read back by :meth:`RunOptions.from_dict`, which refuses unknown or
ill-typed fields with a one-line error. So renaming a flag cannot silently
change what a matrix runs, and renaming a field breaks loudly where it is
used.

Checks of values (ranges, names of workloads, kernels, ...) stay where they
are made today, in :func:`lab.runner.requests_from_options`, so every caller
gets the same one-line errors.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import LabError
from lab.guest.plan import TRACE_MODES
from lab.placement.plan import BACKINGS, PINNINGS
from lab.topology.ref import TopologyRef
from lab.vm.access_plugin import ADDRESS_MODES
from lab.vm.firmware import FIRMWARES
from lab.vm.guest_clock import CLOCKS

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
}


@dataclass(frozen=True)
class RunOptions:
    topology: TopologyRef = field(default_factory=lambda: TopologyRef("ring-4"))
    kernels: tuple[str, ...] = ("stock",)  # two for an A/B run
    workload: str = "numa01"
    duration: float = 20.0
    repeat: int = 1
    out: Path | None = None  # the record (a parent of the records with repeats or two kernels)
    runs_dir: Path = Path("runs")
    numa_balancing: str = "on"  # on, off, default, tiering
    knobs: tuple[str, ...] = ()  # NAME=VALUE debugfs sched/numa_balancing knobs
    kernel_default_knobs: bool = False  # leave out numalab's short-scan knobs
    events: tuple[str, ...] = ()  # extra trace events (SYS:EVENT), beyond the default set
    trace_buffer_kb: int = 4096
    no_trace: bool = False
    trace_mode: str = "raw"
    append: tuple[str, ...] = ()  # extra guest kernel arguments
    backing: str = "ram"
    prealloc: bool = False
    pinning: str = "auto"
    firmware: str = "auto"
    accel: str = "auto"
    clock: str = "host"  # the guest's clock: host, or virtual (it counts instructions: lab.vm.guest_clock)
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
        return json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n"

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
        return cls(**values)

    @classmethod
    def load(cls, path: Path) -> RunOptions:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise LabError(f"{path}: not UTF-8 text") from None
        except json.JSONDecodeError as err:
            raise LabError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None
        return cls.from_dict(data, str(path))


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
