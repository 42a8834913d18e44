"""Run a matrix: pack runs onto the host, survive interruptions, resume, shard.

Every run is a child process (``numalab run-options OUT/logs/<id>.options.json``, the
run's lab.run.options.RunOptions) writing ``OUT/runs/<id>/``; a
run is done when its manifest exists (run records are renamed into place only
when complete), so running the same command again skips finished runs and
redoes interrupted ones. Children die with the runner (PR_SET_PDEATHSIG), and
their QEMU with them, so even a SIGKILL leaves no VM behind.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lab.analysis.record import load_manifest
from lab.cpulist import format_cpulist
from lab.datafile import load_json
from lab.errors import LabError
from lab.kernel.resolve import resolve_kernel
from lab.matrix.definition import MatrixRun, MatrixSpec, run_options_of
from lab.matrix.host_picker import HostPicker
from lab.paths import json_text, utf8_path, write_text_atomic
from lab.placement.host_inventory import read_inventory
from lab.placement.pinning import QEMU_OVERHEAD_MIB
from lab.record_files import MANIFEST
from lab.run.collect_limit import COLLECT_LIMIT_S
from lab.run.options import RunOptions
from lab.run.remote_latency import COHERENCE_SCALE
from lab.run.request import default_timeout_s
from lab.topology.model.ref import SPEC_SIZE_NAMES
from lab.topology.model.spec import spec_path
from lab.vm.libvirt.libvirt_hostspec import HostSpec
from lab.vm.qemu.qemu_backend import _die_with_parent

MEM_HEADROOM_MIB = 1024
GUARD_S = 180.0  # beyond a run's own limits (its VM's timeout, then its collection's), before the runner kills it


@dataclass
class RunResult:
    id: str
    status: str
    reason: str
    wall_s: float = 0.0
    cpu_s: float | None = 0.0  # None: not known (a run done before, whose summary did not say)
    resumed: bool = False  # done by an earlier invocation
    host: str | None = None  # the libvirt URI that ran it (None: direct QEMU on this machine)

    def to_dict(self) -> dict:
        return self.__dict__.copy()


@dataclass
class MatrixOutcome:
    results: list[RunResult]
    wall_s: float
    cpu_s: float
    cores: int
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def utilisation(self) -> float | None:
        """Run CPU over the cores' time while the matrix ran; None when this invocation started no run (an
        empty shard, or everything resumed): a ratio over next to no wall time says nothing."""
        started = any(not r.resumed for r in self.results)
        return self.cpu_s / (self.cores * self.wall_s) if started and self.wall_s > 0 else None


def run_dir(out: Path, run: MatrixRun) -> Path:
    return out / "runs" / run.id


def is_done(out: Path, run: MatrixRun) -> bool:
    return (run_dir(out, run) / MANIFEST).exists()


def check_out_dir(out: Path, spec: MatrixSpec, shard: tuple[int, int] | None) -> None:
    """Refuse to mix results of a different spec (or shard) in one output directory."""
    meta = out / "matrix.json"
    want = {"spec": spec.name, "source": spec.source, "fingerprint": spec.fingerprint(),
            "shard": list(shard) if shard else None}  # fmt: skip
    utf8_path(out, "--out")  # (its runs' records name it in their UTF-8 files)
    if out.exists() and not out.is_dir():
        raise LabError(f"--out {out}: exists and is not a directory")
    if meta.exists():
        have = load_json(meta)
        if not isinstance(have, dict):
            raise LabError(f"{meta}: not a numalab matrix record (not a JSON object)")
        if have.get("fingerprint") != want["fingerprint"]:
            raise LabError(
                f"--out {out}: holds results of a different matrix spec ({have.get('source')}, fingerprint "
                f"{have.get('fingerprint')}; this spec is {want['fingerprint']}): use another --out"
            )
        if have.get("shard") != want["shard"]:
            raise LabError(f"--out {out}: holds shard {have.get('shard')}, not {want['shard']}: use another --out")
        return
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(meta, json_text(want, indent=2) + "\n")
    except OSError as err:
        raise LabError(f"--out {out}: cannot write there ({err.strerror})") from None


def input_hashes(spec: MatrixSpec, kernel_args: dict[str, str]) -> dict[str, str]:
    """What the spec points to, by content: every topology file and every kernel image (after builds).
    A resumed matrix whose inputs changed would mix runs of two different things."""
    out = {}
    for name in sorted({r.topology.name for r in spec.runs}):
        path = spec_path(name)
        out[f"topology {name}"] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    for name, arg in sorted(kernel_args.items()):
        out[f"kernel {name}"] = resolve_kernel(arg).sha256()[:16]
    for file in sorted({r.workload.file for r in spec.runs if r.workload.file}):  # a user's workload files
        out[f"workload {file}"] = hashlib.sha256(Path(file).read_bytes()).hexdigest()[:16]
    return out


def check_inputs(out: Path, inputs: dict[str, str]) -> None:
    """Refuse to resume into ``out`` when a topology file or kernel image changed since its runs."""
    meta = out / "matrix.json"
    have = load_json(meta)
    before = have.get("inputs") if isinstance(have, dict) else None
    if not isinstance(have, dict) or not isinstance(before or {}, dict):
        raise LabError(f"{meta}: not a numalab matrix record")
    if before is not None:
        changed = [k for k in sorted(set(before) | set(inputs)) if before.get(k) != inputs.get(k)]
        if changed and any((out / "runs").glob("*/manifest.json")):
            raise LabError(
                f"--out {out}: {changed[0]} changed since its runs were made"
                + (f" (and {len(changed) - 1} more)" if len(changed) > 1 else "")
                + ": use another --out, or remove it to start again"
            )
    write_text_atomic(meta, json_text(have | {"inputs": inputs}, indent=2) + "\n")


def _demand(run: MatrixRun) -> tuple[int, int]:
    """(vCPUs, MiB) a run needs on the host."""
    topo = run.topology.load(SPEC_SIZE_NAMES)
    return topo.total_cpus, topo.total_memory_mib + QEMU_OVERHEAD_MIB


def host_threads(run: MatrixRun, vcpus: int) -> int:
    """The host CPUs a run keeps busy: its vCPUs' threads, or one under the virtual clock, where QEMU runs every
    vCPU in turn on one thread (a model VM of 8 vCPUs used one host core: the packing gave it two, and the
    matrix ran one VM at a time on a 2-core host)."""
    return 1 if run_options_of(run, run.kernel.spec, None).guest_time.guest_clock().virtual else vcpus


def child_limit_s(run: MatrixRun, vcpus: int, timeout: float | None) -> float:
    """Host seconds a run's child may take before the runner kills it: the run's own VM timeout (the spec's
    ``timeout:``, else the default the run computes, under TCG), its collection's limit after that, and GUARD_S.
    It was the spec's timeout (or 0) plus 300 s and twice the workload's seconds, whatever the run: a 4-vCPU run of
    the modelled machine under parallel guest time, whose own timeout was 436 s, was killed at 310 s (2026-11-28)."""
    opts = run_options_of(run, run.kernel.spec, timeout)
    clock = opts.guest_time.guest_clock()
    scale = COHERENCE_SCALE if opts.latency.coherence == "on" else 1.0  # (without the machine: no instruments yet)
    own = timeout or default_timeout_s(vcpus, opts.duration, "tcg", clock, instrument_scale=scale)
    return own + max(COLLECT_LIMIT_S, own) + GUARD_S


def run_options(run: MatrixRun, kernel_arg: str, out: Path, timeout: float | None, backend: dict) -> RunOptions:
    """What the child runs for ``run``: the run's axes, its record directory, and ``backend`` (the
    libvirt options of :func:`host_options`, or {} for direct QEMU)."""
    return run_options_of(run, kernel_arg, timeout, out=run_dir(out, run), **backend)


def child_command(opts: RunOptions, options_file: Path) -> list[str]:
    """The child process of one matrix run: ``numalab run-options FILE``, with ``opts`` written to FILE
    (kept beside the run's log: what exactly ran)."""
    options_file.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(options_file, opts.to_json())
    return [sys.executable, "-m", "lab.cli", "run-options", str(options_file)]


def host_options(host: HostSpec) -> dict:
    """The RunOptions fields that send a run to the libvirt host ``host``."""
    return {"backend": "libvirt", "connect": host.uri, "pool_dir": host.pool_dir or None, "no_upload": not host.upload}


def host_of(manifest: dict) -> str | None:
    backend = manifest.get("backend") or {}
    return backend.get("uri") if backend.get("name") == "libvirt" else None


def _result_of(out: Path, run: MatrixRun, log: Path, wall: float, cpu: float) -> RunResult:
    mf = run_dir(out, run) / MANIFEST
    if mf.exists():
        try:
            m = load_manifest(mf)
        except LabError as err:
            return RunResult(run.id, "error", str(err), round(wall, 2), round(cpu, 2))
        return RunResult(run.id, m["status"], m.get("reason", ""), round(wall, 2), round(cpu, 2), host=host_of(m))
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()] if log.exists() else []
    err = next((ln for ln in reversed(lines) if "error" in ln), lines[-1] if lines else "no output")
    return RunResult(run.id, "error", err.removeprefix("numalab: error: "), round(wall, 2), round(cpu, 2))


