"""``numalab run``: turn command-line choices into run requests and execute them."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from lab.errors import LabError
from lab.guest.plan import DEFAULT_EVENTS, MAX_DURATION_S, SHORT_SCAN_KNOBS, GuestPlan
from lab.guest.workloads import get_workload
from lab.host.accel import accel_verdict
from lab.kernel.resolve import resolve_kernel
from lab.placement.plan import Backing
from lab.run import Interrupted, RunRequest, execute, print_summary
from lab.topology.spec import parse_mib, topology_with_sizes
from lab.vm.firmware import resolve_firmware
from lab.vm.qemu_backend import QemuBackend
from lab.vm.share import ShareLimits

MAX_REPEAT = 1000


def check_seconds(value: float, option: str, maximum: float) -> None:
    """A number of seconds that is finite, > 0 and at most ``maximum`` (one-line error otherwise)."""
    if not math.isfinite(value) or value <= 0 or value > maximum:
        raise LabError(f"{option}: must be more than 0 and at most {maximum:g} seconds, got {value:g}")


def _knobs(args: argparse.Namespace) -> dict[str, str]:
    knobs = {} if args.kernel_default_knobs else dict(SHORT_SCAN_KNOBS)
    for kv in args.knob:
        if "=" not in kv:
            raise LabError(f"--knob {kv}: expected NAME=VALUE, e.g. scan_delay_ms=100")
        k, v = kv.split("=", 1)
        knobs[k.strip()] = v.strip()
    return knobs


MAX_TIMEOUT_S = 7 * 86400.0


def requests_from_args(args: argparse.Namespace, progress: Callable[[str], None]) -> list[RunRequest]:
    if not 1 <= args.repeat <= MAX_REPEAT:
        raise LabError(f"--repeat: must be 1..{MAX_REPEAT}, got {args.repeat}")
    check_seconds(args.duration, "--duration", MAX_DURATION_S)
    if args.timeout is not None:
        check_seconds(args.timeout, "--timeout", MAX_TIMEOUT_S)
    output_limit = None
    if args.guest_output_limit is not None:
        output_limit = parse_mib(args.guest_output_limit, "--guest-output-limit") << 20
        ShareLimits(output_bytes=output_limit)  # the minimum, as a one-line error now
    workload = get_workload(args.workload)
    topo = topology_with_sizes(args.topology, args.cpus_per_node, args.mem_per_node, args.threads)
    kernels = [resolve_kernel(k) for k in (args.kernel or ["stock"])]
    names = [k.name for k in kernels]
    if len(set(names)) < len(names):
        raise LabError(f"--kernel: the kernels must have distinct names, got {', '.join(names)}")
    # tiering: NUMA_BALANCING_MEMORY_TIERING (2), promotion from lower memory tiers, with demotion on
    balancing = {"on": "1", "off": "0", "default": None, "tiering": "2"}[args.numa_balancing]
    if balancing == "2" and not (topo.tiers and topo.tiers.slow_nodes):
        progress(f"warning: --numa-balancing tiering on {topo.name}, which has no slow memory tier: nothing to promote")
    plan = GuestPlan(
        workload_cmd=workload.command(topo, args.duration),
        duration_s=args.duration,
        numa_balancing=balancing,
        knobs=_knobs(args),
        trace_events=() if args.no_trace else tuple(dict.fromkeys([*DEFAULT_EVENTS, *args.event])),
        trace_buffer_kb=args.trace_buffer_kb,
        trace_mode=args.trace_mode,
        test_fault=args.test_fault or "",
        kernel_args=" ".join(args.append),
        demotion="true" if args.numa_balancing == "tiering" else "",
    )
    access_sample_from_args(args, None if args.accel == "auto" else args.accel)  # before a libvirt host is asked
    backend = backend_from_args(args)
    resolve_firmware(args.firmware, backend.name)  # a firmware this backend cannot boot: say so first
    if args.accel == "auto":
        verdict = accel_verdict(kernels[0].image, backend)  # on the host the backend runs VMs on
        accel = verdict["accel"]
        reason = verdict.get("warning") or f"KVM probe{verdict.get('where', '')}: {verdict['kvm']['detail']}"
        if accel == "tcg":
            progress(f"warning: {reason}")
    else:
        accel, reason = args.accel, "chosen with --accel"
    access_sample = access_sample_from_args(args, accel)
    backing = Backing(args.backing, args.prealloc)
    batch = batch_dir(args, len(kernels))
    reqs = []
    # A B A B ...: drift on the host affects every kernel alike.
    for i in range(args.repeat):
        for kernel in kernels:
            if batch is None:
                out = None
            elif len(kernels) == 1:
                out = batch if args.repeat == 1 else batch / f"r{i + 1}"
            else:
                out = batch / f"{kernel.name}-r{i + 1}"
            label = f"{kernel.name} repeat {i + 1}/{args.repeat}"
            reqs.append(
                RunRequest(
                    topo, kernel, workload, plan, accel, reason, backing, out, args.runs_dir, args.timeout, label,
                    backend=backend, pinning=args.pinning, firmware=args.firmware, guest_output_limit=output_limit,
                    access_sample=access_sample, access_map=getattr(args, "access_address_map", None) or "",
                )
            )
    return reqs


def access_sample_from_args(args: argparse.Namespace, accel: str | None) -> int:
    """--access-matrix [--access-sample N] -> the plugin's sampling period (0: no plugin)."""
    sample = getattr(args, "access_sample", None)
    if not getattr(args, "access_matrix", False):
        if sample is not None:
            raise LabError("--access-sample: only with --access-matrix")
        return 0
    from lab.access_run import check_request
    from lab.vm.access_plugin import DEFAULT_SAMPLE

    sample = DEFAULT_SAMPLE if sample is None else sample
    check_request(sample, accel, getattr(args, "backend", "qemu"), getattr(args, "connect", None) or "")
    return sample


