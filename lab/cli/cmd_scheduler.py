"""``numalab scheduler build|versions``: the sched-ext/scx project's schedulers from their crates.io releases,
built with cargo into numalab's cache (lab.host.scx_release), and the versions the registry has."""

from __future__ import annotations

import argparse

from lab.cli.common import progress
from lab.cli.shared_options import json_option
from lab.paths import json_text

CRATES_HELP = "scx_bpfland, scx_lavd, scx_rusty, scx_layered or scx_p2dq"


def cmd_build(args: argparse.Namespace) -> int:
    from lab.host import scx_release  # (on use: start-up time)

    crate, version = scx_release.parse(args.name, "scheduler build")
    built = scx_release.build(crate, version, args.patch, progress)
    if args.json:
        print(json_text(built.meta | {"binary": str(built.binary), "cached": built.cached,
                                      "seconds": round(built.seconds, 3)}, indent=2))  # fmt: skip
        return 0
    how = f"cache hit in {built.seconds:.2f}s" if built.cached else f"built in {built.meta['build_s']:.0f}s"
    progress(f"{crate} {built.meta['version']} ({how}; ops {built.meta['ops']}; {built.meta['source']})")
    print(built.binary)
    return 0


def cmd_versions(args: argparse.Namespace) -> int:
    from lab.host import scx_release  # (on use: start-up time)

    crate, _ = scx_release.parse(args.name, "scheduler versions")
    known = scx_release.releases(crate)
    if args.json:
        print(json_text([{"version": r.version, "published": r.pubtime, "rust_version": r.rust_version,
                          "yanked": r.yanked} for r in known], indent=2))  # fmt: skip
        return 0
    for r in known:
        notes = [f"rust >= {r.rust_version}"] if r.rust_version else []
        notes += ["yanked"] if r.yanked else []
        notes += ["numalab's pinned version"] if r.version == scx_release.PINNED else []
        print(f"{r.version:<10}{(r.pubtime or '-')[:10]:<12}{', '.join(notes)}".rstrip())
    return 0


def add_parser(sub) -> None:
    s = sub.add_parser(
        "scheduler",
        help="build the scx project's sched_ext schedulers from their crates.io releases (cached)",
        description="The sched-ext/scx project's schedulers from their releases on crates.io: built with cargo "
        "(clang >= 18 for the BPF side; make setup-scx) into numalab's cache, keyed by crate, version, patches, "
        "rustc and clang; run one with numalab run --scheduler NAME[@VERSION] (docs/sched-ext.md).",
    )
    ssub = s.add_subparsers(dest="scheduler_command", metavar="SUBCOMMAND", required=True)
    b = ssub.add_parser(
        "build",
        help="build (or find in the cache) a scheduler; prints its binary's path",
        description="Build NAME at VERSION (default numalab's pinned one) from its .crate: the crate's own "
        "Cargo.lock (--locked), your patches applied in order (patch -p1 from the crate's root), cargo build "
        "--release. A cached build is found without the network. The printed path runs as --scheduler PATH, "
        "recorded as the crate (and its patches) it was built from.",
    )
    b.add_argument("name", metavar="NAME[@VERSION]", help=f"{CRATES_HELP}, @ its crate's version (e.g. 1.0.23)")
    b.add_argument("--patch", action="append", default=[], metavar="FILE",
                   help="a patch to the crate's source (-p1 from its root); repeatable, applied in order")  # fmt: skip
    json_option(b)
    b.set_defaults(func=cmd_build)
    v = ssub.add_parser(
        "versions",
        help="the versions crates.io has of a scheduler, with their dates",
        description="List NAME's versions from the crates.io index (index.crates.io), oldest first, with their "
        "publication dates, the Rust version each needs, and which is numalab's pinned one.",
    )
    v.add_argument("name", metavar="NAME", help=CRATES_HELP)
    json_option(v)
    v.set_defaults(func=cmd_versions)
