"""Stage 3 of a run (lab.run.execute): the guest's files unpacked and read, each reader under one net
(:class:`Net`: a reader's failure is a named problem, and none runs past the collection's limit), the run
classified (lab.run.status) and its manifest built (lab.run.manifest)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from lab.analysis import plausible
from lab.analysis.cpu_readback import check_cpus, read_cpus
from lab.analysis.kernel_complaints import read_complaints
from lab.analysis.metrics import METRIC_KEYS, per_vcpu_second, run_metrics
from lab.analysis.node_cpu import node_cpu_time
from lab.analysis.readback import build_id, check_topology, read_sched_domains, read_topology
from lab.analysis.results import Unpacked, unpack_results
from lab.analysis.sched_cache import sched_cache_view
from lab.analysis.sched_verbose import check_groups, groups_record, read_sched_groups
from lab.analysis.steady_state import balancing_phase
from lab.record_files import (
    CONSOLE_LOG,
    DMESG_BOOT,
    KERNEL_NOTES,
    KNOBS,
    READBACK_TAR,
    TRACE_RECORD_RC,
    UNAME,
    WORKLOAD_OUT,
    WORKLOAD_RC,
)
from lab.run import instrument_set
from lab.run.boot import Booted
from lab.run.collect_limit import NO_LIMIT, CollectLimit, CollectOverrun
from lab.run.instrument import InstrumentResult, Window
from lab.run.manifest import (
    GuestSaid,
    GuestView,
    Instruments,
    ManifestInputs,
    RecordFiles,
    RunAsked,
    RunEnd,
    RunMachine,
    clocksource_of,
    workload_seconds,
)
from lab.run.manifest import build as build_manifest
from lab.run.prepare import Prepared
from lab.run.request import RunRequest, Trip
from lab.run.scheduler import at_timeout as scheduler_at_timeout
from lab.run.scheduler import machine_said
from lab.run.scheduler import readback as scheduler_readback
from lab.run.status import Evidence, classify
from lab.topology.predictions.cpu_view import ALL_LEVELS, configured_levels
from lab.topology.predictions.snc_fix import FIXING_UP, sched_topology
from lab.trace.assemble import assemble_run
from lab.untrusted import read_guest_text, term_safe, to_int
from lab.vm.console import VmOutcome, check_marks
from lab.vm.share import guest_done, inventory
from lab.vm.tcg import tcg_boot
from lab.workloads.registry import SECONDS_METRICS
from lab.workloads.workload_output import parse_output
from lab.workloads.workload_type import Workload


def _read(path: Path) -> str:
    return read_guest_text(path) or ""


def _int_file(path: Path) -> int | None:
    return to_int(read_guest_text(path) or "")


def _guarded(problems: list[str], what: str, fn: Callable, default, *args, limit: CollectLimit = NO_LIMIT):
    """``fn(*args)``, or ``default`` with the failure in ``problems``: no reader of the guest's files may stop
    a run record from being written (they are meant to be total; this is the net under them), nor run past
    the collection's ``limit`` (lab.run.collect_limit)."""
    try:
        with limit.reader():
            return fn(*args)
    except CollectOverrun as e:
        problems.append(f"{what}: not read ({e})")
        return default
    except Exception as e:  # noqa: BLE001 (a guest's file, whatever it holds, is a result)
        problems.append(f"reading the {what} failed: {type(e).__name__}: {term_safe(str(e))[:200]}")
        return default


@dataclass(frozen=True)
class Net:
    """The net under every reader of the guest's files (:func:`_guarded`): where their problems go (the
    manifest's ``guest_data_problems``) and the collection's limit. Called as ``net(what, fn, default, *args)``."""

    problems: list[str] = field(default_factory=list)
    limit: CollectLimit = NO_LIMIT

    def __call__(self, what: str, fn: Callable, default, *args):
        return _guarded(self.problems, what, fn, default, *args, limit=self.limit)


