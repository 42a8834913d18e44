"""``numalab run --kernel A --kernel B --repeat auto``: A B pairs until the chosen metrics decide.

Runs go A B A B as with ``--repeat N``; after each pair the verdicts of the
plan's ``decide`` metrics (lab.analysis.ab_plan.ABPlan: ``--decide`` and the
rest of the A/B plan) are computed from the run manifests and
:func:`lab.analysis.verdict.should_stop` says whether to go on. The batch
directory gets ``verdict.json`` and the usual A/B report; the verdict lines
are printed to paste.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from lab.analysis.ab_plan import ABPlan
from lab.analysis.metrics import get_metric
from lab.analysis.scheduler_class import pair_labels, scheduler_name
from lab.analysis.verdict import Stop, Verdict, cell_label, resolve_decide, should_stop, verdicts_of
from lab.errors import LabError
from lab.kernel.resolve import resolve_kernel
from lab.paths import json_text, write_text_atomic
from lab.run.batch import Batch, requests_from_options
from lab.run.execute import Interrupted, execute
from lab.run.options import RunOptions
from lab.run.summary import print_summary


def check_auto(opts: RunOptions, plan: ABPlan) -> ABPlan:
    """The plan for ``opts`` (two kernels), checked (one-line errors), with its ``decide`` resolved: "workload"
    made the workload's own figure, each metric a built-in or one the workload file declares."""
    if len(opts.kernels) * len(opts.schedulers) != 2:
        raise LabError("--repeat auto: give exactly two kernels (--kernel A --kernel B), or two schedulers on one "
                       "(--scheduler A --scheduler B), to compare")  # fmt: skip
    plan.check()
    workload = opts.workload_of()
    decide = resolve_decide(plan.decide, workload, opts.guest_time.clock)
    user = workload.user
    declared = [{"workload": {"metrics": user.declarations(None)}}] if user is not None else []
    for key in decide:
        try:
            get_metric(key, declared)  # a built-in, or a metric the workload file declares
        except LabError as err:
            raise LabError(f"--decide: {err}") from None
    return replace(plan, decide=tuple(decide))


def settings_name(opts: RunOptions) -> str:
    """The third part of the verdict's cell label (lab.analysis.verdict.cell_label), as a matrix names its
    settings: "default" for numalab's defaults, else what differs (e.g. "balancing-off+knobs")."""
    parts = []
    if opts.numa_balancing != "on":
        parts.append(f"balancing-{opts.numa_balancing}")
    if opts.knobs:
        parts.append("knobs")
    if opts.kernel_default_knobs:
        parts.append("kernel-default-knobs")
    return "+".join(parts) or "default"


def auto_batch(opts: RunOptions) -> Path:
    if opts.out is not None:
        if opts.out.exists():
            raise LabError(f"--out {opts.out}: already exists; give a new directory")
        return opts.out
    return opts.runs_dir / time.strftime("ab-auto-%Y%m%d-%H%M%S", time.gmtime())


def print_verdicts(verdicts: list[Verdict], stop: Stop, out) -> None:
    print(f"\nstopped: {stop.reason}: {stop.detail}", file=out)
    for v in verdicts:
        print(f"verdict: {v.line()}", file=out)


def refuse_same_binary(a, b) -> None:
    """``--repeat auto`` between two names of one binary would 'decide' on noise: a one-line error instead."""
    ida, idb = a.expected_build_id()[0] or a.sha256(), b.expected_build_id()[0] or b.sha256()
    if ida == idb:
        raise LabError(
            f"--repeat auto: --kernel {a.name} and --kernel {b.name} are the same binary ({ida[:16]}): "
            "there is nothing to decide (rebuild the patched kernel, or check that its patch applies)"
        )


