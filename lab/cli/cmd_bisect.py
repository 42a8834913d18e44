"""``numalab bisect``: which patch of a series changed the verdict (lab.bisect), and ``bisect log|replay DIR``."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from lab.analysis.ab_plan import WORKLOAD_FIGURE, ABPlan
from lab.analysis.metrics import get_metric
from lab.analysis.stats import MIN_REPEATS
from lab.analysis.verdict import resolve_decide
from lab.cli.common import debug, options_line, progress, warn
from lab.cli.shared_options import (
    ab_options,
    ab_plan_of,
    balancing_options,
    include_status_option,
    json_option,
    kernel_source_options,
    min_effect_option,
    qemu_options,
    run_settings,
    scheduler_option,
    schedulers_of,
    topology_options,
    topology_ref,
    tracing_options,
    workload_of,
    workload_options,
)
from lab.datafile import MAX_JSON_BYTES, parse_json, read_bytes, text_of
from lab.errors import LabError
from lab.paths import json_text, utf8_path
from lab.run.options import RunOptions
from lab.vm.tcg.guest_clock import check as check_clock
from lab.workloads.user_workload import resolve_workload

USAGE = (
    "numalab bisect --series DIR|FILE --decide METRIC --out DIR [options]\n"
    "       numalab bisect --source GIT --good REV --bad REV --decide METRIC --out DIR [options]\n"
    "       numalab bisect --scheduler-releases 'CRATE@OLD..NEW [ARGS]' --kernel NAME --out DIR [options]\n"
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
    from lab.bisect.engine import log_text  # (on use: start-up time)
    from lab.bisect.releases import is_release_state, release_log_text  # (on use: start-up time)

    out = _state_dir(args)
    path = out / "log.jsonl"
    entries = _log_entries(path) if path.exists() else []
    text = release_log_text if is_release_state(out) else log_text
    if args.json:
        print(json_text(entries, indent=2))
    else:
        print(text(entries) if entries else f"# numalab bisect in {out}: nothing logged yet")
    return 0


def _log_entries(path: Path) -> list[dict]:
    """log.jsonl, read with lab.datafile's bounds (size, strict numbers, duplicate keys): one object a line."""
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
    from lab.bisect.engine import replay, result_text  # (on use: start-up time)
    from lab.bisect.releases import is_release_state  # (on use: start-up time)

    out = _state_dir(args)
    if is_release_state(out):
        raise LabError(f"bisect replay {out}: a bisect over releases has no statistics to re-derive (each step is "
                       "its runs' status); numalab bisect log DIR shows its steps")  # fmt: skip
    result, problems = replay(out)
    if args.json:
        print(json_text({"result": result, "disagreements": problems}, indent=2))
    else:
        for p in problems:
            print(f"disagreement: {p}")
        print("\n".join(ln.lstrip("# ") for ln in result_text(result).splitlines()))
    return 1 if problems else 0


def _settings(args: argparse.Namespace) -> dict:
    """The run settings given that differ from numalab run's defaults, beyond balancing and --no-trace (which
    the context names): recorded with the bisect, so a resume must give the same."""
    d = RunOptions().flat()
    out = {}
    for k, v in run_settings(args).items():
        if k not in ("duration", "numa_balancing", "no_trace") and v != d[k]:
            out[k] = list(v) if isinstance(v, tuple) else v
    return out


def _config(args: argparse.Namespace, plan: ABPlan, patches: list[str]):
    from lab.bisect.engine import Config  # (on use: start-up time)

    settings = "default" if args.numa_balancing == "on" else f"balancing-{args.numa_balancing}"
    topo = topology_ref(args)
    workload = workload_of(args)
    what = {"source": args.source or "linux-source-6.1 (default)", "series": args.series,
            "topology": topo.label, "workload": workload, "duration_s": args.duration}  # fmt: skip
    if args.good:
        what |= {"good": args.good, "bad": args.bad}
    if extra := _settings(args):
        what["run_settings"] = extra
    if args.scheduler:  # (only then: a bisect of the fair class keeps the config it always had)
        what["scheduler"] = args.scheduler[0]
    return Config(plan, tuple(patches), args.direction, args.threshold, f"{topo.label}/{workload}/{settings}", what,
                  args.include_status)  # fmt: skip


def _check_before_building(template) -> None:
    """What the runs' settings can be checked for before any kernel is built (a bisect's first run comes
    after two kernel builds): the topology, the QEMU and its clock. The first run checks the rest."""
    from lab.run.batch import backend_of  # (on use: start-up time)
    from lab.vm.qemu.emulator import qemu_version_tuple  # (on use: start-up time)

    template.topology.load()
    check_clock(template.guest_time.clock, template.vm.backend, template.vm.accel, None)
    backend = backend_of(template)
    if template.guest_time.virtual:
        version = qemu_version_tuple(backend.emulator_version())
        check_clock(template.guest_time.clock, backend.name, template.vm.accel, version)


