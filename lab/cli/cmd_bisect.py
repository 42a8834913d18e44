"""``numalab bisect``: which patch of a series changed the verdict (lab.bisect), and ``bisect log|replay DIR``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lab.cli.cmd_topo import size_options, topology_ref
from lab.cli.common import progress
from lab.errors import LabError
from lab.paths import json_text

USAGE = (
    "numalab bisect --series DIR|FILE --metric M --out DIR [options]\n"
    "       numalab bisect --source GIT --good REV --bad REV --metric M --out DIR [options]\n"
    "       numalab bisect log DIR\n"
    "       numalab bisect replay DIR"
)


def _state_dir(args: argparse.Namespace) -> Path:
    if len(args.what) != 2:
        raise LabError(f"bisect {args.what[0]}: give the bisect's directory (numalab bisect {args.what[0]} DIR)")
    out = Path(args.what[1])
    if not (out / "bisect.json").is_file():
        raise LabError(f"bisect {args.what[0]} {out}: not a bisect state directory (no bisect.json)")
    return out


def cmd_log(args: argparse.Namespace) -> int:
    from lab.bisect.engine import log_text

    out = _state_dir(args)
    path = out / "log.jsonl"
    entries = _log_entries(path) if path.exists() else []
    if args.json:
        print(json_text(entries, indent=2))
    else:
        print(log_text(entries) if entries else f"# numalab bisect in {out}: nothing logged yet")
    return 0


def _log_entries(path: Path) -> list[dict]:
    """log.jsonl, read with lab.datafile's bounds (size, strict numbers, duplicate keys): one object a line."""
    from lab.datafile import MAX_JSON_BYTES, parse_json, read_bytes, text_of

    text = text_of(read_bytes(path, "bisect log", MAX_JSON_BYTES), f"bisect log {path}")
    entries = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            entry = parse_json(line, f"bisect log {path}:{n}")
            if not isinstance(entry, dict):
                raise LabError(f"bisect log {path}:{n}: not a JSON object")
            entries.append(entry)
    return entries


def cmd_replay(args: argparse.Namespace) -> int:
    from lab.bisect.engine import replay, result_text

    out = _state_dir(args)
    result, problems = replay(out)
    if args.json:
        print(json_text({"result": result, "disagreements": problems}, indent=2))
    else:
        for p in problems:
            print(f"disagreement: {p}")
        print("\n".join(ln.lstrip("# ") for ln in result_text(result).splitlines()))
    return 1 if problems else 0


def _config(args: argparse.Namespace, patches: list[str]):
    from lab.bisect.engine import Config

    settings = "default" if args.numa_balancing == "on" else f"balancing-{args.numa_balancing}"
    topo = topology_ref(args)
    what = {"source": args.source or "linux-source-6.1 (default)", "series": args.series,
            "topology": topo.label, "workload": args.workload, "duration_s": args.duration}  # fmt: skip
    if args.good:
        what |= {"good": args.good, "bad": args.bad}
    return Config(args.metric, tuple(patches), args.direction, args.threshold, args.budget, args.min_pairs,
                  args.max_pairs, f"{topo.label}/{args.workload}/{settings}", what)  # fmt: skip


def _print_answer(result: dict, out: Path, human) -> None:
    from lab.bisect.engine import load_steps, ordered, result_text

    steps = ordered(load_steps(out))
    print("", file=human)
    for s in steps:
        what = "endpoints" if s.name == "endpoints" else f"prefix {s.prefix}"
        print(f"{what}: {s.verdict} ({s.runs_good} good-endpoint + {s.runs_step} runs, {s.wall_s:.0f}s)", file=human)
        for ln in s.lines if s.verdict != "skip" else [s.reason]:
            print(f"  verdict: {ln}", file=human)
    print("\n".join(ln.lstrip("# ") for ln in result_text(result).splitlines()), file=human)
    print(f"wall time {result.get('wall_s', 0):.0f}s, {result.get('runs', 0)} runs", file=human)


def _source_and_series(args: argparse.Namespace) -> tuple[str | None, str]:
    """--source and --series, or, for --good/--bad, GIT@good and the range written as a series in --out."""
    if not (args.good or args.bad):
        if args.series is None:
            raise LabError("--series: required to start or resume a bisect (or --good and --bad with a git --source)")
        return args.source, args.series
    if not (args.good and args.bad):
        raise LabError(f"--{'bad' if args.good else 'good'}: give both --good and --bad")
    if args.series is not None:
        raise LabError("--series: give either --series or --good/--bad")
    from lab.bisect.git_range import range_series

    series_dir, good = range_series(args.source, args.good, args.bad, Path(args.out) / "range")
    return f"{Path(args.source).expanduser().resolve()}@{good}", str(series_dir)