@dataclass(frozen=True)
class Gathered:
    """What the collect stage read before it judges the run: the unpacked tars, the record's files, the
    instruments' counts and the run's time so far."""

    unpacked: Unpacked
    files: list[str]  # the record's files when it was collected
    total_s: float
    instruments: tuple[InstrumentResult, ...] = ()  # the TCG plugin's (lab.run.instrument)


def collect(trip: Trip, prep: Prepared, booted: Booted) -> dict:
    """The guest's files unpacked and checked, the run classified: its manifest (not yet written), under the
    host's own limit on reading what the guest sent (lab.run.collect_limit)."""
    limit = CollectLimit(trip.req.collect_limit())
    with limit.armed():
        return _collect_bounded(trip, prep, booted, Net([], limit))


def _collect_bounded(trip: Trip, prep: Prepared, booted: Booted, net: Net) -> dict:
    """The reading of the guest's files, under ``net.limit``: a reader it stops is a named problem."""
    req, d = trip.req, trip.record
    limits = req.limits()
    try:
        with net.limit.reader():
            unpacked = unpack_results(booted.share, d, limits.output_bytes, limits.tar_members)  # tars -> files
    except CollectOverrun as e:
        unpacked = Unpacked(problems=[f"the guest's tars were not unpacked: {e}"])
    net("trace buffers", assemble_run, None, d)  # trace-raw/ -> trace.dat (raw)
    total_s = time.monotonic() - trip.started
    files = sorted(p.name for p in d.iterdir() if p.is_file())
    workload_s = workload_seconds(booted.outcome)
    window = Window(booted.workload_start_ns, booted.workload_end_ns,
                    round(workload_s, 2) if workload_s is not None else None, req.clock.virtual)  # fmt: skip
    counts = instrument_set.collect(req.instruments, d, prep.plugin, window)
    gathered = Gathered(unpacked, files, total_s, counts)
    manifest = build_manifest(_manifest_inputs(trip, prep, booted, gathered, net))
    # (a boot again after a stall only adds numalab.boot_attempt=N to the command line: prep's tells of lpj=)
    if manifest["status"] == "ok" and "lpj=" not in prep.boot.cmdline and not req.clock.virtual:
        dmesg = _read(d / DMESG_BOOT)
        learn = Net([], net.limit)  # (what the host learns of its TSC: no problem of the run's)
        learn("boot log", tcg_boot.learn, None, req.kernel.image, req.accel, dmesg, prep.tsc_host)
    return manifest


