"""The trace events numalab knows, each named once.

A tracepoint has two spellings: ``system:name`` where it is enabled (tracefs,
``trace-cmd record -e``, ``--event``) and the bare ``name`` that each record
in a trace carries. Both come from one :class:`TraceEvent` here, so that the
guest plan, the analyses, the metrics, the Perfetto export and the report
cannot drift apart. Formats are Linux 6.1's (seed README):

* sched_move_numa: pid tgid ngid src_cpu src_nid dst_cpu dst_nid
* sched_swap_numa, sched_stick_numa: src_{pid,tgid,ngid,cpu,nid} dst_{pid,tgid,ngid,cpu,nid};
  in sched_stick_numa dst_cpu = -1: no CPU was found; dst_pid = 0: a move to an idle CPU
  failed; dst_pid > 0: a swap failed
* mm_migrate_pages: nr_succeeded nr_failed nr_thp_succeeded nr_thp_failed nr_thp_split mode reason
* sched_migrate_task: comm pid prio orig_cpu dest_cpu
* sched_wakeup_new: comm pid prio target_cpu (a new task's first CPU)
* sched_waking: comm pid prio target_cpu; fires on the waker's CPU, target_cpu is the task's previous CPU
* sched_wakeup: comm pid prio target_cpu, the CPU chosen; fires where the task is activated: the waker's CPU,
  or the chosen one when the wakeup is queued there (ttwu_queue_wakelist)
* sched_process_exit: comm pid prio

Each event also names the fields numalab reads of it (``reads``: the analyses, lab.analysis.numa, and the
Perfetto export): a run checks them against the booted kernel's formats, which trace.dat carries, and
says which are missing (lab.analysis.numa.format_notes). 6.12's formats are 6.1's, with mm_migrate_pages'
nr_split added.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TraceEvent:
    system: str
    name: str  # as a trace record names it
    short: str  # the word tables and plots use (move, swap, stick, migrate, ...)
    reads: tuple[str, ...] = ()  # the fields numalab reads, as trace-cmd report prints them

    @property
    def full(self) -> str:
        """``system:name``, as tracefs and trace-cmd enable it."""
        return f"{self.system}:{self.name}"

    def __str__(self) -> str:
        return self.full


_PAIR = (
    "src_pid",
    "src_tgid",
    "src_ngid",
    "src_cpu",
    "src_nid",
    "dst_pid",
    "dst_tgid",
    "dst_ngid",
    "dst_cpu",
    "dst_nid",
)
MOVE_NUMA = TraceEvent("sched", "sched_move_numa", "move", ("pid", "tgid", "src_cpu", "src_nid", "dst_cpu", "dst_nid"))
SWAP_NUMA = TraceEvent("sched", "sched_swap_numa", "swap", _PAIR)
STICK_NUMA = TraceEvent("sched", "sched_stick_numa", "stick", tuple(f for f in _PAIR if not f.endswith("_ngid")))
_MIGRATED = ("nr_succeeded", "nr_failed", "nr_thp_succeeded", "nr_thp_failed", "nr_thp_split", "reason")
MIGRATE_PAGES = TraceEvent("migrate", "mm_migrate_pages", "migrate", _MIGRATED)
MIGRATE_TASK = TraceEvent("sched", "sched_migrate_task", "lb", ("comm", "pid", "orig_cpu", "dest_cpu"))
WAKEUP_NEW = TraceEvent("sched", "sched_wakeup_new", "new", ("comm", "pid", "target_cpu"))
WAKING = TraceEvent("sched", "sched_waking", "waking", ("comm", "pid", "target_cpu"))
WAKEUP = TraceEvent("sched", "sched_wakeup", "wakeup", ("comm", "pid", "target_cpu"))
PROCESS_EXIT = TraceEvent("sched", "sched_process_exit", "exit", ("pid",))

# The NUMA-balancing decisions, in the order tables show them.
NUMA_DECISIONS: tuple[TraceEvent, ...] = (MOVE_NUMA, SWAP_NUMA, STICK_NUMA)
KNOWN: tuple[TraceEvent, ...] = (*NUMA_DECISIONS, MIGRATE_PAGES, MIGRATE_TASK, WAKEUP_NEW, PROCESS_EXIT, WAKING, WAKEUP)
BY_NAME: dict[str, TraceEvent] = {e.name: e for e in KNOWN}
