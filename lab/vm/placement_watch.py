"""Whether a run's placement held, watched from outside QEMU over the workload window (the manifest's
``placement.check``; lab.placement.check reads and judges).

Samples are taken at the workload's start and end marks and every ``every_s`` between them: memory that
moves mid-run (``migratepages``, a cpuset change) shows in the next sample, and one bad sample makes the
run's placement not held. The first problem seen is kept with the sample it was seen in.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lab.placement.check import check_memory, check_vcpus, host_load, read_affinity, read_mappings
from lab.vm.console import Stage
from lab.vm.vcpu_time import END, SAMPLE_ERRORS, START

EVERY_S = 2.0


def _kind(problem: str) -> str:
    """A problem without its amounts: the same misplacement seen again with more MiB moved is not a new one."""
    return re.sub(r"\d+(?:\.\d+)? MiB", "_ MiB", problem)


@dataclass
class PlacementWatch:
    pid: int
    tids: dict[int, int]
    pins: dict[int, tuple[int, ...]]
    planned: dict[int, int]  # host node -> bytes of guest memory bound there
    inner: Callable[[Stage], None] | None = None
    every_s: float = EVERY_S
    samples: int = 0
    problems: list[str] = field(default_factory=list)
    memory: dict | None = None  # the last sample's view
    host: dict = field(default_factory=dict)
    failure: str | None = None  # a sample that could not be read
    _state: str = "before"
    _kinds: set[str] = field(default_factory=set)
    expected: dict[int, tuple[int, ...]] = field(default_factory=dict, init=False)  # vCPU -> its thread's CPUs
    _last: float = 0.0

    def __post_init__(self) -> None:
        # A thread that runs several vCPUs (single-threaded TCG: --clock virtual) is pinned to all their CPUs
        # (lab.vm.qemu.qemu_backend._pin_and_start): each of its vCPUs is judged against that union.
        self.expected = {v: tuple(sorted({c for u, t in self.tids.items() if t == tid for c in self.pins.get(u, ())}))
                         for v, tid in self.tids.items() if v in self.pins}  # fmt: skip

    def __call__(self, st: Stage) -> None:
        if st.name == START and self._state == "before":
            self._state = "in"
            self._host("start")
            self.sample()
        elif st.name == END and self._state == "in":
            self.sample()
            self._host("end")
            self._state = "after"
        if self.inner is not None:
            self.inner(st)

    def tick(self) -> None:
        if self._state == "in" and time.monotonic() - self._last >= self.every_s:
            self.sample()

    def _host(self, when: str) -> None:
        try:
            self.host[when] = host_load()
        except (OSError, ValueError, IndexError) as err:
            self.failure = self.failure or f"host load: {err}"

    def sample(self) -> None:
        self._last = time.monotonic()
        try:
            view, problems = check_memory(self.planned, read_mappings(self.pid))
            problems += check_vcpus(self.expected, read_affinity(self.tids))
        except SAMPLE_ERRORS as err:  # QEMU going away between two reads
            self.failure = self.failure or f"sample {self.samples + 1}: {err}"
            return
        seen = self.memory or {}  # (the last counted sample; no counted sample has less bound than the one before)
        shrunk = [h for h, v in view.items() if v["bound_mib"] < seen.get(h, {}).get("bound_mib", 0.0)]
        if shrunk:
            # A running guest's RAM is never unmapped: QEMU is exiting (the end mark can be read in the same
            # batch as the power-off). Such a sample proves nothing either way, as a thread that is gone.
            self.failure = self.failure or (
                f"sample {self.samples + 1}: the guest memory bound to host node {shrunk[0]} was being "
                "unmapped (QEMU exiting)"
            )
            return
        self.samples += 1
        self.memory = view
        for p in problems:
            if _kind(p) not in self._kinds:  # (memory that keeps moving is one problem, first seen here)
                self._kinds.add(_kind(p))
                self.problems.append(f"{p} (sample {self.samples})" if self.samples > 1 else p)

    def result(self) -> dict | None:
        """The manifest's ``placement.check`` (None: no workload window was seen)."""
        if self._state == "before":
            return None
        out: dict = {
            "held": not self.problems if self.samples else None,
            "samples": self.samples,
            "every_s": self.every_s,
            "problems": self.problems,
            "memory_by_host_node": self.memory,
        }
        if "start" in self.host and "end" in self.host:
            out["host"] = {
                "load_1m": [self.host["start"]["load_1m"], self.host["end"]["load_1m"]],
                "steal_s": round(self.host["end"]["steal_s"] - self.host["start"]["steal_s"], 2),
            }
        if self.failure:
            out["failure"] = self.failure
        return out
