"""The options more than one command has, each declared once: one name, one default and one help text for
every command that has the notion (``run``, ``bisect``, ``matrix``, ``reproduce``, ``compare``, ``report``,
``topo``, ``workload``, ``kernel``, ``doctor``). Each builder adds its options as an argument group of the
parser it is given, so a long ``--help`` reads by topic.

Old spellings stay for one release as hidden aliases (:func:`alias`: same destination, no help line); the
CHANGELOG lists them. ``tests/unit/test_cli_vocabulary.py`` walks every parser and fails when one notion
shows under two names, or a shared option's default differs between commands.

The library's defaults and choices come from the modules that own them (RunOptions, WORKLOADS, PINNINGS...),
which numalab's start loads anyway: building the parser stays cheap for every command.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from lab import schemas
from lab.analysis.ab_plan import ABPlan
from lab.analysis.numa import default_events
from lab.analysis.stats import SIGNIFICANCES
from lab.errors import LabError
from lab.guest.settings import TRACE_MODES
from lab.guest.trace_options import TraceOptions
from lab.min_effect import DEFAULT_PCT as DEFAULT_MIN_EFFECT
from lab.min_effect import parse_pct
from lab.paths import printable_path
from lab.placement.pinning import BACKINGS, PINNINGS
from lab.run.access_matrix import CLOCK_STATUS as ACCESS_CLOCK_STATUS
from lab.run.access_matrix import STATUS as ACCESS_STATUS
from lab.run.options import CHOICES, PIECES, RunOptions
from lab.run.status import STATUSES
from lab.topology.model.ref import TopologyRef
from lab.vm.tcg.clock_options import ClockOptions
from lab.vm.tcg.machine_model import DEFAULT_MODEL, MODELS
from lab.vm.tcg.machine_model import fill as fill_model
from lab.workloads.registry import WORKLOADS

JSON_HELP = "print JSON on stdout instead of text (machine-readable; the text, if any, goes to stderr)"

QEMU_HELP = (
    "the QEMU to run VMs with (--backend qemu): system (qemu-system-x86_64 on PATH), backports (the QEMU 10 "
    "that make setup-qemu10 unpacked), charge (numalab's patched QEMU 10 that make setup-qemu-charge built: "
    "--clock virtual with --remote-latency) or a binary's path; default $NUMALAB_QEMU, else system. Its version "
    "and firmware come from the binary itself"
)

SIGNIFICANCE_HELP = (
    "the significance rule of A/B verdicts and tables: welch: Welch's t-test, two-sided, p<0.05 (default); "
    "ci-overlap: mmtests' rule, |dmean| > 1.96*(sd_base+sd_new) with sd the runs' standard deviation (so more "
    "runs do not make it easier to pass)"
)

MIN_EFFECT_HELP = (
    f"the minimum effect: a significant difference smaller than PCT%% of the baseline's mean is not better or "
    f"worse, and a verdict of 'same' (within +-PCT%%) needs an equivalence test (TOST) at that margin to show it; "
    f"otherwise the verdict is undecided (default: a metric's own min_effect from its workload file, else "
    f"{DEFAULT_MIN_EFFECT:g}%%; 0: off). It matters where runs barely spread, as under --clock virtual"
)

# The A/B plan's defaults are the library's (lab.analysis.ab_plan): the help texts read them from here.
PLAN = ABPlan()


def alias(container, old: str, action: argparse.Action) -> None:
    """``old`` as a hidden alias of ``action``: it sets the same destination the same way, with no help line."""
    kwargs: dict = {"dest": action.dest, "help": argparse.SUPPRESS, "default": argparse.SUPPRESS}
    if isinstance(action, argparse._AppendAction):  # noqa: SLF001
        kwargs |= {"action": "append", "type": action.type, "metavar": action.metavar}
    elif isinstance(action, argparse._StoreTrueAction):  # noqa: SLF001
        kwargs |= {"action": "store_true"}
    else:
        kwargs |= {"type": action.type, "metavar": action.metavar, "choices": action.choices}
    container.add_argument(old, **kwargs)


# --- global -------------------------------------------------------------------------------------------------


def verbosity_options(p: argparse.ArgumentParser, *, top: bool) -> None:
    """-q/--quiet and -v/--verbose, before the command (``top``) or after it: a subcommand's copies default to
    SUPPRESS so that they never undo what was given before the command."""
    g = p.add_argument_group("output to the terminal")
    default = {} if top else {"default": argparse.SUPPRESS}
    g.add_argument("-q", "--quiet", action="store_true", **default,
                   help="no progress lines on stderr (warnings and errors only)")  # fmt: skip
    g.add_argument("-v", "--verbose", action="store_true", **default,
                   help="also debug lines on stderr (what numalab decided, and why)")  # fmt: skip


def json_option(container) -> None:
    container.add_argument("--json", action="store_true", help=JSON_HELP)


# --- the machine -------------------------------------------------------------------------------------------


def topology_ref(args: argparse.Namespace):
    """--topology (or topo's TOPOLOGY) with the size overrides, as the library's TopologyRef."""
    return TopologyRef(args.topology, args.cpus_per_node, args.mem_per_node, args.threads)


def size_options(container) -> None:
    container.add_argument(
        "--cpus-per-node",
        type=int,
        metavar="N",
        help="vCPUs in every node that has CPUs (where nodes hold different numbers of LLCs: in those with the fewest, "
        "the others as many an LLC)",
    )
    container.add_argument("--mem-per-node", metavar="SIZE", help="memory of every node, e.g. 512M or 1G")
    container.add_argument("--threads", type=int, metavar="N", help="SMT threads per core")


def topology_options(p: argparse.ArgumentParser, what: str = "the machine the VM emulates"):
    """--topology (default: the library's, ring-4) and the size overrides, in a group."""
    name = RunOptions().topology.name
    g = p.add_argument_group("topology and sizes")
    g.add_argument("--topology", default=name, metavar="NAME|FILE",
                   help=f"{what}: a preset (numalab topo list) or a spec file (default {name})")  # fmt: skip
    size_options(g)
    return g


def pinning_option(container) -> None:
    container.add_argument(
        "--pinning",
        choices=PINNINGS,
        default="auto",
        help="vCPU pinning: cpu (each vCPU on one host CPU), node (on its host node's CPUs), auto (cpu when "
        "every vCPU gets a CPU of its own, else node; the default). Host CPUs are those numalab may run on: "
        "taskset -c LIST numalab run ... keeps a run on LIST",
    )


def memory_options(container) -> None:
    """--backing and --prealloc (run and the topology emitters)."""
    container.add_argument("--backing", choices=BACKINGS, default="ram", help="guest memory backing (default ram)")
    container.add_argument("--prealloc", action="store_true", help="preallocate guest memory")


def connect_option(container) -> None:
    """--connect URI (run, matrix run): the libvirt host that runs the VMs."""
    container.add_argument("--connect", metavar="URI", help="libvirt URI for --backend libvirt (default "
                           "qemu:///system), e.g. qemu+ssh://user@host/system")  # fmt: skip


# --- kernel ------------------------------------------------------------------------------------------------


def kernel_source_options(p: argparse.ArgumentParser, *, series_help: str):
    """--source, --series and --fragment (kernel build and bisect)."""
    g = p.add_argument_group("kernel source")
    g.add_argument("--source", metavar="DIR|TARBALL|GIT@REV|debian:X.Y",
                   help="kernel source (default Debian's linux-source-6.1 tarball); GIT is a path or URL; "
                        "debian:7.3 is Debian's linux-source-7.3, fetched with apt (cached)")  # fmt: skip
    g.add_argument("--series", metavar="DIR|FILE", help=series_help)
    g.add_argument("--fragment", action="append", default=[], metavar="FILE|NAME",
                   help="an extra config fragment, merged after the defaults (repeatable)")  # fmt: skip
    return g


SCHEDULER_HELP = (
    "the scheduler under test: fair (the kernel's own classes, nothing loaded: the default), an example "
    "sched_ext scheduler built with the kernel (scx_simple, scx_qmap, scx_central, scx_flatcg: numalab kernel "
    "build --fragment sched-ext), or the PATH of a scheduler binary (its shared libraries go with it), with its "
    "arguments in the same word ('scx_qmap -e 100'). The run checks in the guest that it ran throughout "
    "(status scheduler-ejected otherwise; docs/sched-ext.md)"
)


def scheduler_option(container, *, several: bool) -> None:
    """--scheduler NAME|PATH (run, ab, bisect; a matrix's ``scheduler:`` key): ``several``, given twice it is an
    A/B of two schedulers on one kernel (run)."""
    more = "; give it twice for an A/B of two schedulers on one kernel (A B A B)" if several else " (one)"
    container.add_argument("--scheduler", action="append", metavar="NAME|PATH", help=SCHEDULER_HELP + more)


def schedulers_of(args: argparse.Namespace, one: bool = False) -> tuple[str, ...]:
    """--scheduler as the library's RunOptions.schedulers (default: fair); ``one``: the command takes one."""
    value = tuple(getattr(args, "scheduler", None) or ("fair",))
    if one and len(value) > 1:
        raise LabError(f"--scheduler: give one here, got {len(value)}: {', '.join(value)}")
    return value


# --- workload ----------------------------------------------------------------------------------------------


def duration_option(container, what: str = "how long the workload runs") -> None:
    d = RunOptions().duration
    container.add_argument("--duration", type=float, default=d, metavar="SECONDS", help=f"{what} (default {d:g})")


def workload_options(p: argparse.ArgumentParser, *, one_off: bool = False):
    """--workload (default None: the library's, numa01) and --duration; with ``one_off``, --workload-cmd and
    --workload-file too (run)."""
    g = p.add_argument_group("workload")
    g.add_argument(
        "--workload",
        metavar="NAME|FILE.yaml",
        help=f"a built-in, one of: {', '.join(WORKLOADS)} (default {RunOptions().workload}); or your own workload "
        "file (command, files, tools, packages, results, metrics: docs/workloads.md, 'Your own workload')",
    )
    if one_off:
        g.add_argument(
            "--workload-cmd",
            metavar="CMD",
            help="a one-off workload: this shell command runs in the guest's /workload ({cpus}, {nodes}, {mem_mib}, "
            "{duration} are filled in) and prints a 'NUMALAB_RESULT {json}' line; every number in it is a metric, "
            "higher being better (a workload file can say otherwise)",
        )
        g.add_argument(
            "--workload-file",
            action="append",
            default=[],
            metavar="PATH",
            help="with --workload-cmd: a host file (a static program, a script) copied into the guest's /workload "
            "(repeatable)",
        )
    duration_option(g)
    return g


def workload_of(args: argparse.Namespace) -> str:
    """--workload, or the library's default; not both --workload and --workload-cmd."""
    if args.workload and getattr(args, "workload_cmd", None):
        raise LabError("--workload-cmd: not with --workload (the command is the workload)")
    return args.workload or RunOptions().workload


# --- the guest kernel's settings ---------------------------------------------------------------------------


def balancing_options(p: argparse.ArgumentParser):
    """--numa-balancing, --knob, --kernel-default-knobs and --append: what the guest kernel runs with."""
    d = RunOptions()
    g = p.add_argument_group("NUMA balancing, knobs and the kernel command line")
    g.add_argument(
        "--numa-balancing",
        choices=CHOICES["numa_balancing"],
        default=d.numa_balancing,
        help=f"kernel.numa_balancing in the guest (default {d.numa_balancing}); tiering is mode 2 (promotion from "
        "lower memory tiers) with /sys/kernel/mm/numa/demotion_enabled on",
    )
    g.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE",
                   help="a sched debugfs knob: a numa_balancing one (scan_delay_ms=100) or DIR/NAME under "
                        "/sys/kernel/debug/sched (llc_balancing/enabled=1); repeatable")  # fmt: skip
    g.add_argument("--kernel-default-knobs", action="store_true",
                   help="do not apply the short-scan knobs numalab uses by default for short runs")  # fmt: skip
    g.add_argument(
        "--append",
        action="append",
        default=[],
        metavar="ARGS",
        help="extra guest kernel command-line arguments, e.g. --append 'initcall_debug numa_balancing=disable' "
        "(repeatable; recorded in cmdline.txt)",
    )
    return g


def tracing_options(p: argparse.ArgumentParser):
    """--event, --no-trace, --lean, --trace-buffer-kb, --node-maps and --trace-mode: the tracing piece's
    (lab.guest.trace_options.TraceOptions), each flag's dest its field's name (but --event's, ``events``)."""
    d = TraceOptions()
    g = p.add_argument_group("tracing")
    g.add_argument("--event", action="append", default=[], metavar="SYS:EVENT",
                   help=f"extra trace event (default set: {', '.join(e.full for e in default_events())})")  # fmt: skip
    g.add_argument("--no-trace", action="store_true", help="no tracing: no trace events, no trace.dat")
    g.add_argument("--lean", action="store_true", default=None,
                   help="trace only NUMA balancing's own events and page migrations (no per-task residency, "
                   "convergence or LLC views) and take no per-node memory samples: the fewest extras a traced "
                   "run can have (their cost: docs/reports.md)")  # fmt: skip
    g.add_argument("--trace-buffer-kb", type=int, default=d.trace_buffer_kb, metavar="KB",
                   help=f"per-CPU trace buffer (default {d.trace_buffer_kb})")  # fmt: skip
    g.add_argument("--node-maps", action="store_true", default=None,
                   help="with each node memory sample, also read the workload's /proc/PID/numa_maps: its pages per "
                   "node over time (the report's chart and checks); it slows the workload under TCG, so it is off "
                   "unless asked for")  # fmt: skip
    g.add_argument(
        "--trace-mode",
        choices=TRACE_MODES,
        default=d.trace_mode,
        help="raw: the kernel's trace buffers only while the workload runs (no recorder tasks in the guest), "
        "copied out raw and made into trace.dat on the host with trace-cmd restore (default); extract: the "
        "same, but trace-cmd extract runs in the guest (over a second longer under TCG); record: the workload "
        "runs under trace-cmd record",
    )
    return g


# --- QEMU ----------------------------------------------------------------------------------------------------


def qemu_option(container) -> None:
    container.add_argument("--qemu", metavar="PATH", help=QEMU_HELP)


def qemu_options(p: argparse.ArgumentParser):
    """--qemu, --accel, --model, --clock, --seed, --quantum and --insns-per-ns: which emulator, which accelerator,
    whose time (the clock's flags: the clock piece's, lab.vm.tcg.clock_options.ClockOptions)."""
    d = RunOptions()
    g = p.add_argument_group("QEMU, accelerator and clock")
    qemu_option(g)
    g.add_argument(
        "--accel",
        choices=CHOICES["accel"],
        default=d.vm.accel,
        help=f"accelerator (default {d.vm.accel}); auto: a real KVM boot probed on the host that runs the VM (cached; "
        "TCG if KVM fails)",
    )
    g.add_argument(
        "--model",
        choices=tuple(MODELS),
        help=f"the modelled machine by one name, as numalab's known answers validated it (docs/throughput.md): "
        f"{DEFAULT_MODEL} is {MODELS[DEFAULT_MODEL].summary} ("
        + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in MODELS[DEFAULT_MODEL].options)
        + "); a part given besides is kept and the record says the machine differs (needs make setup-qemu-charge)",
    )
    g.add_argument(
        "--clock",
        choices=CHOICES["clock"],
        help=f"the guest's clock under TCG (default {ClockOptions().clock}): host, or virtual: it advances with the "
        "instructions the vCPUs execute (QEMU's -icount, 1 G a guest second shared by the vCPUs; QEMU 10: --qemu "
        "backports), so host load cannot change what the guest measures",
    )
    g.add_argument(
        "--seed",
        type=int,
        metavar="N",
        help="with --clock virtual: the seed that chooses the run's trajectory (the guest's RTC and random pool); "
        "the same kernel, topology, workload and seed give the same run. Repeat i gets N + i, both kernels "
        "alike (default 0)",
    )
    g.add_argument(
        "--quantum",
        type=int,
        metavar="NS",
        help="with --clock virtual and --qemu charge: parallel guest time, each vCPU its own clock (1 G "
        "instructions a guest second each) and none more than NS guest ns ahead of the slowest running one, which "
        "bounds how late one vCPU sees another's work (docs/qemu.md); default 0: one clock shared by the vCPUs",
    )
    g.add_argument(
        "--insns-per-ns",
        type=int,
        metavar="N",
        help="with --clock virtual and --qemu charge: N instructions a guest nanosecond (1..64; default 1), a "
        "faster modelled CPU against the same memory charges (docs/qemu.md)",
    )
    return g