def _print_answer(result: dict, out: Path, human) -> None:
    from lab.bisect.engine import load_steps, ordered, result_text  # (on use: start-up time)

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
    from lab.kernel.git_tree import range_series  # (on use: start-up time)

    series_dir, good = range_series(args.source, args.good, args.bad, Path(args.out) / "range")
    return f"{Path(args.source).expanduser().resolve()}@{good}", str(series_dir)


# The options of a bisect over kernels that mean nothing over a scheduler's releases (no kernel is built, and a
# release's verdict is its runs' status, not a statistic): refused by name.
_NOT_FOR_RELEASES = (("series", "--series"), ("source", "--source"), ("good", "--good"), ("bad", "--bad"),
                     ("fragment", "--fragment"), ("scheduler", "--scheduler"), ("decide", "--decide"),
                     ("min_pairs", "--min-pairs"), ("max_pairs", "--max-pairs"), ("time_budget", "--time-budget"),
                     ("direction", "--direction"), ("threshold", "--threshold"), ("min_effect", "--min-effect"),
                     ("include_status", "--include-status"))  # fmt: skip


def cmd_releases(args: argparse.Namespace) -> int:
    """--scheduler-releases: which release of an scx scheduler first stopped (or started) running on --kernel
    (lab.bisect.releases)."""
    from lab.bisect.releases import (  # (on use: start-up time)
        ReleaseBisect,
        ReleaseConfig,
        parse_range,
        release_result_text,
        versions_in,
    )
    from lab.host import scx_release  # (on use: start-up time)

    for attr, flag in _NOT_FOR_RELEASES:
        if getattr(args, attr, None):
            raise LabError(f"{flag}: not with --scheduler-releases (a release is good when its scheduler ran "
                           "throughout, bad when it was ejected; the kernel is --kernel's)")  # fmt: skip
    if not args.kernel:
        raise LabError("--kernel: required with --scheduler-releases (the one kernel every release runs on)")
    if len(args.kernel) > 1:
        raise LabError(f"--kernel: one with --scheduler-releases (every release runs on it), got {len(args.kernel)}")
    kernel = args.kernel[0]
    rng = parse_range(args.scheduler_releases)
    from lab.kernel.cache import find_built  # (on use: start-up time)

    if find_built(kernel) is None:
        raise LabError(f"--kernel {kernel}: no such built kernel (numalab kernel list; numalab kernel build "
                       "--fragment sched-ext --fragment scx)")  # fmt: skip
    versions = versions_in(rng, scx_release.releases(rng.crate))
    progress(f"{rng.crate}: {len(versions)} releases from {rng.old} to {rng.new}: {', '.join(versions)}")
    topo, workload = topology_ref(args), workload_of(args)
    what = {"topology": topo.label, "workload": workload, "duration_s": args.duration,
            "numa_balancing": args.numa_balancing}  # fmt: skip
    if extra := _settings(args):
        what["run_settings"] = extra
    cfg = ReleaseConfig(rng, tuple(versions), kernel, args.step_runs, what)
    cfg.check()
    template = RunOptions.of(topology=topo, workload=workload, **run_settings(args))
    _check_before_building(template)
    from lab.bisect.release_steps import ReleaseStepRunner  # (on use: start-up time)
    from lab.run.execute import Interrupted  # (on use: start-up time)

    try:
        result = ReleaseBisect(Path(args.out), cfg, ReleaseStepRunner(rng, kernel, template, progress),
                               progress).run()  # fmt: skip
    except Interrupted as sig:
        warn(f"interrupted by {sig}: the finished steps and runs are kept; run the same command to resume", bare=True)
        return 143 if str(sig) == "SIGTERM" else 130
    human = sys.stderr if args.json else sys.stdout
    print(release_result_text(result).lstrip("# "), file=human)
    print(f"wall time {result['wall_s']:.0f}s ({result['builds_s']:.0f}s of it building), {result['runs']} runs, "
          f"{result['tested']} releases tested; log: numalab bisect log {args.out}", file=human)  # fmt: skip
    if args.json:
        print(json_text(result, indent=2))
    return 0


