"""The vCPU threads' CPU time and wait to run over the workload window (the manifest's ``vcpu_time``).

Under TCG a guest's throughput by its own clock moves 20-100% with host load: the guest's clock
runs at host speed while its vCPU threads get less CPU. Work per vCPU CPU-second (the work divided
by the CPU time the vCPU threads got during the workload) takes most of that out
(lab.analysis.metrics, the ``*_per_vcpu_s`` metrics).

Each backend samples its vCPU threads when the guest's ``workload-start`` and ``workload-end``
stage marks reach the console watcher (:class:`StageSampler` wraps the run's ``on_stage``):

* direct QEMU: ``/proc/<qemu pid>/task/<vCPU tid>/schedstat`` (run ns, wait-to-run ns, timeslices),
  the thread ids from QMP's ``query-cpus-fast``;
* libvirt: the domain's vCPU statistics (``virConnectGetAllDomainStats`` with VIR_DOMAIN_STATS_VCPU:
  ``vcpu.N.time``, and ``vcpu.N.delay``, the time the thread waited in the host's run queue, which
  libvirt reads from the same schedstat file), so a remote host works too.

Both samples are taken when the watcher reads the stage line (every 0.1 s for QEMU, 0.3 s for
libvirt's console mirror), so the window is the workload's, give or take that delay at each end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import LabError
from lab.vm.console import Stage

START, END = "workload-start", "workload-end"
# What a failed sample raises (a thread or domain gone, libvirt saying no, a record cut short). Nothing
# broader: a run's SIGTERM handler raises its own exception in whatever the main thread is doing, sampling
# included, and that must end the run.
SAMPLE_ERRORS = (LabError, OSError, ValueError, KeyError, TypeError)


@dataclass(frozen=True)
class ThreadTime:
    run_ns: int  # CPU time
    wait_ns: int | None  # time runnable but waiting for a host CPU (None: the source does not say)
    slices: int | None  # timeslices run (None: the source does not say)


Sample = dict[int, ThreadTime]  # vCPU index -> its thread's counters


def read_schedstat(pid: int, tid: int, proc: Path = Path("/proc")) -> ThreadTime | None:
    """One thread's /proc/<pid>/task/<tid>/schedstat, or None if it is gone or unreadable."""
    try:
        words = (proc / str(pid) / "task" / str(tid) / "schedstat").read_text().split()
        run, wait, slices = (int(w) for w in words[:3])
    except (OSError, ValueError):
        return None
    return ThreadTime(run, wait, slices)


def schedstat_sampler(pid: int, tids: dict[int, int], proc: Path = Path("/proc")) -> Callable[[], Sample]:
    """A sampler of the vCPU threads ``tids`` (vCPU index -> thread id) of QEMU process ``pid``. A thread that
    runs several vCPUs (single-threaded TCG: --clock virtual) is read once, as its lowest vCPU."""
    first: dict[int, int] = {}
    for vcpu, tid in sorted(tids.items()):
        first.setdefault(tid, vcpu)
    threads = {vcpu: tid for tid, vcpu in first.items()}

    def sample() -> Sample:
        out = {}
        for vcpu, tid in sorted(threads.items()):
            t = read_schedstat(pid, tid, proc)
            if t is not None:
                out[vcpu] = t
        return out

    return sample


def libvirt_stats_sample(stats: dict) -> Sample:
    """vCPU counters from one domain's VIR_DOMAIN_STATS_VCPU record (``vcpu.N.time``, ``vcpu.N.delay``)."""
    out = {}
    for i in range(int(stats.get("vcpu.current", stats.get("vcpu.maximum", 0)) or 0)):
        run = stats.get(f"vcpu.{i}.time")
        if run is None:
            continue
        delay = stats.get(f"vcpu.{i}.delay")
        out[i] = ThreadTime(int(run), int(delay) if delay is not None else None, None)
    return out


def _s(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e9, 6)


