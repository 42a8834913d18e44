"""``numalab run``: turn command-line choices into run requests and execute them."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from lab.errors import LabError
from lab.guest.plan import DEFAULT_EVENTS, SHORT_SCAN_KNOBS, GuestPlan
from lab.guest.workloads import get_workload
from lab.host.accel import accel_verdict
from lab.kernel.resolve import resolve_kernel
from lab.placement.plan import Backing
from lab.run import Interrupted, RunRequest, execute, print_summary


def _knobs(args: argparse.Namespace) -> dict[str, str]:
    knobs = {} if args.kernel_default_knobs else dict(SHORT_SCAN_KNOBS)
    for kv in args.knob:
        if "=" not in kv:
            raise LabError(f"--knob {kv}: expected NAME=VALUE, e.g. scan_delay_ms=100")
        k, v = kv.split("=", 1)
        knobs[k.strip()] = v.strip()
    return knobs


def requests_from_args(args: argparse.Namespace, progress: Callable[[str], None]) -> list[RunRequest]:
    from lab.cli import _topology

    if args.repeat < 1:
        raise LabError(f"--repeat: must be >= 1, got {args.repeat}")
    if args.duration <= 0:
        raise LabError(f"--duration: must be > 0 seconds, got {args.duration:g}")
    workload = get_workload(args.workload)
    topo = _topology(args)
    kernel = resolve_kernel(args.kernel)
    balancing = {"on": "1", "off": "0", "default": None}[args.numa_balancing]
    plan = GuestPlan(
        workload_cmd=workload.command(topo, args.duration),
        duration_s=args.duration,
        numa_balancing=balancing,
        knobs=_knobs(args),
        trace_events=() if args.no_trace else tuple(dict.fromkeys([*DEFAULT_EVENTS, *args.event])),
        trace_buffer_kb=args.trace_buffer_kb,
        trace_mode=args.trace_mode,
        test_fault=args.test_fault or "",
    )
    if args.accel == "auto":
        verdict = accel_verdict(kernel.image)
        accel = verdict["accel"]
        reason = verdict.get("warning") or f"KVM probe: {verdict['kvm']['detail']}"
        if accel == "tcg":
            progress(f"warning: {reason}")
    else:
        accel, reason = args.accel, "chosen with --accel"
    backing = Backing(args.backing, args.prealloc)
    reqs = []
    for i in range(args.repeat):
        out = args.out
        if out is not None and args.repeat > 1:
            out = out / f"r{i + 1}"
        reqs.append(
            RunRequest(
                topo,
                kernel,
                workload,
                plan,
                accel,
                reason,
                backing,
                out,
                args.runs_dir,
                args.timeout,
                label=f"repeat {i + 1}/{args.repeat}",
            )
        )
    return reqs


def run_command(args: argparse.Namespace, progress: Callable[[str], None]) -> int:
    reqs = requests_from_args(args, progress)
    manifests = []
    try:
        for i, req in enumerate(reqs):
            tag = f"[{i + 1}/{len(reqs)}] " if len(reqs) > 1 else ""
            path, manifest = execute(req, lambda msg, tag=tag: progress(tag + msg))
            manifests.append(manifest)
            print_summary(manifest, out=sys.stderr if args.json else sys.stdout)
            print(f"  record: {path}", file=sys.stderr if args.json else sys.stdout)
    except Interrupted as sig:
        progress(f"interrupted by {sig}: QEMU stopped; the unfinished run was left as a hidden .partial directory")
        return 143 if str(sig) == "SIGTERM" else 130
    if args.json:
        print(json.dumps(manifests[0] if len(manifests) == 1 else manifests, indent=2))
    return 0 if all(m["status"] == "ok" for m in manifests) else 1
