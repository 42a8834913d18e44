"""Which scheduler a run's workload ran under: the kernel's own (the fair class) or a sched_ext (BPF) scheduler.

The run record carries it as the manifest's ``scheduler`` (issue 51)::

    "scheduler": {"asked": "scx_simple" | "fair" | PATH, "kind": "sched_ext" | "fair",
                  "start": {"state": ..., "ops": ...}, "end": {...}, "ejected": bool, "reason": ...}

``start`` and ``end`` are what the guest read at the workload's start and end (``/sys/kernel/sched_ext/state``
and the running ops' name). A record without the field is a fair-class run (every record made before it).
This module is the one place the field is read (:func:`scheduler_of`); everything else asks it.

Why it matters to the analyses: NUMA balancing is the fair class's. Its scans are started from the fair class's
tick (``task_tick_fair`` -> ``task_tick_numa``), so its hint faults, the pages it migrates and its task moves,
swaps and sticks (``sched_*_numa``) happen only for fair-class tasks. Where a sched_ext scheduler runs the
workload, those counters say nothing about the BPF scheduler's placement: they are marked as the fair class's
(:func:`fair_class_note`), and the views read from the generic scheduler events (residency, migrations between
nodes, settled time: lab.analysis.residency) say where it put the tasks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lab.errors import LabError

FAIR = "fair"
SCHED_EXT = "sched_ext"
KINDS = (FAIR, SCHED_EXT)
_MAX_TEXT = 200  # a record is a user's file: its strings are bounded where they are shown


@dataclass(frozen=True)
class SchedulerInfo:
    """The scheduler of one run (see the module docstring)."""

    asked: str = FAIR  # what the run asked for: "fair", an example scheduler's name, or a binary's path
    kind: str = FAIR  # "fair" or "sched_ext"
    start_ops: str | None = None  # the sched_ext ops the guest saw running at the workload's start (None: none)
    end_ops: str | None = None  # ... and at its end
    ejected: bool = False  # the kernel ejected the BPF scheduler during the run
    reason: str | None = None  # why, from the kernel's log
    recorded: bool = False  # the record has the field (False: a record made before runs could choose)

    @property
    def is_ext(self) -> bool:
        return self.kind == SCHED_EXT

    @property
    def name(self) -> str:
        """The scheduler in a word or two, as labels show it: "fair", "scx_simple", a binary's file name."""
        return scheduler_name(self.asked, self.is_ext)

    @property
    def label(self) -> str:
        """:attr:`name`, and "(ejected)" when the kernel ejected it: what ran was then partly the fair class."""
        return f"{self.name} (ejected)" if self.ejected else self.name

    def to_dict(self) -> dict:
        return {"asked": self.asked, "kind": self.kind, "name": self.name, "start_ops": self.start_ops,
                "end_ops": self.end_ops, "ejected": self.ejected, "reason": self.reason,
                "recorded": self.recorded}  # fmt: skip


def _text(v: object, what: str) -> str:
    if not isinstance(v, str) or not v or len(v) > 4096:
        raise LabError(f"scheduler.{what}: not a name ({type(v).__name__})")
    return v[:_MAX_TEXT]


def _ops(side: object, what: str) -> str | None:
    """The ops' name the guest read at one end of the workload (None: no sched_ext scheduler was running)."""
    if side is None:
        return None
    if not isinstance(side, dict):
        raise LabError(f"scheduler.{what}: not a mapping")
    ops = side.get("ops")
    if ops is None or ops == "":
        return None
    if not isinstance(ops, str):
        raise LabError(f"scheduler.{what}.ops: not a name")
    return ops[:_MAX_TEXT]