def _manifest_inputs(trip: Trip, prep: Prepared, booted: Booted, got: Gathered, net: Net) -> ManifestInputs:
    """What the run record and the outcome say, classified, for the manifest (lab.run.manifest)."""
    req, d, outcome, unpacked = trip.req, trip.record, booted.outcome, got.unpacked
    data_problems = net.problems  # the guest's files that were not right
    readback, domains, groups, problems, sched_cache = _guest_view(req, d, outcome, unpacked, net)
    console = _read(d / CONSOLE_LOG)
    release = (read_guest_text(d / UNAME, data_problems) or "").strip()[:256] or None  # (not UTF-8: a problem)
    # (before any timing is taken)
    marks = net("stage marks", check_marks, [], outcome, not req.clock.virtual, req.mark_slack_s())
    evidence, result = _evidence(trip, booted, unpacked, console, problems, net)
    guest_build_id = net("kernel notes", build_id, None, d / KERNEL_NOTES)
    if guest_build_id is None and evidence.booted and req.kernel.expected_build_id()[0]:
        data_problems.append(f"{KERNEL_NOTES}: no GNU build-id: the kernel the guest runs cannot be verified")
    evidence = replace(evidence, kernel_problem=kernel_problem(req.kernel, guest_build_id, evidence.booted))
    metrics = _metrics(req, d, outcome, result, net)
    implausible = marks + net("plausibility checks", _implausible, [], req, outcome, result, metrics)
    # (a problem names a file as the record has it: the '.partial' directory it was read in is renamed)
    data_problems[:] = in_record(data_problems, d)
    unpacked.problems[:] = in_record(unpacked.problems, d)
    if metrics.get("trace_problems"):
        metrics["trace_problems"] = in_record(metrics["trace_problems"], d)
    # (every reader's problem counts, the metrics' too: docs/security.md, "a net under the readers")
    check = outcome.placement_check or {}
    evidence = replace(evidence, data_problems=tuple(data_problems), unpack_problems=tuple(unpacked.problems),
                       implausible=tuple(implausible),
                       placement_problems=tuple(check.get("problems") or ()))  # fmt: skip
    sched, evidence = _scheduler_evidence(trip, outcome, console, evidence, net)
    status, reason = classify(evidence)
    # (the last reader: its problem, if it has one, is in the record's data problems as any other reader's is)
    complaints = net("kernel complaints", read_complaints, [], d)
    guest = GuestSaid(
        release=release,
        build_id=guest_build_id,
        knobs_readback=_read(d / KNOBS).splitlines()[:256],
        topology=GuestView(readback, domains, problems, complaints, groups, sched_cache),
        workload_result=result,
        workload_rc=evidence.workload_rc,
        workload_user=_user_record(req.workload, result),
        clocksource=clocksource_of(_read(d / DMESG_BOOT)),
        scheduler=sched,
    )
    return ManifestInputs(
        asked=RunAsked(trip.run_id, req.label, req.topology, req.kernel, req.workload.name, req.settings),
        machine=_machine(trip, prep, booted),
        end=RunEnd(outcome, status, reason, got.total_s, req.timeout(), booted.stalled),
        guest=guest,
        record=RecordFiles(got.files, inventory(booted.share), asdict(req.limits()), unpacked, console,
                           (*data_problems, *implausible)),
        instruments=Instruments(metrics, got.instruments),
    )  # fmt: skip


def _machine(trip: Trip, prep: Prepared, booted: Booted) -> RunMachine:
    """The machine as the run had it: the accelerator, the clock, the placement, the backend and the boot."""
    req = trip.req
    return RunMachine(
        accel=req.accel,
        accel_reason=req.accel_reason,
        clock=req.clock.to_dict(),
        # (a remote libvirt host pins and binds by its own inventory: that plan is the run's, lab.vm.libvirt)
        placement=booted.backend_info.get("placement") or trip.placement.to_dict(),
        backend_info=booted.backend_info,
        boot_protocol=prep.protocol,
        firmware_rom=prep.firmware,
        firmware_choice=req.firmware,
        guest_image=prep.image,
    )


def _scheduler_evidence(
    trip: Trip, outcome: VmOutcome, console: str, evidence: Evidence, net: Net
) -> tuple[dict, Evidence]:
    """The manifest's ``scheduler`` (what the guest read back of sched_ext) and the evidence with what it says: a
    sched_ext scheduler not enabled throughout, or the scheduler a timeout ran under."""
    req = trip.req
    sched, problem = net("scheduler state", scheduler_readback, (req.scheduler.to_dict(), None), trip.record,
                         req.scheduler.to_dict(), req.scheduler.ops)  # fmt: skip
    if req.scheduler.sched_ext:  # (the machine it said it built, against numalab's)
        sched = sched | {"topology": net("scheduler's machine", machine_said, None, trip.record, req.topology)}
    if evidence.guest_done and req.scheduler.sched_ext:
        evidence = replace(evidence, scheduler_problem=problem)
    if evidence.timed_out and req.scheduler.sched_ext:  # (a timeout names the scheduler it ran under)
        started = outcome.stage("scheduler")
        evidence = replace(evidence, scheduler_at_timeout=scheduler_at_timeout(
            console, req.scheduler.label, started.detail if started else None))  # fmt: skip
    return sched, evidence


