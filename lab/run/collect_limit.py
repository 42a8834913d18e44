"""The host's own time limit on collecting a guest's results, separate from the VM's timeout.

After the VM has powered off, numalab unpacks the guest's tars, assembles and reads its trace and parses its
files. Each reader is bounded in what it reads (lab.untrusted), and a user's result patterns run in linear
time (RE2, lab.workloads.workload_output.user_pattern); this is the net under all of them: a reader still running when
the collection's limit passes is stopped (SIGALRM in the main thread; a ``trace-cmd`` child is killed by the
``subprocess`` call it runs under), and every reader after it is skipped. Each is a named problem in the
record (``guest_data_problems``): the run is never left hanging, and the record is still written whole.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator

COLLECT_LIMIT_S = 300.0  # host seconds after the VM ends; lab.run.execute.RunRequest.collect_limit()
RECHECK_S = 1.0  # after the limit, a reader that started anyway is stopped within this


class CollectOverrun(Exception):
    """A reader ran past the collection's limit (an Exception: lab.run.execute._guarded records it)."""


class CollectLimit:
    """``with limit.armed(): ... with limit.reader(): ...``; only a reader is ever interrupted."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self._in_reader = 0

    @property
    def over(self) -> bool:
        return time.monotonic() >= self.deadline

    def why(self) -> str:
        return f"the host's collection of the guest's results ran past its limit of {self.seconds:g} s"

    def _alarm(self, _signum, _frame) -> None:
        if self._in_reader:
            raise CollectOverrun(self.why())

    @contextlib.contextmanager
    def armed(self) -> Iterator[CollectLimit]:
        """SIGALRM at the limit and every RECHECK_S after it, for as long as the block runs."""
        old = signal.signal(signal.SIGALRM, self._alarm)
        signal.setitimer(signal.ITIMER_REAL, max(self.deadline - time.monotonic(), 0.001), RECHECK_S)
        try:
            yield self
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)

    @contextlib.contextmanager
    def reader(self) -> Iterator[None]:
        """A block the alarm may interrupt (CollectOverrun); one that starts after the limit raises at once."""
        if self.over:
            raise CollectOverrun(self.why())
        self._in_reader += 1
        try:
            yield
        finally:
            self._in_reader -= 1


NO_LIMIT = CollectLimit(float("inf"))