def _fmt_s(s: float) -> str:
    return f"{int(s // 60)}m{int(s % 60):02d}s" if s >= 60 else f"{s:.0f}s"


class CpuShares:
    """The host CPUs concurrent local runs divide among themselves."""

    def __init__(self, cpus: tuple[int, ...]) -> None:
        self.all = tuple(sorted(cpus))
        self.free = list(self.all)

    def take(self, n: int) -> tuple[int, ...]:
        """n free CPUs (lowest first), or every CPU for a run larger than the host, which the packer
        only starts alone."""
        if n > len(self.free):
            return self.all
        share, self.free = tuple(self.free[:n]), self.free[n:]
        return share

    def give_back(self, share: tuple[int, ...]) -> None:
        if share != self.all:
            self.free = sorted(set(self.free) | set(share))
        else:
            self.free = list(self.all)


def _child_setup(share: tuple[int, ...] | None):
    def setup() -> None:
        if share:
            os.sched_setaffinity(0, share)
        _die_with_parent()

    return setup


@dataclass
class _Child:
    run: MatrixRun
    proc: subprocess.Popen
    started: float
    host: HostSpec | None = None  # the libvirt host it went to
    share: tuple[int, ...] | None = None  # the local CPUs it was given


@dataclass(frozen=True)
class Packing:
    """How a matrix's runs share the host, and where they run: at most ``jobs`` VMs at once (None: as many as
    fit), none started after the first failure with ``fail_fast``, vCPU threads past the host's cores with
    ``overcommit`` (packed by memory only); ``backend``: the run options of the backend local runs use (--backend,
    --connect); ``hosts``: libvirt hosts to spread the runs over instead (:func:`execute_matrix`)."""

    jobs: int | None = None
    fail_fast: bool = False
    overcommit: bool = False
    backend: dict | None = None
    hosts: list[HostSpec] | None = None