def kernel_problem(kernel, guest_build_id: str | None, booted: bool) -> str | None:
    """Why the guest is not running the kernel asked for (its build-id against the build's), or None."""
    expected, source = kernel.expected_build_id()
    if not booted or expected is None or guest_build_id is None:
        return None  # (no build-id on either side: the run is unverified; a guest's missing one is a data problem)
    if guest_build_id != expected:
        return (
            f"the guest runs build-id {guest_build_id[:16]}, but {kernel.name} is {expected[:16]} (its {source}): "
            "another kernel booted, e.g. a stale payload"
        )
    return None


def in_record(problems: list[str], d: Path) -> list[str]:
    """``problems`` with the run directory's path (``.<id>.partial`` while the run is collected, renamed when it
    is complete) taken out: a file is named by its place in the record."""
    prefixes = sorted({f"{d}/", f"{d.resolve()}/", f"{d.absolute()}/"}, key=len, reverse=True)
    out = []
    for p in problems:
        for prefix in prefixes:
            p = p.replace(prefix, "")
        out.append(p)
    return out


def _implausible(req: RunRequest, outcome: VmOutcome, result: dict | None, metrics: dict) -> list[str]:
    """The guest's figures checked against what the host saw (lab.analysis.plausible): named problems."""
    windows = plausible.host_windows(outcome, not req.clock.virtual)
    user = req.workload.user
    seconds = set(SECONDS_METRICS) | {m.name for m in (user.metrics if user else ()) if m.unit == "s"}
    signed = set() if user is None else None if user.all_numeric else {m.name for m in user.metrics}
    return [
        *plausible.result_problems(result, windows, seconds, signed),
        *plausible.counter_problems(metrics),
        *plausible.cpu_problems(metrics.get("node_cpu") or {}, req.topology.total_cpus, windows),
    ]


def _user_record(workload: Workload, result: dict | None) -> dict | None:
    """A user's workload in the manifest: its file (path and content hash), what it carried, how its output is
    read, and its metrics' declarations, which compare and the report read back (lab.analysis.metrics)."""
    if workload.user is None:
        return None
    # (--workload-cmd: a number named like a built-in metric, e.g. elapsed_s, is compared as that one)
    decls = [d for d in workload.user.declarations(result) if f"workload.{d['name']}" not in METRIC_KEYS]
    return {"spec": workload.user.record(), "metrics": decls}


def _evidence(
    trip: Trip, booted: Booted, unpacked: Unpacked, console: str, topology_problems: list[str], net: Net
) -> tuple[Evidence, dict | None]:
    """What the run's status is decided on (lab.run.status.classify), and the workload's own result."""
    d, outcome, data_problems = trip.record, booted.outcome, net.problems
    evidence = Evidence(
        console_tail=console[-20000:],
        timed_out=outcome.timed_out,
        booted=outcome.stage("booted") is not None,
        guest_done=guest_done(booted.share),
        workload_rc=_int_file(d / WORKLOAD_RC),
        trace_rc=_int_file(d / TRACE_RECORD_RC),
        topology_problems=tuple(topology_problems),
        unpack_problems=tuple(unpacked.problems),
        limit=outcome.limit or unpacked.limit,
        vm_failure=outcome.vm_failure,
        guest_panicked=outcome.guest_panicked,
        hang_kind=(outcome.hang_state or {}).get("kind"),
    )
    out_text = read_guest_text(d / WORKLOAD_OUT, data_problems)  # (bytes that are not UTF-8: a named problem)
    result = net("workload output", parse_output, {"parse_error": "unreadable"}, trip.req.workload, out_text or "") \
        if out_text is not None else None  # fmt: skip
    if result and result.get("parse_error") and evidence.workload_rc == 0:
        evidence = replace(evidence, result_problem=result["parse_error"])
    failed = outcome.stage("failed")  # (the init's own mark, with the run's token: lab.vm.console)
    evidence = replace(evidence, data_problems=tuple(data_problems), init_failure=failed.detail if failed else None)
    return evidence, result


