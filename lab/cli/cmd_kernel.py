"""``numalab kernel build|list|prune``."""

from __future__ import annotations

import argparse
from pathlib import Path

from lab.cli.common import debug, progress
from lab.cli.shared_options import json_option, kernel_source_options, make_jobs_option
from lab.errors import LabError
from lab.paths import json_text


def _seconds(s: float) -> str:
    return f"{int(s // 60)}m{int(s % 60):02d}s" if s >= 60 else f"{s:.2f}s"


def cmd_build(args: argparse.Namespace) -> int:
    from lab.kernel.build import BuildInputs, build_kernel, make_request  # (on use: start-up time)

    inputs = BuildInputs(args.source, args.patch, args.series, args.fragment, not args.no_default_fragments)
    req = make_request(inputs, args.name, args.make_jobs, args.rebuild, progress)
    debug(f"kernel build: {len(req.patches)} patches, {len(req.fragments)} fragments, make -j "
          f"{args.make_jobs or 'the host CPUs'}, name {req.name or '(default)'}")  # fmt: skip
    result = build_kernel(req, progress)
    if args.json:
        print(json_text({"name": result.name, "path": str(result.path), "cached": result.cached,
                          "seconds": result.seconds, **result.meta}, indent=2))  # fmt: skip
        return 0
    how = f"cache hit in {_seconds(result.seconds)}" if result.cached else f"built in {_seconds(result.seconds)}"
    print(f"{result.name}: {result.path / 'bzImage'} ({result.meta.get('release', '?')}, key {result.key}, {how})")
    print(f"  build-id {result.meta.get('build_id')} (checked in the guest at every run)")
    print(f"  boot it: numalab run --kernel {result.name}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from lab.kernel.cache import list_builds  # (on use: start-up time)

    builds = list_builds()
    if args.json:
        print(json_text(builds, indent=2))
        return 0
    if not builds:
        print("no built kernels (numalab kernel build)")
        return 0
    rows = [
        (",".join(b["names"]) or "-", b["key"], b.get("release", "?"), b.get("built_at", "?"),
         ",".join(b["sched_ext_schedulers"]) or "-",
         ", ".join(Path(p["name"]).name for p in b.get("patches", [])) or "-")
        for b in builds
    ]  # fmt: skip
    header = ("NAME", "KEY", "RELEASE", "BUILT", "SCHEDULERS", "PATCHES")
    widths = [max(len(r[i]) for r in [header, *rows]) + 2 for i in range(5)]
    for r in [header, *rows]:
        print("".join(f"{c:<{w}}" for c, w in zip(r, widths)) + r[5])
    return 0


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def cmd_prune(args: argparse.Namespace) -> int:
    from lab.kernel.cache import prunable, prune  # (on use: start-up time)

    if args.log_age_days < 0:
        raise LabError(f"--log-age-days: must be >= 0, got {args.log_age_days:g}")
    items = prunable(sources=args.sources, log_age_s=args.log_age_days * 86400)
    if not args.dry_run:
        prune(items)
    total = sum(item["bytes"] for item in items)
    if args.json:
        print(json_text({"dry_run": args.dry_run, "removed": items, "bytes": total}, indent=2))
        return 0
    for item in items:
        print(f"{'would remove' if args.dry_run else 'removed'} {item['what']}: {item['path']} ({_mib(item['bytes'])})")
    print(f"{'would free' if args.dry_run else 'freed'} {_mib(total)}" if items else "nothing to prune")
    return 0


def add_parser(sub) -> None:
    k = sub.add_parser(
        "kernel",
        help="build patched kernels (cached), list and prune them",
        description="Build guest kernels from a source, patches and config fragments, cached by a hash of all "
        "of them; boot one with numalab run --kernel NAME.",
    )
    ksub = k.add_subparsers(dest="kernel_command", metavar="SUBCOMMAND", required=True)
    b = ksub.add_parser(
        "build",
        help="build (or find in the cache) a kernel",
        description="Build a kernel out of tree with ccache: the source (default Debian's linux-source-6.1 "
        "tarball) on a private copy, the patches applied all or nothing, kernel-configs/{base,numa,trace,tiering}"
        ".config (plus any --fragment) merged on allnoconfig and checked. An identical request is a cache hit.",
    )
    g = kernel_source_options(b, series_help="a quilt series (applied before any --patch)")
    g.add_argument("--patch", action="append", default=[], metavar="FILE",
                   help="a patch (mbox: git am; plain diff: patch -p1); repeatable, applied in order")  # fmt: skip
    g.add_argument("--no-default-fragments", action="store_true",
                   help="do not use kernel-configs/{base,numa,trace,tiering}.config")  # fmt: skip
    b.add_argument("--name", help="name to boot it by (default: baseline, or the first patch's name)")
    make_jobs_option(b)
    b.add_argument("--rebuild", action="store_true",
                   help="build even when the cache has it (the new build replaces the cached one)")  # fmt: skip
    json_option(b)
    b.set_defaults(func=cmd_build)
    ls = ksub.add_parser("list", help="list built kernels", description="List the cache of built kernels.")
    json_option(ls)
    ls.set_defaults(func=cmd_list)
    pr = ksub.add_parser(
        "prune",
        help="free cache space: unnamed builds, old logs, optionally source trees",
        description="Remove builds that no name points at (superseded by a later build under the same name), "
        "build logs of such builds older than --log-age-days, and with --sources the private source trees and "
        "warm build directories (the next build of that source is then cold). Named kernels are kept.",
    )
    pr.add_argument("--sources", action="store_true", help="also remove source trees and warm build directories")
    pr.add_argument("--log-age-days", type=float, default=1.0, metavar="DAYS",
                    help="keep logs of unnamed or failed builds younger than this (default 1)")  # fmt: skip
    pr.add_argument("--dry-run", "-n", action="store_true", help="only list what would be removed")
    json_option(pr)
    pr.set_defaults(func=cmd_prune)