def backend_from_args(args: argparse.Namespace):
    """--backend qemu|libvirt [--connect URI]; a libvirt host is checked now (one-line error), before any build."""
    if getattr(args, "backend", "qemu") != "libvirt":
        for opt in ("connect", "pool_dir", "no_upload"):
            if getattr(args, opt, None):
                raise LabError(f"--{opt.replace('_', '-')}: only with --backend libvirt")
        return QemuBackend()
    from lab.vm.libvirt_backend import LibvirtBackend
    from lab.vm.libvirt_hostspec import HostSpec

    uri = args.connect or "qemu:///system"
    if "://" not in uri:
        raise LabError(f"--connect {uri}: not a libvirt URI (e.g. qemu:///system, qemu+ssh://user@host/system)")
    if args.pool_dir and not args.pool_dir.startswith("/"):
        raise LabError(f"--pool-dir {args.pool_dir}: must be an absolute path on the libvirt host")
    backend = LibvirtBackend(uri, HostSpec(uri, 1, args.pool_dir or "", not args.no_upload))
    backend.check()
    return backend


def batch_dir(args: argparse.Namespace, n_kernels: int) -> Path | None:
    """Where a batch of runs goes: --out, or runs/ab-<time> for an A/B batch, or None (runs/<id> each)."""
    if args.out is not None:
        if args.out.exists() and (args.repeat > 1 or n_kernels > 1):
            raise LabError(f"--out {args.out}: already exists; give a new directory")
        return args.out
    if n_kernels > 1:
        return args.runs_dir / time.strftime("ab-%Y%m%d-%H%M%S", time.gmtime())
    return None


def print_side_by_side(manifests: list[dict], out) -> None:
    """Per-kernel tracepoint counts (mean over repeats), side by side."""
    by_kernel: dict[str, list[dict]] = {}
    for m in manifests:
        by_kernel.setdefault(m["kernel"]["name"], []).append(m)
    events = sorted({e for m in manifests for e in m.get("metrics", {}).get("events", {})})
    print("\nper-kernel mean over repeats:", file=out)
    print(f"  {'':<22}" + "".join(f"{k[:18]:>20}" for k in by_kernel), file=out)
    for ev in [*events, "numa_pages_migrated"]:
        cells = []
        for ms in by_kernel.values():
            vals = [
                (m["metrics"].get("vmstat", {}) if ev == "numa_pages_migrated" else m["metrics"].get("events", {})).get(
                    ev
                )
                for m in ms
                if m.get("metrics")
            ]
            vals = [v for v in vals if v is not None]
            cells.append(f"{sum(vals) / len(vals):.1f} (n={len(vals)})" if vals else "-")
        print(f"  {ev:<22}" + "".join(f"{c:>20}" for c in cells), file=out)


def run_command(args: argparse.Namespace, progress: Callable[[str], None]) -> int:
    reqs = requests_from_args(args, progress)
    manifests = []
    paths = []
    try:
        for i, req in enumerate(reqs):
            tag = f"[{i + 1}/{len(reqs)}] " if len(reqs) > 1 else ""
            path, manifest = execute(req, lambda msg, tag=tag: progress(tag + msg))
            manifests.append(manifest)
            paths.append(path)
            print_summary(manifest, out=sys.stderr if args.json else sys.stdout)
            print(f"  record: {path}", file=sys.stderr if args.json else sys.stdout)
    except Interrupted as sig:
        progress(f"interrupted by {sig}: QEMU stopped; the unfinished run was left as a hidden .partial directory")
        return 143 if str(sig) == "SIGTERM" else 130
    human = sys.stderr if args.json else sys.stdout
    kernels = {m["kernel"]["name"] for m in manifests}
    if len(kernels) > 1:
        print_side_by_side(manifests, human)
    if args.report or len(kernels) > 1:
        from lab.report.build import build_report

        where = paths[0] if len(paths) == 1 else batch_dir_of(paths)
        report = build_report(paths, where / "report.html")
        print(f"report: {report.html}", file=human)
    if args.json:
        print(json.dumps(manifests[0] if len(manifests) == 1 else manifests, indent=2))
    return 0 if all(m["status"] == "ok" for m in manifests) else 1


def batch_dir_of(paths: list[Path]) -> Path:
    """The directory the runs share (their common parent)."""
    return Path(os.path.commonpath([p.resolve().parent for p in paths]))