def side_labels_of(protos: list) -> tuple[str, str]:
    """The two requests' sides, as compare labels their records (lab.analysis.scheduler_class.pair_labels): the
    kernels, and where a side runs a sched_ext scheduler each side's scheduler, "v6.12 [fair]" against
    "v6.12 [scx_simple]"."""
    a, b = protos
    names = (scheduler_name(a.scheduler.asked, a.scheduler.sched_ext),
             scheduler_name(b.scheduler.asked, b.scheduler.sched_ext))  # fmt: skip
    return pair_labels((a.kernel.name, b.kernel.name), names)


def run_auto(opts: RunOptions, plan: ABPlan, progress: Callable[[str], None], json_out: bool = False) -> Batch:
    """The runs of ``opts`` (two kernels) in A B pairs until the ``plan`` (lab.analysis.ab_plan) decides or is
    spent; with ``json_out`` the human lines go to stderr. The batch directory gets verdict.json
    (``Batch.verdict``); the report is the caller's to ask for."""
    plan = check_auto(opts, plan)
    decide = list(plan.decide)
    if len(opts.kernels) == 2:
        refuse_same_binary(*(resolve_kernel(k) for k in opts.kernels))
    batch = auto_batch(opts)
    protos = requests_from_options(replace(opts, repeat=1, out=batch), progress)  # [A, B], validated like any run
    # the sides: the kernels, or (two schedulers on one kernel) the kernel with each scheduler
    labels = side_labels_of(protos)
    dirs = {n: (r.scheduler.label if len(opts.schedulers) > 1 else r.kernel.name) for n, r in zip(labels, protos)}
    human = sys.stderr if json_out else sys.stdout
    sides: dict[str, list[dict]] = {labels[0]: [], labels[1]: []}
    batch_runs = Batch()
    paths = batch_runs.paths
    t0 = time.monotonic()
    pairs = 0
    stop = Stop(False, "", "")
    verdicts: list[Verdict] = []
    context = cell_label(protos[0].topology.name, protos[0].workload.name, settings_name(opts))
    try:
        while True:
            pair_t0 = time.monotonic()
            pairs += 1
            for name, req in zip(labels, protos):
                label = f"{name} pair {pairs} (auto, at most {plan.max_pairs})"
                r = replace(req, out=batch / f"{dirs[name]}-r{pairs}", label=label)
                if req.clock.virtual:  # pair N: seed + N - 1 on both sides (ClockOptions.seed_of)
                    r = replace(r, clock=replace(req.clock, seed=opts.guest_time.seed_of(pairs - 1)))
                path, manifest = execute(r, lambda msg, n=pairs: progress(f"[pair {n}] {msg}"))
                print_summary(manifest, out=human)
                print(f"  record: {path}", file=human)
                sides[name].append(manifest)
                batch_runs.manifests.append(manifest)
                paths.append(path)
            verdicts = verdicts_of(sides[labels[0]], sides[labels[1]], decide, plan, labels, context)
            stop = should_stop(verdicts, pairs, plan, time.monotonic() - t0, time.monotonic() - pair_t0)
            for v in verdicts:
                progress(f"after pair {pairs}: {v.line()}")
            if stop.stop:
                break
            progress(stop.detail)
    except Interrupted as sig:
        progress(f"interrupted by {sig}: QEMU stopped; the unfinished run was left as a hidden .partial directory")
        batch_runs.interrupted = 143 if str(sig) == "SIGTERM" else 130
        return batch_runs
    result = {
        "stopped": stop.reason,
        "detail": stop.detail,
        "pairs": pairs,
        "baseline": labels[0],
        "new": labels[1],
        "significance_rule": plan.significance,
        "min_effect_pct": plan.min_effect,  # the command line's; each verdict has the one it was judged by
        "decide": decide,
        "min_pairs": plan.min_pairs,
        "max_pairs": plan.max_pairs,
        "time_budget_s": plan.time_budget,
        "wall_s": round(time.monotonic() - t0, 1),
        "runs": [str(p) for p in paths],
        "verdicts": [v.to_dict() for v in verdicts],
    }

    write_text_atomic(batch / "verdict.json", json_text(result, indent=2) + "\n")
    print_verdicts(verdicts, stop, human)
    batch_runs.verdict = result
    return batch_runs