class _Packer:
    """The matrix's children: started while they fit, reaped as they end, stopped on a signal."""

    def __init__(self, spec: MatrixSpec, runs: list[MatrixRun], out: Path, kernel_args: dict[str, str],
                 packing: Packing, progress: Callable[[str], None]) -> None:  # fmt: skip
        self.spec, self.runs, self.out, self.kernel_args = spec, runs, out, kernel_args
        self.jobs, self.overcommit, self.backend = packing.jobs, packing.overcommit, packing.backend
        self.progress = progress
        hosts = packing.hosts
        self.picker = HostPicker(hosts) if hosts else None
        inventory = read_inventory()
        self.cores = inventory.n_cpus
        self.mem_budget = max(0, inventory.mem_available_mib - MEM_HEADROOM_MIB)
        # Local runs that fit get host CPUs of their own (the run's affinity, which its vCPU pins
        # stay within), so that concurrent VMs do not all pin to the same first CPUs.
        self.cpus = CpuShares(inventory.online_cpus) if not self.picker and not self.overcommit else None
        self.results: dict[str, RunResult] = {}
        self.pending: list[MatrixRun] = []
        self.running: dict[int, _Child] = {}
        self.demand: dict[str, tuple[int, int]] = {}
        self.threads: dict[str, int] = {}  # the host CPUs each keeps busy (host_threads)
        self.limit_s: dict[str, float] = {}  # host seconds before the runner kills a run's child
        self.t0 = time.monotonic()
        self.cpu_total = 0.0
        self.finished = 0
        self.stop = False

    def resume(self) -> None:
        """Runs already done count as results; a partial record of one that is not is removed."""
        for run in self.runs:
            if is_done(self.out, run):
                self.results[run.id] = _result_of(self.out, run, Path("/nonexistent"), 0, 0)
                self.results[run.id].resumed = True
            else:
                shutil.rmtree(self.out / "runs" / f".{run.id}.partial", ignore_errors=True)
                self.pending.append(run)
        if self.results:
            self.progress(f"resuming: {len(self.results)} of {len(self.runs)} runs already done, "
                          f"{len(self.pending)} to go")  # fmt: skip
        (self.out / "logs").mkdir(parents=True, exist_ok=True)
        self.demand = {r.id: _demand(r) for r in self.pending}
        self.threads = {r.id: host_threads(r, self.demand[r.id][0]) for r in self.pending}
        self.limit_s = {r.id: child_limit_s(r, self.demand[r.id][0], self.spec.timeout) for r in self.pending}

    def _fits(self, run: MatrixRun) -> bool:
        """vCPU threads within host cores (unless overcommit), memory within budget."""
        mem, threads = self.demand[run.id][1], self.threads[run.id]
        used_cpu = sum(self.threads[c.run.id] for c in self.running.values())
        used_mem = sum(self.demand[c.run.id][1] for c in self.running.values())
        return (self.overcommit or used_cpu + threads <= self.cores) and used_mem + mem <= self.mem_budget

    def launch(self) -> None:
        """Start pending runs while they fit (one at least when nothing runs) and --jobs allows."""
        while self.pending and not self.stop and (self.jobs is None or len(self.running) < self.jobs):
            run = self.pending[0]
            fits = self._fits(run)
            host = self.picker.pick() if self.picker else None
            if self.picker and host is None:
                break
            if not self.picker and self.running and not fits:
                break
            self.pending.pop(0)
            self._start(run, host)

    def _start(self, run: MatrixRun, host: HostSpec | None) -> None:
        log = self.out / "logs" / f"{run.id}.log"
        opts = run_options(run, self.kernel_args[run.kernel.name], self.out, self.spec.timeout,
                           host_options(host) if host else (self.backend or {}))  # fmt: skip
        cmd = child_command(opts, self.out / "logs" / f"{run.id}.options.json")
        share = self.cpus.take(self.threads[run.id]) if self.cpus else None
        with open(log, "w") as f:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                    preexec_fn=_child_setup(share))  # fmt: skip
        self.running[proc.pid] = _Child(run, proc, time.monotonic(), host, share)
        if host and self.picker:
            self.picker.take(host)
        where = f" on {host.uri}" if host else f" on CPUs {format_cpulist(share)}" if share else ""
        self.progress(f"start {run.id}{where}")

    def reap(self, fail_fast: bool) -> None:
        """Collect the children that ended; kill one that outlived its run's limit."""
        for pid, child in list(self.running.items()):
            wpid, status, usage = os.wait4(pid, os.WNOHANG)
            elapsed = time.monotonic() - child.started
            if wpid == 0:
                if elapsed > self.limit_s[child.run.id]:
                    child.proc.kill()
                continue
            child.proc.returncode = os.waitstatus_to_exitcode(status)
            del self.running[pid]
            if child.host and self.picker:
                self.picker.release(child.host)
            if child.share and self.cpus:
                self.cpus.give_back(child.share)
            self._finished(child, elapsed, usage.ru_utime + usage.ru_stime, fail_fast)

    def _finished(self, child: _Child, elapsed: float, cpu: float, fail_fast: bool) -> None:
        run = child.run
        self.cpu_total += cpu
        res = _result_of(self.out, run, self.out / "logs" / f"{run.id}.log", elapsed, cpu)
        self.results[run.id] = res
        self.finished += 1
        left = len(self.pending) + len(self.running)
        eta = (time.monotonic() - self.t0) / self.finished * left
        self.progress(f"[{len(self.results)}/{len(self.runs)}] {res.status:<17} {run.id} ({elapsed:.0f}s)"
                      f"{'' if res.status == 'ok' else ' - ' + res.reason}  ETA {_fmt_s(eta)}")  # fmt: skip
        if fail_fast and res.status != "ok" and not self.stop:
            self.stop = True
            self.progress("--fail-fast: not starting further runs")

    def stop_all(self, why: object) -> None:
        """SIGTERM to every running child (each leaves no VM and no complete record), SIGKILL after 30 s."""
        self.progress(f"interrupted ({why}): stopping {len(self.running)} running VM(s); run again to resume")
        for child in self.running.values():
            child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for child in self.running.values():
            try:
                child.proc.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.proc.kill()
                child.proc.wait()