# The run options whose flag's dest is not their name (a new option's is: argparse makes --foo-bar foo_bar).
RENAMED = {"knobs": "knob", "events": "event"}
# The run options of the groups above that run_settings reads by name: RunOptions' own, then every piece's field
# (lab.run.options.PIECES), so that an option added to a piece and to its group here reaches the run unnamed here.
SETTINGS = ("numa_balancing", "knobs", "kernel_default_knobs", "append",
            *(f.name for piece in PIECES.values() for f in dataclasses.fields(piece)))  # fmt: skip


def run_settings(args: argparse.Namespace) -> dict:
    """The RunOptions fields of the groups above that ``args`` has (run and bisect), by their flat names (the flag's
    dest, :data:`RENAMED` aside): workload, balancing, knobs, --append, tracing, QEMU, accelerator, clock and
    (run's) the memory charge; those not given (None) are left at their defaults."""
    out = {f: (tuple(v) if isinstance(v, list) else v) for f in SETTINGS
           if (v := getattr(args, RENAMED.get(f, f), None)) is not None}  # fmt: skip
    if hasattr(args, "qemu"):
        out["qemu"] = args.qemu
    if getattr(args, "model", None):
        out = fill_model(args.model, out)
    if out.get("qemu") is None and hasattr(args, "qemu"):
        out["qemu"] = ""
    if hasattr(args, "duration"):
        out["duration"] = args.duration
    return out


