"""``numalab ab TREE --base REV``: from your kernel tree and patch to an A/B verdict (lab.kernel.tree_ab)."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from lab.cli.cmd_run import add_run_arguments, cmd_run, reject_without_auto, run_options_from_args
from lab.cli.common import progress
from lab.cli.shared_options import ab_plan_of, make_jobs_option, scheduler_option, schedulers_of, topology_options

EXAMPLES = """examples:
  numalab ab ~/linux --base v6.12                       # HEAD's commits on v6.12, ring-4, numa01, until decided
  numalab ab ~/linux --base origin/master --head my-fix --topology mesh-4 --workload numa02
  numalab ab ~/linux --base v6.12 --patch 0001-sched-numa-foo.patch --repeat 5
  numalab ab . --base HEAD --include-uncommitted        # the edits in your working tree, against HEAD
  numalab ab ~/linux --base v6.12 --scheduler scx_simple # both kernels with sched_ext, scx_simple on both

docs/tutorial.md walks it."""


def cmd_ab(args: argparse.Namespace) -> int:
    from lab.kernel.tree_ab import TreeAB, build_pair, tree_builds  # (on use: start-up time)
    from lab.run.scheduler import check_early, fragments_for  # (on use: start-up time)

    (sched,) = schedulers_of(args, one=True)
    check_early(sched)  # (a sched_ext scheduler: both kernels get the sched-ext fragment)
    ab = TreeAB(args.tree, args.base, args.head, tuple(args.patch), args.series, args.include_uncommitted,
                fragments_for(sched, tuple(args.fragment)), args.make_jobs)  # fmt: skip
    builds = tree_builds(ab)  # every input of the builds checked first
    args.kernel = ["stock", "stock"]
    opts = run_options_from_args(args)  # and the run's options, before anything is built
    opts.topology.load()
    opts.workload_of()
    from lab.run.batch import backend_of  # (on use: start-up time)

    backend_of(opts)  # the QEMU (--qemu) or the libvirt host, before two kernel builds
    if args.repeat == "auto":  # the A/B plan and its --decide metrics too
        from lab.run.auto_pairs import check_auto  # (on use: start-up time)

        check_auto(opts, ab_plan_of(args))
    else:
        reject_without_auto(args)
    for note in builds.notes:
        progress(note)
    base, patched = build_pair(builds, progress)
    args.kernel = [base.name, patched.name]
    return cmd_run(args)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "ab",
        help="your kernel tree and patch to a verdict: build the base and the patched kernel, run the A/B",
        usage="numalab ab TREE --base REV [--head REV | --patch FILE... | --series DIR] [--topology NAME|FILE]\n"
        "                  [--workload NAME|FILE.yaml] [--repeat N|auto] [options]",
        description=textwrap.fill(
            "Build TREE at --base (the baseline) and with your patch on it (the commits --base..--head, "
            "by default the tree's HEAD, or --patch/--series files), both cached, in a private copy of the source: "
            "your tree is only read, never checked out or written. Then run them A B A B on TOPOLOGY with WORKLOAD "
            "as numalab run --kernel BASE --kernel PATCHED does, until a verdict (--repeat auto, the default), and "
            "write the report. Uncommitted edits to tracked files are refused unless --include-uncommitted.",
            100,
            break_on_hyphens=False,
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("tree", type=Path, metavar="TREE", help="your kernel's git tree (a clone; only read)")
    g = p.add_argument_group("your tree and your patch")
    g.add_argument("--base", required=True, metavar="REV", help="the baseline: a commit, tag or branch of TREE")
    g.add_argument("--head", metavar="REV",
                   help="the patched kernel: base plus the commits base..REV (default HEAD; linear)")  # fmt: skip
    g.add_argument("--patch", action="append", default=[], metavar="FILE",
                   help="instead of commits: a patch on base (mbox: git am; diff: patch -p1); repeatable")  # fmt: skip
    g.add_argument("--series", metavar="DIR|FILE", help="instead of commits: a quilt series on base")
    g.add_argument("--include-uncommitted", action="store_true",
                   help="add the tree's uncommitted edits (tracked files, against HEAD) as a last patch")  # fmt: skip
    g.add_argument("--fragment", action="append", default=[], metavar="FILE|NAME",
                   help="an extra config fragment, merged after the defaults (repeatable)")  # fmt: skip
    make_jobs_option(g)
    scheduler_option(g, several=False)
    topology_options(p)
    add_run_arguments(p, repeat="auto")
    p.set_defaults(func=cmd_ab)
