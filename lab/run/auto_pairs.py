"""``numalab run --kernel A --kernel B --repeat auto``: A B pairs until the chosen metrics decide.

Runs go A B A B as with ``--repeat N``; after each pair (from the third on)
the verdicts of the ``--decide`` metrics are computed from the run
manifests and :func:`lab.analysis.verdict.should_stop` says whether to go
on. The batch directory gets ``verdict.json`` and the usual A/B report; the
verdict lines are printed to paste.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from lab.analysis.metrics import get_metric
from lab.analysis.stats import RULES
from lab.analysis.verdict import (
    DEFAULT_DECIDE,
    DEFAULT_MAX_PAIRS,
    DEFAULT_MIN_PAIRS,
    Stop,
    Verdict,
    cell_label,
    resolve_decide,
    should_stop,
    verdicts_of,
)
from lab.errors import LabError
from lab.kernel.resolve import resolve_kernel
from lab.paths import json_text, write_text_atomic
from lab.run.batch import Batch, requests_from_options
from lab.run.execute import Interrupted, execute, print_summary
from lab.run.options import MAX_REPEAT, RunOptions


def check_auto_args(opts: RunOptions, args: argparse.Namespace) -> tuple[list[str], str]:
    """The --decide metrics and the significance rule, checked (one-line errors)."""
    if args.min_repeats is None:  # argparse leaves them None, so one given without --repeat auto is seen
        args.min_repeats = DEFAULT_MIN_PAIRS
    if args.max_repeats is None:
        args.max_repeats = DEFAULT_MAX_PAIRS
    if len(opts.kernels) != 2:
        raise LabError("--repeat auto: give exactly two kernels (--kernel A --kernel B) to compare")
    if not 1 <= args.max_repeats <= MAX_REPEAT:
        raise LabError(f"--max-repeats: must be 1..{MAX_REPEAT}, got {args.max_repeats}")
    if args.min_repeats < 1 or args.min_repeats > args.max_repeats:
        raise LabError(f"--min-repeats: must be between 1 and --max-repeats ({args.max_repeats}), "
                       f"got {args.min_repeats}")  # fmt: skip
    if args.time_budget is not None and not (math.isfinite(args.time_budget) and args.time_budget > 0):
        raise LabError(f"--time-budget: must be > 0 seconds, got {args.time_budget:g}")
    workload = opts.workload_of()
    decide = resolve_decide(args.decide or DEFAULT_DECIDE, workload, opts.clock)
    user = workload.user
    declared = [{"workload": {"metrics": user.declarations(None)}}] if user is not None else []
    for key in decide:
        try:
            get_metric(key, declared)  # a built-in, or a metric the workload file declares
        except LabError as err:
            raise LabError(f"--decide: {err}") from None
    if args.significance not in RULES:
        raise LabError(f"--significance {args.significance}: not one of {', '.join(RULES)}")
    return decide, args.significance


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


def run_auto(opts: RunOptions, args: argparse.Namespace, progress: Callable[[str], None]) -> Batch:
    """The runs of ``opts`` (two kernels) in A B pairs; ``args`` holds --repeat auto's own options
    (lab.cli.repeat_auto_args) and --json. The batch directory gets verdict.json (``Batch.verdict``); the
    report is the caller's to ask for."""
    decide, rule = check_auto_args(opts, args)
    min_effect = getattr(args, "min_effect", None)  # --min-effect (None: each metric's own, else the default)
    refuse_same_binary(*(resolve_kernel(k) for k in opts.kernels))
    batch = auto_batch(opts)
    protos = requests_from_options(replace(opts, repeat=1, out=batch), progress)  # [A, B], validated like any run
    labels = (protos[0].kernel.name, protos[1].kernel.name)
    human = sys.stderr if args.json else sys.stdout
    sides: dict[str, list[dict]] = {labels[0]: [], labels[1]: []}
    batch_runs = Batch(rule=rule)
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
            for req in protos:
                name = req.kernel.name
                label = f"{name} pair {pairs} (auto, at most {args.max_repeats})"
                r = replace(req, out=batch / f"{name}-r{pairs}", label=label)
                if req.clock.virtual:  # pair N: seed + N - 1 on both sides (lab.run.options.RunOptions.seed_of)
                    r = replace(r, clock=replace(req.clock, seed=opts.seed_of(pairs - 1)))
                path, manifest = execute(r, lambda msg, n=pairs: progress(f"[pair {n}] {msg}"))
                print_summary(manifest, out=human)
                print(f"  record: {path}", file=human)
                sides[name].append(manifest)
                batch_runs.manifests.append(manifest)
                paths.append(path)
            verdicts = verdicts_of(sides[labels[0]], sides[labels[1]], decide, rule, labels, context,
                                   min_effect=min_effect)  # fmt: skip
            stop = should_stop(verdicts, pairs, args.min_repeats, args.max_repeats, time.monotonic() - t0,
                               args.time_budget, time.monotonic() - pair_t0)  # fmt: skip
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
        "significance_rule": rule,
        "min_effect_pct": min_effect,  # the command line's; each verdict has the one it was judged by
        "decide": decide,
        "min_pairs": args.min_repeats,
        "max_pairs": args.max_repeats,
        "time_budget_s": args.time_budget,
        "wall_s": round(time.monotonic() - t0, 1),
        "runs": [str(p) for p in paths],
        "verdicts": [v.to_dict() for v in verdicts],
    }

    write_text_atomic(batch / "verdict.json", json_text(result, indent=2) + "\n")
    print_verdicts(verdicts, stop, human)
    batch_runs.verdict = result
    return batch_runs