# --- A/B: budget, decision, significance -------------------------------------------------------------------


def significance_option(container) -> None:
    container.add_argument("--significance", choices=SIGNIFICANCES, default=PLAN.significance, help=SIGNIFICANCE_HELP)


def _effect_arg(text: str) -> float:
    try:
        return parse_pct(text, "--min-effect")
    except LabError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--min-effect: ")) from None


def min_effect_option(container) -> None:
    """--min-effect PCT: the minimum effect of every verdict the command gives (lab.min_effect). The default is
    None, so that a metric's own (a workload file's min_effect) holds unless the command line says otherwise."""
    container.add_argument("--min-effect", type=_effect_arg, metavar="PCT", help=MIN_EFFECT_HELP)


# Every status a run record can have but ok (lab.run.status, and --access-matrix's own: lab.run.access_matrix).
NOT_OK_STATUSES = (*(s for s in STATUSES if s != "ok"), ACCESS_STATUS, ACCESS_CLOCK_STATUS)


def _statuses_arg(text: str) -> tuple[str, ...]:
    """--include-status's STATUS[,STATUS...] or all: the statuses other than ok, each once, in the order given."""
    names = [n.strip() for n in text.split(",")]
    if names == ["all"]:
        return NOT_OK_STATUSES
    for n in names:
        if n not in (*NOT_OK_STATUSES, "ok"):
            raise argparse.ArgumentTypeError(f"{n!r} is not a run status (one of {', '.join(NOT_OK_STATUSES)}; "
                                             "or all)")  # fmt: skip
    return tuple(dict.fromkeys(n for n in names if n != "ok"))