def window(source: str, start: tuple[float, Sample], end: tuple[float, Sample]) -> dict:
    """The manifest's ``vcpu_time`` from the samples at the workload's start and end (host monotonic s, counters).

    ``run_s``/``wait_s`` are summed over the vCPUs present in both samples; ``wait_s`` is None when
    the source does not give it for every vCPU."""
    (t0, a), (t1, b) = start, end
    vcpus = []
    for i in sorted(set(a) & set(b)):
        x, y = a[i], b[i]
        wait = None if x.wait_ns is None or y.wait_ns is None else y.wait_ns - x.wait_ns
        slices = None if x.slices is None or y.slices is None else y.slices - x.slices
        vcpus.append({"vcpu": i, "run_s": _s(y.run_ns - x.run_ns), "wait_s": _s(wait), "slices": slices})
    waits = [v["wait_s"] for v in vcpus]
    return {
        "source": source,
        "window_s": round(t1 - t0, 3),
        "n_vcpus": len(vcpus),
        "run_s": round(sum(v["run_s"] for v in vcpus), 6),
        "wait_s": round(sum(waits), 6) if vcpus and None not in waits else None,
        "vcpus": vcpus,
    }


@dataclass
class StageSampler:
    """Wraps a run's ``on_stage``: samples the vCPU threads at the workload's start and end marks.

    ``sample`` may fail (the VM went away, libvirt said no): the failure is kept as ``problem``
    and the run goes on; the manifest then says why there is no ``vcpu_time``."""

    source: str
    sample: Callable[[], Sample]
    inner: Callable[[Stage], None] | None = None
    taken: dict[str, tuple[float, Sample]] = field(default_factory=dict)
    problem: str | None = None
    last: tuple[float, Sample] | None = None  # refresh()'s latest sample inside the window
    end_from_last: bool = False

    def __call__(self, st: Stage) -> None:
        if st.name in (START, END) and st.name not in self.taken:
            t = time.monotonic()
            try:
                sample = self.sample()
            except SAMPLE_ERRORS as err:  # a failed sample is recorded, never a failed run
                sample, failure = {}, f"{st.name}: {err}"
            else:
                failure = None if sample else f"{st.name}: no vCPU could be read"
                if sample and not self._whole(sample):
                    gone = sorted(set(self.taken[START][1]) - set(sample))
                    failure = f"{st.name}: vCPU {', '.join(map(str, gone))} gone (the VM was stopping)"
            if st.name == END and failure and self.last is not None:
                # The VM stopped before its end mark was read (libvirt's console mirror is read every
                # 0.3 s; a short collection powers off sooner), or while it was read (some vCPU threads
                # already gone): the last whole sample before it stopped.
                self.taken[END], self.end_from_last = self.last, True
            elif not failure:
                self.taken[st.name] = (t, sample)
            else:
                self.problem = self.problem or failure
        if self.inner is not None:
            self.inner(st)

    def _whole(self, sample: Sample) -> bool:
        """Every vCPU the start sample had is in ``sample`` (a VM that is stopping loses its threads one by one:
        a window over some of them would undercount the vCPU time and inflate every twin)."""
        start = self.taken.get(START)
        return start is None or set(start[1]) <= set(sample)

    def refresh(self) -> None:
        """Between the workload's marks: a sample for the end mark to fall back on (call it as the watcher ticks)."""
        if START in self.taken and END not in self.taken:
            try:
                sample = self.sample()
            except SAMPLE_ERRORS:  # the VM may be going away: the end mark's own sample decides
                return
            if sample and self._whole(sample):
                self.last = (time.monotonic(), sample)

    def result(self) -> dict | None:
        """The manifest's ``vcpu_time``: the window's figures, or why there are none (None: no workload ran)."""
        if START not in self.taken and END not in self.taken and self.problem is None:
            return None
        if START in self.taken and END in self.taken and self.taken[START][1] and self.taken[END][1]:
            out = window(self.source, self.taken[START], self.taken[END])
            back = [v["vcpu"] for v in out["vcpus"] if v["run_s"] < 0]
            if back:  # (met once through libvirt, 2026-11-29: a figure no vCPU can have, not to be divided by)
                vcpus = ", ".join(map(str, back))
                return {"source": self.source, "problem": f"vCPU {vcpus}'s run time went backwards over the window"}
            return out | {"end": "the last sample before the VM stopped"} if self.end_from_last else out
        why = self.problem or (
            "the workload never ended (no workload-end stage)" if END not in self.taken else "no vCPU thread was read"
        )
        return {"source": self.source, "problem": why}