def _guest_view(req: RunRequest, d: Path, outcome: VmOutcome, unpacked: Unpacked, net: Net) -> tuple:
    """The guest's own view read back (topology, sched domains, sched groups) and what does not match the
    topology asked for: (readback, domains, the sched groups' record, problems, the cache-aware scheduling view).
    The NUMA levels and groups are predicted from the distances the kernel's scheduler uses: the SLIT's, or the
    SNC-3 fix's where the kernel said it took it (lab.topology.predictions.snc_fix)."""
    readback_problems: list[str] = []
    readback = net("topology readback", read_topology, None, d, readback_problems)
    domains = net("sched domains", read_sched_domains, {}, d, readback_problems)
    cpus = net("CPU readback", read_cpus, None, d, readback_problems)
    if readback is not None and cpus is not None:
        readback["cpus"] = cpus
    problems: list[str] = []
    sched_cache: dict = {}
    sched_topo = req.topology
    if outcome.stage("booted"):
        rejected = [p for p in unpacked.problems if p.startswith(READBACK_TAR)]
        if readback is None and rejected:
            problems.append(f"the guest's topology readback was rejected: {rejected[0]}")
        problems += [f"the guest's topology readback is malformed: {p}" for p in readback_problems]
        sched_topo = sched_topology(req.topology, FIXING_UP in _read(d / DMESG_BOOT))  # (7.x's SNC-3 fix)
        release = (read_guest_text(d / UNAME) or "").strip()[:64] or None
        problems += net("topology check", check_topology, [], req.topology, readback, domains, sched_topo, release)
        levels = net("kernel config", _configured_levels, ALL_LEVELS, req.kernel.config)
        problems += net("CPU topology check", check_cpus, [], req.topology, cpus, domains, release, levels)
        config = _config_text(req.kernel.config)
        sched_cache = net("cache-aware scheduling", sched_cache_view, {}, req.topology, d, config, cpus, levels,
                          problems)  # fmt: skip
    groups = net("sched_verbose dump", read_sched_groups, {}, d)  # the groups, against 6.1's construction
    problems += net("sched groups check", check_groups, [], sched_topo, groups) if outcome.stage("booted") else []
    return readback, domains, net("sched groups", groups_record, {}, sched_topo, groups), problems, sched_cache


def _config_text(config: Path | None) -> str | None:
    return config.read_text(errors="replace") if config and config.is_file() else None


def _configured_levels(config: Path | None) -> frozenset[str]:
    """The SMT, CLS and MC levels the booted kernel's config builds (all of them when it has no config file)."""
    return configured_levels(_config_text(config))


def _metrics(req: RunRequest, d: Path, outcome: VmOutcome, result: dict | None, net: Callable) -> dict:
    """The run's metrics: trace and vmstat (from the workload's start in guest uptime, when the host's clock does
    not contradict that mark), each node's CPU time, and the per-vCPU-second twins of the workload's
    throughputs (a user workload's declared rates too). Only a guest that booted has any but the twins."""
    booted = outcome.stage("booted") is not None
    ws = outcome.stage("workload-start")
    t0 = ws.guest_uptime if ws and not ws.contradicted else None
    metrics = net("metrics", run_metrics, {}, d, req.topology, req.settings.trace_events, t0) if booted else {}
    if booted and (cpu_time := net("/proc/stat snapshots", node_cpu_time, {}, d, req.topology)):
        metrics["node_cpu"] = cpu_time
    user = _user_record(req.workload, result)
    clock = "virtual" if req.clock.virtual else "host"  # (under the virtual clock: none, per_vcpu_second says why)
    if twins := per_vcpu_second(result, outcome.vcpu_time, user["metrics"] if user else None, clock):
        metrics["per_vcpu_s"] = twins  # work per vCPU CPU-second (lab.analysis.metrics.TWINS, a user's rates)
    if phase := balancing_phase(metrics.get("vmstat_series"), workload_seconds(outcome)):
        metrics["balancing_phase"] = phase  # start-up or steady state, by pages migrated (lab.analysis.steady_state)
    return metrics