def include_status_option(container) -> None:
    """--include-status STATUS[,STATUS...]|all: the runs of those statuses are counted where only ok runs are by
    default (compare, report, matrix run/merge, bisect), and marked in every table and verdict they count in."""
    container.add_argument(
        "--include-status",
        type=_statuses_arg,
        default=(),
        metavar="STATUS[,STATUS...]",
        help="also count runs with these statuses (comma-separated, or all), left out by default: "
        f"{', '.join(NOT_OK_STATUSES)}. Every row and verdict they count in is marked "
        "('includes 2 runs marked placement-broken'), in text, markdown, HTML and JSON",
    )


def ab_options(g, *, several: bool, runs: str, budget: str, old: tuple[str, ...] = ()):
    """--decide METRIC, --min-pairs, --max-pairs and --time-budget: what decides an A/B and what it may spend,
    the fields of the library's ABPlan by the same names (with --significance and --min-effect).
    ``several``: more than one --decide may be given (run; bisect takes one, and says so); ``runs``: what
    --min-pairs and --max-pairs count; ``budget``: what the time budget does. The defaults are None (so that
    one given where it means nothing is seen); :func:`ab_plan_of` fills in the plan's. ``old``: the
    spellings this command had, kept as hidden aliases. ``g``: the argument group they go in."""
    decide = g.add_argument(
        "--decide",
        action="append",
        metavar="METRIC",
        help=f"the metric that decides{' (repeatable)' if several else ' (one)'}; default {PLAN.decide[0]}: the "
        "workload's own figure, its per-vCPU-second twin where it has one (numa01: workload.gbps_per_vcpu_s; "
        "idle, which does no work: workload.elapsed_s; --workload-cmd has none: give --decide). The names are "
        "those of numalab compare, e.g. vmstat.hint_local_pct, "
        "tasks.convergence_s, workload.round_trips_per_s; a mechanism counter (vmstat.numa_pages_migrated) has "
        "no better and decides as 'changed'",
    )
    lo = g.add_argument("--min-pairs", type=int, metavar="N",
                        help=f"{runs} before the first look (default {PLAN.min_pairs}: fewer are never "
                        "judged)")  # fmt: skip
    hi = g.add_argument("--max-pairs", type=int, metavar="N",
                        help=f"at most N {runs} (default {PLAN.max_pairs}), then no verdict")  # fmt: skip
    tb = g.add_argument("--time-budget", type=float, metavar="SECONDS",
                        help=f"wall-time budget: {budget} (default none)")  # fmt: skip
    for spelling, action in (("--metric", decide), ("--min-repeats", lo), ("--max-repeats", hi), ("--budget", tb)):
        if spelling in old:
            alias(g, spelling, action)
    return g