def scheduler_of(manifest: dict) -> SchedulerInfo:
    """The scheduler a run record names (a fair-class run where it names none); a field that is not as
    documented is a one-line error (the caller names the record)."""
    s = manifest.get("scheduler") if isinstance(manifest, dict) else None
    if s is None:
        return SchedulerInfo()
    if not isinstance(s, dict):
        raise LabError("scheduler: not a mapping")
    kind = s.get("kind", FAIR)
    if kind not in KINDS:
        raise LabError(f"scheduler.kind: {str(kind)[:40]!r} is not one of {', '.join(KINDS)}")
    # (a sched_ext run that does not say what was asked is named by the ops the guest saw, never "fair")
    fallback = FAIR if kind == FAIR else _ops(s.get("start"), "start") or _ops(s.get("end"), "end") or SCHED_EXT
    asked = _text(s.get("asked", fallback), "asked")
    ejected = s.get("ejected", False)
    if not isinstance(ejected, bool):
        raise LabError("scheduler.ejected: not true or false")
    reason = s.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise LabError("scheduler.reason: not a text")
    return SchedulerInfo(asked, kind, _ops(s.get("start"), "start"), _ops(s.get("end"), "end"), ejected,
                         None if reason is None else reason[:_MAX_TEXT], True)  # fmt: skip


def scheduler_name(asked: str, ext: bool) -> str:
    """A scheduler as labels show it (``asked``: --scheduler as given, the record's ``scheduler.asked``): "fair",
    "scx_simple", a user's binary by its file name."""
    if not ext:
        return FAIR
    if "/" in asked:  # a user's binary: its file name
        return os.path.basename(asked.rstrip("/")) or asked
    return asked


def pair_labels(kernels: tuple[str, str], schedulers: tuple[str, str]) -> tuple[str, str]:
    """An A/B's two side labels, in compare's verdict lines and run's alike: each side's kernel(s), and where
    either side ran a sched_ext scheduler (or the two ran different ones) each side's scheduler(s) in brackets,
    "v6.12 [fair]" against "v6.12 [scx_simple]"; a fair-class A/B is its kernels' names ("v6.12", "v6.13")."""
    if schedulers == (FAIR, FAIR):
        return kernels
    return f"{kernels[0]} [{schedulers[0]}]", f"{kernels[1]} [{schedulers[1]}]"


def side_names(manifests: list[dict]) -> list[str]:
    """Each run's side in a batch, as :func:`pair_labels` names it: its kernel, and where a run of the batch ran
    a sched_ext scheduler, its scheduler in brackets (records without the field: the fair class)."""
    infos = [scheduler_of(m) for m in manifests]
    ext = any(i.is_ext for i in infos)
    return [f"{m['kernel']['name']} [{i.name}]" if ext else m["kernel"]["name"] for m, i in zip(manifests, infos)]


def ext_names(manifests: list[dict]) -> list[str]:
    """The sched_ext schedulers among ``manifests``' runs, each once, in order ([]: every run was fair-class)."""
    return list(dict.fromkeys(i.label for m in manifests if (i := scheduler_of(m)).is_ext))


def side_schedulers(manifests: list[dict]) -> str:
    """One side's schedulers for a label: "fair", "scx_simple", "fair+scx_simple" (mixed: said, never hidden)."""
    return "+".join(dict.fromkeys(scheduler_of(m).label for m in manifests)) or FAIR


def fair_class_heading(ext: list[str]) -> str:
    """The same said once over several such rows (the finding's), "" where no side ran a sched_ext scheduler."""
    if not ext:
        return ""
    return (
        f"NUMA balancing's rows are the fair class's: its scans run only for fair-class tasks, and {' and '.join(ext)} "
        f"(sched_ext) placed the workload on a side, so they are not a verdict on {'them' if len(ext) > 1 else 'it'}"
    )


def fair_class_note(ext: list[str]) -> str:
    """What a NUMA-balancing row carries where a side ran a sched_ext scheduler ("" where none did)."""
    if not ext:
        return ""
    return (
        f"the fair class's: NUMA balancing scans and moves only fair-class tasks, and {' and '.join(ext)} "
        "(sched_ext) placed the workload, so this row is not a verdict on it"
    )