def cmd_bisect(args: argparse.Namespace) -> int:
    if args.what:
        if args.what[0] == "log":
            return cmd_log(args)
        if args.what[0] == "replay":
            return cmd_replay(args)
        raise LabError(f"bisect {args.what[0]}: unknown; use log DIR or replay DIR, or start one with --series")
    for opt in ("metric", "out"):
        if getattr(args, opt) is None:
            raise LabError(f"--{opt}: required to start or resume a bisect")
    source, series = _source_and_series(args)
    from lab.analysis.metrics import get_metric
    from lab.bisect.bisect_report import write_report
    from lab.bisect.engine import Bisect
    from lab.bisect.kernel_steps import series_patches

    try:
        get_metric(args.metric)
    except LabError as err:
        raise LabError(f"--metric: {err}") from None
    patches = series_patches(series)
    cfg = _config(args, [p.name for p in patches])
    cfg.check()
    from lab.bisect.kernel_steps import KernelStepRunner
    from lab.run.options import RunOptions

    template = RunOptions(topology=topology_ref(args), workload=args.workload, duration=args.duration,
                          numa_balancing=args.numa_balancing, no_trace=args.no_trace)  # fmt: skip
    runner = KernelStepRunner(source, series, args.fragment, template, progress)
    from lab.run.execute import Interrupted

    try:
        result = Bisect(Path(args.out), cfg, runner, progress).run()
    except Interrupted as sig:
        progress(f"interrupted by {sig}: the finished steps and runs are kept; run the same command to resume")
        return 143 if str(sig) == "SIGTERM" else 130
    paths = write_report(Path(args.out))
    human = sys.stderr if args.json else sys.stdout
    _print_answer(result, Path(args.out), human)
    print(f"report: {paths['md']} ({paths['json'].name}, {paths['svg'].name}); log: numalab bisect log {args.out}",
          file=human)  # fmt: skip
    if args.json:
        print(json_text(result, indent=2))
    return 0


def add_parser(sub) -> None:
    b = sub.add_parser(
        "bisect",
        help="find the patch of a series that changed a metric, with A/B statistics at every step",
        usage=USAGE,
        description="Bisect over the prefixes of a quilt series applied on --source: prefix k is the source with "
        "the first k patches. The endpoints (no patches, all patches) are compared first in A B pairs until "
        "Welch's test decides; if they do not differ there is nothing to bisect. Each step then runs prefix k "
        "against the good endpoint (whose runs are reused) until it is bad (significant, moved toward bad by "
        "at least the threshold, and a sign test says the good endpoint rarely gives runs like these) or good "
        "(the 95% CI of its shift toward bad lies below the threshold, and a sign test says the bad endpoint "
        "rarely gives runs like these), or "
        "skips it (undecided within its pairs or budget share, or it does not build). The state is one "
        "directory (--out): run the same command again to resume a killed bisect. See docs/bisect.md.",
    )
    b.add_argument("what", nargs="*", metavar="log DIR | replay DIR",
                   help="log DIR: print the log like git bisect log; replay DIR: re-derive the answer from the "
                   "recorded steps without running")  # fmt: skip
    b.add_argument("--source", metavar="DIR|TARBALL|GIT@REV",
                   help="kernel source (default Debian's linux-source-6.1 tarball)")  # fmt: skip
    b.add_argument("--series", metavar="DIR|FILE", help="the quilt series to bisect (a DIR with series, or the file)")
    b.add_argument("--good", metavar="REV", help="with --bad and a git --source: bisect the commits good..bad")
    b.add_argument("--bad", metavar="REV", help="the bad end of the range (with --good)")
    b.add_argument("--fragment", action="append", default=[], metavar="FILE|NAME",
                   help="an extra config fragment for every kernel (repeatable)")  # fmt: skip
    b.add_argument("--topology", default="ring-2", help="a preset or a spec file (default ring-2)")
    size_options(b)
    b.add_argument("--workload", default="numa01", help="the workload of every run (default numa01)")
    b.add_argument("--duration", type=float, default=10.0, metavar="S", help="workload seconds (default 10)")
    b.add_argument("--numa-balancing", choices=("on", "off", "default"), default="on",
                   help="NUMA balancing in the guest (default on)")  # fmt: skip
    b.add_argument("--no-trace", action="store_true", help="no trace-cmd in the guest (vmstat metrics only)")
    b.add_argument("--metric", metavar="M", help="the metric that decides (any of numalab compare's)")
    b.add_argument("--direction", choices=("worse", "better"),
                   help="the change to hunt, in the metric's own sense (default: whichever the endpoints show; "
                   "endpoints that moved the other way leave nothing to bisect)")  # fmt: skip
    b.add_argument("--threshold", type=float, metavar="PCT",
                   help="a step is bad from this shift toward bad, in %% of the good endpoint's mean "
                   "(default: half the endpoints' shift)")  # fmt: skip
    b.add_argument("--budget", type=float, metavar="SECONDS",
                   help="wall-time budget; each step gets its share of what is left (default none)")  # fmt: skip
    b.add_argument("--min-pairs", type=int, default=3, metavar="N", help="runs a step has at least (default 3)")
    b.add_argument(
        "--max-pairs", type=int, default=8, metavar="N", help="runs after which a step is skipped (8; at most 1000)"
    )
    b.add_argument("--out", metavar="DIR", help="the state directory (new, or a bisect's to resume it)")
    b.add_argument("--json", action="store_true", help="print the result (or the log, the replay) as JSON")
    b.set_defaults(func=cmd_bisect)
