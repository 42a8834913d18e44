"""``numalab report``: HTML, markdown and JSON (and Perfetto timelines, and KCIDB's format) from run records."""

from __future__ import annotations

import argparse
from pathlib import Path

from lab.cli.common import warn
from lab.cli.shared_options import (
    include_status_option,
    min_effect_option,
    out_option,
    output_path,
    significance_option,
)


def cmd_report(args: argparse.Namespace) -> int:
    from lab.analysis.ab_plan import ABPlan  # (on use: start-up time)
    from lab.report.report_model import build_report  # (on use: start-up time)

    out = args.out or (args.runs[0] / "report.html" if len(args.runs) == 1 else Path("report.html"))
    plan = ABPlan.of(significance=args.significance, min_effect=args.min_effect)  # how the A/B tables are read
    paths = build_report(args.runs, out, plan, include_incomplete=args.include_incomplete,
                         include_statuses=args.include_status, kcidb=args.kcidb)  # fmt: skip
    damaged = [(r["path"], p) for r in paths.data["runs"] for p in r["metrics"].get("trace_problems", [])]
    for run, problem in damaged:
        warn(f"{run}: {problem} (marked in the report)")
    print(f"report: {paths.html}")
    print(f"data:   {paths.json}")
    print(f"text:   {paths.markdown}")
    for p in paths.perfetto:
        print(f"perfetto: {p}")
    if paths.kcidb is not None:
        print(f"kcidb:  {paths.kcidb} (KCIDB I/O data, not submitted: kcidb-submit sends it)")
    return 1 if damaged else 0


def add_parser(sub) -> None:
    rep = sub.add_parser(
        "report",
        help="HTML/markdown/JSON report (and Perfetto timelines) from run records",
        description="Analyse run records (trace.dat, vmstat, workload output) and write a self-contained HTML "
        "report plus OUT.json, OUT.md and OUT.perfetto/<run>.json. Runs are grouped by kernel and NUMA-balancing "
        "settings; every group is compared against the first one given.",
    )
    rep.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="run record directories")
    out_option(rep, "FILE", "HTML file (default RUN_DIR/report.html for one run, ./report.html for several)")
    significance_option(rep)
    min_effect_option(rep)
    rep.add_argument(
        "--include-incomplete",
        action="store_true",
        help="count runs whose trace lost more than 1%% of its records in the A/B tables (left out by default)",
    )
    include_status_option(rep)
    rep.add_argument(
        "--kcidb",
        type=output_path("--kcidb"),
        metavar="FILE",
        help="also write the runs and the A/B verdicts to FILE in KCIDB's I/O format (KernelCI's results "
        "database, schema v5.3): a checkout, a build per kernel, a test per run and metric, one per verdict. "
        "Nothing is sent; kcidb-submit sends the file (docs/reports.md, 'KCIDB')",
    )
    rep.set_defaults(func=cmd_report)
