"""``numalab reproduce SEED``: the parser (cheap to build) and the command."""

from __future__ import annotations

import argparse
from pathlib import Path

from lab.cli.common import progress
from lab.cli.shared_options import alias, max_vms_of, max_vms_option, out_option
from lab.errors import LabError


def cmd_reproduce(args: argparse.Namespace) -> int:
    from lab.seeds.reproduce import (  # (on use: start-up time)
        context_of,
        evaluate,
        find_seed,
        load_sessions,
        run_reproduction,
        seed_spec,
        with_matrix,
    )
    from lab.seeds.reproduction_report import rows, tally, write_reproduction  # (on use: start-up time)

    seed = find_seed(args.seed)
    if args.matrix:
        seed = with_matrix(seed, args.matrix)
    max_vms = max_vms_of(args)
    spec = seed_spec(seed, args.max_pairs)
    out = args.out or Path("runs") / f"reproduce-{seed.stem}"
    context: dict = {}
    if args.report_only:
        if not (out / "matrix.json").exists():
            raise LabError(f"--report-only: {out} holds no reproduction runs (no matrix.json)")
        context = context_of(load_sessions(out))
    else:
        context = run_reproduction(seed, spec, out, progress, max_vms)
    rep = evaluate(seed, spec, out, context)
    paths = write_reproduction(rep, args.report_dir)
    for r in rows(rep):
        print(f"{r['outcome']:<32} {r['line']}")
    t = tally(rep)
    print(f"seed {seed.id}: " + (", ".join(f"{v} {k}" for k, v in t.items()) or "no checks"))
    for p in paths:
        print(f"report: {p}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser(
        "reproduce",
        help="run a seed thread's example matrix and check its known directions",
        description="Run the example matrix of seed SEED (000, 001, 003 or 004: lab/seeds/seedNNN/) "
        "with repeats: auto, then check every direction the seed thread reports (the matrix's expect:) against "
        "numalab's verdicts, and write reports/reproduce/seedNNN.{md,html,json}. Running it again resumes.",
    )
    p.add_argument("seed", metavar="SEED", help="seed number: 000, 001, 003 or 004 (also 3, seed003)")
    p.add_argument("--matrix", metavar="NAME", help="another matrix of the seed's folder instead of its default, "
                   "e.g. seed000-remote-latency (report and runs then named after it)")  # fmt: skip
    out_option(p, "DIR", "run records (default runs/reproduce-seedNNN)")
    p.add_argument("--report-dir", type=Path, default=Path("reports/reproduce"), metavar="DIR",
                   help="where the report goes (default reports/reproduce)")  # fmt: skip
    a = p.add_argument("--max-pairs", type=int, metavar="N",
                       help="at most N A B pairs (overrides the matrix's auto.max_pairs)")  # fmt: skip
    alias(p, "--max-repeats", a)
    max_vms_option(p)
    p.add_argument("--report-only", action="store_true", help="only (re)write the report from the runs in --out")
    p.set_defaults(func=cmd_reproduce)