def execute_matrix(
    spec: MatrixSpec,
    runs: list[MatrixRun],
    out: Path,
    kernel_args: dict[str, str],
    packing: Packing = Packing(),
    progress: Callable[[str], None] = lambda _m: None,
) -> MatrixOutcome:
    """Run what is not done yet, as many at once as the host fits.

    With ``packing.hosts`` (libvirt hosts), each run goes to the least-loaded host with
    a free slot, and a host's ``capacity`` is how many runs it takes at once;
    this machine's cores and memory then do not limit the packing.
    """
    packer = _Packer(spec, runs, out, kernel_args, packing, progress)
    packer.resume()
    own0 = resource.getrusage(resource.RUSAGE_SELF)
    interrupted = False

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while packer.pending or packer.running:
            packer.launch()
            time.sleep(0.2)
            packer.reap(packing.fail_fast)
    except KeyboardInterrupt as sig:
        interrupted = True
        packer.stop_all(sig)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    wall = time.monotonic() - packer.t0
    ordered = [packer.results[r.id] for r in runs if r.id in packer.results]
    own = resource.getrusage(resource.RUSAGE_SELF)  # this process's own share while the matrix ran
    own_s = own.ru_utime + own.ru_stime - own0.ru_utime - own0.ru_stime
    return MatrixOutcome(ordered, wall, packer.cpu_total + own_s, packer.cores, interrupted)