def ab_plan_of(args: argparse.Namespace, least: int = 1) -> ABPlan:
    """The A/B plan the options ask for (lab.analysis.ab_plan): each of its fields from the option of the same
    name (--decide, --min-pairs, --max-pairs, --time-budget, --significance, --min-effect), the plan's default
    where one was not given or the command has none (bisect: --significance), checked (one-line errors naming
    the option; ``least``: the fewest --min-pairs the command can judge)."""
    return ABPlan.of(**{name: getattr(args, name, None) for name in ABPlan.names()}).check(least=least)


# --- concurrency ---------------------------------------------------------------------------------------------


def max_vms_option(container) -> None:
    """--max-vms N (matrix run, reproduce); --jobs stays a hidden alias."""
    a = container.add_argument(
        "--max-vms",
        type=int,
        metavar="N",
        help="at most N VMs at once (default: as many as fit the host's cores and memory)",
    )
    alias(container, "--jobs", a)


def max_vms_of(args: argparse.Namespace) -> int | None:
    if args.max_vms is not None and args.max_vms < 1:
        raise LabError(f"--max-vms: must be >= 1, got {args.max_vms}")
    return args.max_vms


def make_jobs_option(container) -> None:
    """--make-jobs/-j N (kernel build); --jobs stays a hidden alias."""
    a = container.add_argument("-j", "--make-jobs", type=int, default=0, metavar="N",
                               help="make -j N for the kernel build (default, and 0: the host's CPUs)")  # fmt: skip
    alias(container, "--jobs", a)


