"""Stage 2 of a run (lab.run.execute): the VM runs the guest's settings; a boot that stalls before init (TCG) is
booted once more. What happened is handed to the collect stage as one :class:`Booted`."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

from lab.record_files import CONSOLE_LOG
from lab.run.prepare import Prepared
from lab.run.request import Trip
from lab.untrusted import read_guest_text
from lab.vm.backend import VmRequest
from lab.vm.console import Stage, VmOutcome
from lab.vm.hang import describe as describe_hang
from lab.vm.share import make_share

BOOT_ATTEMPTS = 2  # under TCG: one more boot when the first stalls before init (RunRequest.boot_deadline)


@dataclass(frozen=True)
class Booted:
    """What the boot stage hands the collect stage: how the VM ended and when the workload ran."""

    outcome: VmOutcome
    backend_info: dict
    share: Path  # prep.share, or a fresh one when a stalled boot was booted again
    stalled: tuple[dict, ...]
    workload_start_ns: int | None = None
    workload_end_ns: int | None = None


def boot(trip: Trip, prep: Prepared) -> Booted:
    """The VM runs the guest's settings; a boot that stalls before init (TCG) is booted once more."""
    req, say = trip.req, trip.say
    say(f"booting {req.topology.name} ({req.topology.total_cpus} vCPUs, {req.accel})")
    duration = req.settings.duration_s
    state = {"workload_start": None, "last_tick": 0.0}

    def on_stage(st: Stage) -> None:
        if st.name == "booted":
            say(f"booted in {st.host_s:.1f}s")
        elif st.name == "workload-start":
            state["workload_start"] = st.host_s
            state["workload_start_ns"] = time.monotonic_ns()
            say(f"running {req.workload.name} for {duration:g}s")
        elif st.name == "workload-end":
            state["workload_end_ns"] = time.monotonic_ns()
            say(f"collecting (workload exit {st.detail or '?'})")
        elif st.name == "failed":
            say(f"guest failed: {st.detail}")

    def on_tick(now: float) -> None:
        start = state["workload_start"]
        if start is None:
            return
        if req.clock.virtual:  # the duration is guest time, which the host takes many times as long to run
            if now - state["last_tick"] >= 30:
                state["last_tick"] = now
                say(f"running {now - start:.0f} host s of {duration:g} guest s (the guest's clock counts instructions)")
        elif now - state["last_tick"] >= 5 and now - start < duration:
            state["last_tick"] = now
            say(f"running {now - start:.0f}/{duration:g}s")

    limits = req.limits()
    deadline = req.boot_deadline()
    stalled: list[dict] = []
    spec, share = prep.boot, prep.share
    for attempt in range(1, BOOT_ATTEMPTS + 1):
        last = attempt == BOOT_ATTEMPTS
        vm = VmRequest(req.topology, trip.placement, spec, trip.record, req.timeout(), on_stage, on_tick, limits,
                       boot_deadline_s=None if last else deadline)  # fmt: skip
        outcome, backend_info = req.backend.run(vm)
        if not outcome.boot_stalled:
            break
        where = describe_hang(outcome.hang_state)
        console = read_guest_text(trip.record / CONSOLE_LOG) or ""
        stalled.append({
            "attempt": attempt, "deadline_s": deadline, "vm_s": round(outcome.wall_s, 2),
            "vm_at_timeout": outcome.hang_state, "console_tail": console.splitlines()[-20:],
        })  # fmt: skip
        say(f"boot attempt {attempt} stalled: no init after {deadline:.0f}s ({where}); booting again")
        shutil.rmtree(share)  # (the guest never reached init: nothing of its is in it)
        share = make_share(trip.scratch)
        spec = replace(spec, cmdline=f"{spec.cmdline} numalab.boot_attempt={attempt + 1}")
    if outcome.limit:
        say(f"stopped the guest: {outcome.limit}")
    return Booted(outcome, backend_info, share, tuple(stalled), state.get("workload_start_ns"),
                  state.get("workload_end_ns"))  # fmt: skip
