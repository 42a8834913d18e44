"""``numalab compare``: an A/B table of two sets of runs (mmtests compare-kernels style)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lab.analysis import compare as cmp
from lab.analysis import finding
from lab.analysis.ab_plan import ABPlan
from lab.analysis.record import RunRecord
from lab.cli.shared_options import include_status_option, json_option, min_effect_option, significance_option
from lab.errors import LabError
from lab.paths import json_text
from lab.report import ab_table
from lab.untrusted import finite_copy


def cmd_compare(args: argparse.Namespace) -> int:
    base = [RunRecord.load(d) for d in args.baseline]
    new = [RunRecord.load(d) for d in args.new]
    plan = ABPlan.of(significance=args.significance, min_effect=args.min_effect)
    c = cmp.compare_runs(base, new, plan, include_incomplete=args.include_incomplete,
                         include_statuses=args.include_status)  # fmt: skip
    _check_sides(base, new)  # (after the setup's own checks: a copy of a run with another topology says that)
    if args.json:
        data = ab_table.to_dict(c) | {"finding": finding.to_dict(c)}
        sys.stdout.write(json_text(finite_copy(data)[0], indent=2) + "\n")
        return 0
    # the table, then what it shows about NUMA balancing and what it cannot (lab.analysis.finding)
    renderers = {"text": (ab_table.to_text, finding.to_text), "md": (ab_table.to_markdown, finding.to_markdown),
                 "html": (ab_table.to_html, finding.to_html)}  # fmt: skip
    table, close = renderers[args.format]
    sys.stdout.write(table(c) + close(c))
    return 0


def _check_sides(base: list, new: list) -> None:
    """A run on both sides (the same directory, or a copy: the same run id) would be compared with itself; a run
    given twice on one side (--baseline A --baseline A) would be counted twice."""
    sides: dict[object, str] = {}
    for side, runs in (("--baseline", base), ("--new", new)):
        seen: set[object] = set()
        for r in runs:
            for key in (("dir", r.path.resolve()), ("id", r.manifest.get("run_id"))):
                if key[1] is None:
                    continue
                what = "run" if key[0] == "dir" else f"run (run id {key[1]})"
                if (other := sides.setdefault(key, side)) != side:
                    raise LabError(f"compare: {r.path} is the same {what} on both sides ({other} and {side})")
                if key in seen:
                    raise LabError(f"compare: {r.path} is the same {what} twice on {side}: it would count twice")
                seen.add(key)


def add_parser(sub) -> None:
    cmp_p = sub.add_parser(
        "compare",
        help="A/B table of two sets of runs (mmtests compare-kernels style)",
        description="Compare runs: Min, Amean/Hmean, Stddev, CoeffVar, Max per metric, %diff signed so that + is "
        "better, and a significance mark (not judged with fewer than 3 runs per side).",
    )
    # (extend: --baseline A --baseline B is A and B, as --new C D --new E is C, D and E)
    cmp_p.add_argument("--baseline", nargs="+", action="extend", type=Path, required=True, metavar="RUN_DIR",
                       help="baseline runs (repeatable: each adds its runs)")  # fmt: skip
    cmp_p.add_argument("--new", nargs="+", action="extend", type=Path, required=True, metavar="RUN_DIR",
                       help="new runs (repeatable: each adds its runs)")  # fmt: skip
    cmp_p.add_argument("--format", choices=("text", "md", "html"), default="text",
                       help="how the table is rendered (default text)")  # fmt: skip
    json_option(cmp_p)
    significance_option(cmp_p)
    min_effect_option(cmp_p)
    cmp_p.add_argument(
        "--include-incomplete",
        action="store_true",
        help="count runs whose trace lost more than 1%% of its records (left out by default, with a note)",
    )
    include_status_option(cmp_p)
    cmp_p.set_defaults(func=cmd_compare)