# --- output --------------------------------------------------------------------------------------------------


def output_path(option: str):
    """The type of an option that names a file numalab writes (--out, report's --kcidb): one printable line
    (lab.paths.printable_path), else argparse's one-line error naming the option."""

    def check(text: str) -> Path:
        try:
            printable_path(text, option)
        except LabError as err:
            raise argparse.ArgumentTypeError(str(err).removeprefix(f"{option} ")) from None
        return Path(text)

    return check


def out_option(container, metavar: str, help_: str, *, required: bool = False) -> None:
    container.add_argument("--out", type=output_path("--out"), metavar=metavar, required=required, help=help_)


def schema_command(sub, kind: str, files: str) -> None:
    """``numalab topo|matrix|workload schema``: the JSON Schema ``files`` are checked against, on stdout."""
    p = sub.add_parser(
        "schema",
        help=f"print the JSON Schema of {files} (for an editor: completion and checks as you type)",
        description=f"Print the JSON Schema numalab checks {files} against (lab/schemas/{kind}.schema.json), "
        "for an editor that completes and checks YAML with it (docs/topologies.md, 'Checking a spec as you write "
        "it').",
    )
    p.set_defaults(func=_print_schema, schema_kind=kind)


def _print_schema(args: argparse.Namespace) -> int:
    print(schemas.schema_path(args.schema_kind).read_text(), end="")
    return 0