def cmd_bisect(args: argparse.Namespace) -> int:
    if args.what:
        if args.what[0] == "log":
            return cmd_log(args)
        if args.what[0] == "replay":
            return cmd_replay(args)
        raise LabError(f"bisect {args.what[0]}: unknown; use log DIR or replay DIR, or start one with --series")
    if args.out is None:
        raise LabError("--out: required to start or resume a bisect")
    utf8_path(args.out, "--out")  # (its runs' records name it in their UTF-8 files)
    if args.scheduler_releases:
        return cmd_releases(args)
    for flag, value in (("--kernel", args.kernel), ("--step-runs", args.step_runs != 1)):
        if value:
            raise LabError(f"{flag}: only with --scheduler-releases (a bisect over kernels builds its own)")
    plan = ab_plan_of(args, least=MIN_REPEATS)
    if len(plan.decide) > 1:
        raise LabError(f"--decide: a bisect decides on one metric, got {len(plan.decide)}: {', '.join(plan.decide)}")
    source, series = _source_and_series(args)
    if plan.decide[0] == WORKLOAD_FIGURE:  # the workload's own figure
        workload = resolve_workload(workload_of(args), getattr(args, "workload_cmd", None) or "",
                                    tuple(getattr(args, "workload_files", None) or ()))  # fmt: skip
        clock = run_settings(args).get("clock", "host")  # (--clock, or --model's)
        plan = replace(plan, decide=tuple(resolve_decide(plan.decide, workload, clock)))
    from lab.bisect.bisect_report import write_report  # (on use: start-up time)
    from lab.bisect.engine import Bisect  # (on use: start-up time)
    from lab.bisect.kernel_steps import series_patches  # (on use: start-up time)

    try:
        get_metric(plan.decide[0])
    except LabError as err:
        raise LabError(f"--decide: {err}") from None
    patches = series_patches(series)
    cfg = _config(args, plan, [p.name for p in patches])
    cfg.check()
    from lab.bisect.kernel_steps import KernelStepRunner  # (on use: start-up time)

    # Every run the bisect makes has these settings (kernel_steps replaces the kernel and the record's place).
    template = RunOptions.of(topology=topology_ref(args), workload=workload_of(args),
                             schedulers=schedulers_of(args, one=True), **run_settings(args))  # fmt: skip
    debug(f"bisect config: {json_text(cfg.to_dict(), sort_keys=True)}")
    debug(f"every run (options not at their defaults, kernel and out aside): {options_line(template)}")
    _check_before_building(template)
    from lab.run.scheduler import fragments_for  # (on use: start-up time)

    # (a sched_ext scheduler: every step's kernel gets the sched-ext fragment)
    runner = KernelStepRunner(source, series, list(fragments_for(template.schedulers[0], tuple(args.fragment))),
                              template, progress)  # fmt: skip
    from lab.run.execute import Interrupted  # (on use: start-up time)

    try:
        result = Bisect(Path(args.out), cfg, runner, progress).run()
    except Interrupted as sig:
        warn(f"interrupted by {sig}: the finished steps and runs are kept; run the same command to resume", bare=True)
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
        "skips it (undecided within its runs or time budget share, or it does not build). Every run is made "
        "with the run settings given (the same options as numalab run's). The state is one "
        "directory (--out): run the same command again to resume a killed bisect. See docs/bisect.md.",
    )
    b.add_argument("what", nargs="*", metavar="log DIR | replay DIR",
                   help="log DIR: print the log like git bisect log; replay DIR: re-derive the answer from the "
                   "recorded steps without running")  # fmt: skip
    g = kernel_source_options(b, series_help="the quilt series to bisect (a DIR with series, or the file)")
    g.add_argument("--good", metavar="REV", help="with --bad and a git --source: bisect the commits good..bad")
    g.add_argument("--bad", metavar="REV", help="the bad end of the range (with --good)")
    topology_options(b)
    workload_options(b)
    balancing_options(b)
    tracing_options(b)
    qemu_options(b)
    scheduler_option(b.add_argument_group("the scheduler under test"), several=False)
    g = b.add_argument_group("a scheduler's releases instead of kernels (docs/sched-ext.md)")
    g.add_argument("--scheduler-releases", metavar="'CRATE@OLD..NEW [ARGS]'",
                   help="bisect an scx scheduler's crates.io releases from OLD to NEW (e.g. 'scx_layered@1.0.23..1.1.0 "
                   "--run-example': its arguments in the same word) on one --kernel: each release built (cached) "
                   "and run; good when its scheduler ran throughout, bad when it was ejected (a panic, the "
                   "verifier, the watchdog), else skipped. Names the first bad release, or the first that runs "
                   "when OLD is the bad one")  # fmt: skip
    g.add_argument("--kernel", action="append", metavar="NAME",
                   help="with --scheduler-releases: the built kernel every release runs on (one)")  # fmt: skip
    g.add_argument("--step-runs", type=int, default=1, metavar="N",
                   help="with --scheduler-releases: runs of each release (default 1): bad when one is ejected, good "
                   "when all ran")  # fmt: skip
    g = b.add_argument_group("the decision of every step")
    ab_options(g, several=False, runs="runs of a step", old=("--metric", "--budget"),
               budget="each step gets its share of what is left, and is skipped when it is spent")  # fmt: skip
    g.add_argument("--direction", choices=("worse", "better", "higher", "lower"),
                   help="the change to hunt, in the metric's own sense (higher or lower for a mechanism counter such "
                   "as vmstat.numa_pages_migrated, which has no better; default: whichever the endpoints show; "
                   "endpoints that moved the other way leave nothing to bisect)")  # fmt: skip
    g.add_argument("--threshold", type=float, metavar="PCT",
                   help="a step is bad from this shift toward bad, in %% of the good endpoint's mean "
                   "(default: half the endpoints' shift; never below --min-effect)")  # fmt: skip
    min_effect_option(g)
    include_status_option(g)
    g = b.add_argument_group("output")
    g.add_argument("--out", metavar="DIR", help="the state directory (new, or a bisect's to resume it)")
    json_option(g)
    b.set_defaults(func=cmd_bisect)
