"""Watching a VM's serial console file: the guest init's stage marks, for every backend.

A mark is ``NUMALAB-STAGE <token> <name> [detail...] <uptime>``. The token is the run's own, random, handed to
the init in its initramfs (``/plan/token``, which the init reads and deletes before anything else runs; never
on the kernel command line, which every guest process can read in /proc/cmdline). A mark without it is not
the init's: guest userspace can write to /dev/console too. Such a mark is kept aside (``VmOutcome.forged``),
never taken as a timing or a failure reason. Every mark the host does take is also bound by its own clock
(:func:`check_marks`): the host's monotonic time when the line arrived is recorded beside the guest's uptime,
and a mark the host's clock contradicts is a problem, not a timing (docs/security.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lab.untrusted import to_float

STAGE_MARK = "NUMALAB-STAGE "


@dataclass
class Stage:
    name: str
    detail: str
    host_s: float  # seconds since the guest was started, by the host's monotonic clock when the line arrived
    guest_uptime: float | None
    authentic: bool = True  # it carried the run's token (parse_stage)
    contradicted: bool = False  # the host's clock contradicts its uptime (check_marks): not a timing


@dataclass
class VmOutcome:
    exit_code: int | None
    timed_out: bool
    wall_s: float
    stages: list[Stage] = field(default_factory=list)
    pinned: dict[int, str] = field(default_factory=dict)  # vCPU -> the host CPUs it was pinned to (cpulist)
    pin_error: str | None = None
    limit: str | None = None  # why the run was stopped for sending too much (lab.vm.share.ShareGuard)
    vm_failure: str | None = None  # QEMU itself failed (did not start, exited with an error, was killed)
    hang_state: dict | None = None  # at a timeout: QEMU's run state and each vCPU's RIP (lab.vm.hang)
    boot_stalled: bool = False  # stopped at the boot deadline: the guest init never reported "booted"
    vcpu_time: dict | None = None  # the vCPU threads' CPU time over the workload window (lab.vm.vcpu_time)
    # The guest kernel said it panicked through the pvpanic device (QMP GUEST_PANICKED, libvirt's "crashed"):
    # a signal its userspace cannot fake, unlike a panic line on the console.
    guest_panicked: bool = False
    # Stage marks without the run's token (not the init's: guest userspace wrote them), the first MAX_FORGED.
    forged: list[Stage] = field(default_factory=list)
    forged_count: int = 0
    # Whether the placement held over the workload window, read from outside QEMU (lab.vm.placement_watch).
    placement_check: dict | None = None

    def stage(self, name: str) -> Stage | None:
        return next((s for s in self.stages if s.name == name), None)

    def take(self, line: str, now: float, token: str) -> Stage | None:
        """A console line's stage mark, kept: the init's (with the run's token) among the stages, and returned;
        another (guest userspace's) counted as forged, the first MAX_FORGED kept. None for a line without one."""
        st = parse_stage(line, now, token)
        if st and not st.authentic:
            self.forged_count += 1
            if len(self.forged) < MAX_FORGED:
                self.forged.append(st)
            return None
        if st:
            self.stages.append(st)
        return st


MAX_FORGED = 20  # forged marks kept (and counted beyond)


class LineFollower:
    """A file that grows (a guest's console), read as it grows: each call of :meth:`new_lines` gives the whole
    lines written since the last one, decoded (undecodable bytes replaced, a trailing CR dropped); a part
    line waits for its end. A file not there yet, or unreadable for a moment, gives none. ``chunk`` bounds
    what one call reads (-1: all there is, so nothing is left unread once the writer has ended)."""

    def __init__(self, path: Path, chunk: int = -1) -> None:
        self.path, self.chunk, self.offset, self.rest = path, chunk, 0, b""

    def new_lines(self) -> list[str]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read(self.chunk)
        except OSError:
            return []
        self.offset += len(data)
        *lines, self.rest = (self.rest + data).split(b"\n")
        return [raw.decode(errors="replace").rstrip("\r") for raw in lines]


def parse_stage(line: str, t: float, token: str = "") -> Stage | None:
    """A stage mark on a console line, or None. With ``token`` (the run's), a mark whose first word is not it
    comes back with ``authentic`` False (the words after the mark, as they are, for the record)."""
    i = line.find(STAGE_MARK)
    if i < 0:
        return None
    words = line[i + len(STAGE_MARK) :].split()
    authentic = not token or (bool(words) and words[0] == token)
    if token and authentic:
        words = words[1:]
    if not words:
        return None
    uptime = to_float(words[-1])  # (finite, of bounded length: the guest's word)
    if uptime is not None:
        words = words[:-1]
    if not words:
        return None
    return Stage(words[0][:64], " ".join(words[1:])[:512], t, uptime, authentic)


# How far the guest's uptime may stray from the host's clock between two marks: the host reads the console
# every 0.1 s, later on a loaded host, and a guest kernel's clock calibration under TCG is off by a few %.
SLACK_S = 2.0
SLACK_SHARE = 0.1


ONCE = frozenset(("booted", "topology", "workload-start", "workload-end", "collect", "done", "failed"))


def _slack(host_s: float, base_s: float = SLACK_S) -> float:
    return base_s + SLACK_SHARE * abs(host_s)


def check_marks(outcome: VmOutcome, host_clock: bool = True, slack_s: float = SLACK_S) -> list[str]:
    """Problems with the run's stage marks, each a named one; marks the host's clock contradicts are flagged
    ``contradicted`` (lab.run.manifest then takes no timing from them). A guest's uptime may not go back,
    may not run ahead of the time the VM has run, and between two marks may not differ from what the host
    saw by more than the slack. ``host_clock`` False (``--clock virtual``: guest time counts instructions)
    keeps only the first rule. Forged marks (no token) are named too. ``slack_s``: the fixed part of the
    slack (a slow console, as under nested KVM, shows marks late: lab.run.request.RunRequest.mark_slack_s)."""
    problems: list[str] = []
    for st in outcome.forged:
        problems.append(f"console: a stage mark without the init's token, not taken (forged by the guest?): "
                        f"{st.name[:40]!r} {st.detail[:80]!r} at {st.host_s:.1f} s")  # fmt: skip
    if outcome.forged_count > len(outcome.forged):
        problems.append(f"console: {outcome.forged_count - len(outcome.forged)} more stage marks without the token")
    prev: Stage | None = None
    seen: set[str] = set()
    for st in outcome.stages:
        u = st.guest_uptime
        if st.name in ONCE and st.name in seen:
            st.contradicted = True
            problems.append(f"stage mark {st.name}: a second time (the init gives it once; not a timing)")
            for first in outcome.stages:  # (which of the two is the init's, the host cannot tell)
                first.contradicted = first.contradicted or first.name == st.name
            continue
        seen.add(st.name)
        if u is None:
            continue
        why = ""
        if host_clock and u > st.host_s + _slack(st.host_s, slack_s):
            # (the guest's clock starts when its vCPUs do, after the watch's start: QEMU starts paused)
            why = f"uptime {u:g} s, but the VM had run {st.host_s:.1f} s"
        elif prev is not None and prev.guest_uptime is not None:
            dg, dh = u - prev.guest_uptime, st.host_s - prev.host_s
            if dg < 0:
                why = f"uptime {u:g} s, before the {prev.name} mark's {prev.guest_uptime:g} s"
            elif host_clock and abs(dg - dh) > _slack(dh, slack_s):
                why = f"{dg:.2f} s by the guest's uptime after the {prev.name} mark, {dh:.2f} s by the host's clock"
        if why:
            st.contradicted = True
            problems.append(f"stage mark {st.name}: {why}; the host's clock contradicts it (not a timing)")
            continue  # (the next mark is measured from the last one that stood)
        prev = st
    return problems


@dataclass(frozen=True)
class WatchRules:
    """When the console watch (:func:`watch`) ends before the VM exits, and how often it looks.

    ``timeout_s``: the VM's timeout (``cancel``, once set, is the caller's own deadline, taken as the timeout).
    ``guard`` (if given) is asked at every look: a reason it returns ends the watch, with the reason in
    ``outcome.limit``; the backend then stops the VM. ``boot_deadline_s`` (if given): a guest whose init has not
    reported "booted" by then is given up on as a timeout with ``outcome.boot_stalled`` set (lab.run.boot boots
    it once more). ``poll_s``: the wait between two looks."""

    timeout_s: float
    guard: Callable[[], str | None] | None = None
    boot_deadline_s: float | None = None
    cancel: threading.Event | None = None
    poll_s: float = 0.1


def watch(
    console_log: Path,
    outcome: VmOutcome,
    rules: WatchRules,
    exited: Callable[[], int | None],
    on_stage: Callable[[Stage], None] | None = None,
    on_tick: Callable[[float], None] | None = None,
    wait: Callable[[float], None] = time.sleep,
    token: str = "",
) -> None:
    """Follow the console until ``exited()`` returns an exit code or ``rules`` end the watch (a timeout, a
    guest that never booted, the guard's reason). Each stage mark with the run's ``token`` goes to
    ``on_stage`` (lab.vm.console.VmOutcome.take), the seconds since the start to ``on_tick`` at every look.

    Between looks it calls ``wait(rules.poll_s)``: a backend that can wake up as soon as its VM exits
    passes a wait that does (QemuBackend waits on QEMU's pidfd), so the run does not idle up to
    ``poll_s`` after the guest powers off."""
    timeout_s, guard, boot_deadline_s, cancel = rules.timeout_s, rules.guard, rules.boot_deadline_s, rules.cancel
    start = time.monotonic()
    console = LineFollower(console_log)
    while True:
        code = exited()
        now = time.monotonic() - start
        for line in console.new_lines():
            st = outcome.take(line, now, token)
            if st and on_stage:
                on_stage(st)
        if code is not None:
            outcome.exit_code = code
            if guard is not None and (reason := guard()):  # it went over just before it exited
                outcome.limit = reason
            return
        if now > timeout_s or (cancel is not None and cancel.is_set()):
            outcome.timed_out = True
            return
        if boot_deadline_s is not None and now > boot_deadline_s and outcome.stage("booted") is None:
            outcome.timed_out = outcome.boot_stalled = True
            return
        if guard is not None and (reason := guard()):
            outcome.limit = reason
            return
        if on_tick:
            on_tick(now)
        wait(rules.poll_s)
