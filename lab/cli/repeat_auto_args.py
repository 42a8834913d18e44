"""The options of ``numalab run --repeat auto`` (argparse only, so building the parser stays cheap)."""

from __future__ import annotations

import argparse

# Mirrors lab.analysis.verdict (DEFAULT_DECIDE, DEFAULT_MIN_PAIRS, DEFAULT_MAX_PAIRS, DEFAULT_RULE);
# tests/unit/test_verdict.py checks that they agree.
DECIDE_DEFAULT = "vmstat.numa_pages_migrated"
MIN_PAIRS = 3
MAX_PAIRS = 8
RULE = "welch"


def add_auto_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("--repeat auto (A/B until the verdict is significant or the budget is spent)")
    g.add_argument(
        "--decide",
        action="append",
        metavar="METRIC",
        help=f"metric that must become significant (repeatable; default {DECIDE_DEFAULT}; "
        "the names are those of numalab compare, e.g. vmstat.hint_local_pct, workload.round_trips_per_s; under TCG "
        "on a busy host, a throughput's per-vCPU-second twin, e.g. workload.gbps_per_vcpu_s)",
    )
    # (default None, then lab.run.auto_pairs fills MIN_PAIRS/MAX_PAIRS in: a --min-repeats without --repeat auto shows)
    g.add_argument("--min-repeats", type=int, metavar="N",
                   help=f"pairs before the first look (default {MIN_PAIRS}: fewer are never judged)")  # fmt: skip
    g.add_argument("--max-repeats", type=int, metavar="N",
                   help=f"at most N A B pairs (default {MAX_PAIRS})")  # fmt: skip
    g.add_argument("--time-budget", type=float, metavar="SECONDS",
                   help="start no pair that would end after SECONDS (judged by the last pair's time)")  # fmt: skip
    g.add_argument(
        "--significance",
        choices=("welch", "ci-overlap"),
        default=RULE,
        help=f"significance rule of the verdict (default {RULE}: the CI-overlap rule compares with the standard "
        "deviations themselves, so more repeats do not make it easier to pass)",
    )


def reject_without_auto(args: argparse.Namespace) -> None:
    """--decide, --min-repeats, --max-repeats and --time-budget mean nothing without --repeat auto: say so
    rather than ignore them."""
    from lab.errors import LabError

    for opt, value in (("--decide", args.decide), ("--min-repeats", args.min_repeats),
                       ("--max-repeats", args.max_repeats), ("--time-budget", args.time_budget)):  # fmt: skip
        if value is not None and value != []:
            raise LabError(f"{opt}: only with --repeat auto")
