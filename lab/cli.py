"""The ``numalab`` command: a thin front end over the lab library."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lab import __version__
from lab.errors import LabError
from lab.paths import json_text
from lab.topo_cli import add_topo_commands, pinning_option, size_options, topology_ref

# --- doctor -----------------------------------------------------------------


QEMU_HELP = (
    "the QEMU to run VMs with (--backend qemu): system (qemu-system-x86_64 on PATH), backports (the QEMU 10 "
    "that make setup-qemu10 unpacked) or a binary's path; default $NUMALAB_QEMU, else system. Its version and "
    "firmware come from the binary itself"
)


def cmd_doctor(args: argparse.Namespace) -> int:
    from lab.host.doctor import doctor_report, print_doctor

    if args.clean and not args.connect:
        raise LabError("--clean: needs --connect URI (the libvirt host to clean)")
    report = doctor_report(
        refresh=args.refresh, progress=None if args.json else _progress, connect=args.connect, clean=args.clean,
        qemu=args.qemu or "",
    )
    if args.json:
        print(json_text(report, indent=2))
    else:
        print_doctor(report)
    return 0


# --- run --------------------------------------------------------------------


def _progress(msg: str) -> None:
    print(f"numalab: {msg}", file=sys.stderr, flush=True)


def _repeat_arg(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or auto, got {text!r}") from None


def run_options_from_args(args: argparse.Namespace):
    """``numalab run``'s flags -> the library's RunOptions (lab.run_options); the only place that reads them."""
    from lab.run_options import RunOptions

    return RunOptions(
        topology=topology_ref(args),
        kernels=tuple(args.kernel or ("stock",)),
        workload=args.workload,
        duration=args.duration,
        repeat=1 if args.repeat == "auto" else args.repeat,
        out=args.out,
        runs_dir=args.runs_dir,
        numa_balancing=args.numa_balancing,
        knobs=tuple(args.knob),
        kernel_default_knobs=args.kernel_default_knobs,
        events=tuple(args.event),
        trace_buffer_kb=args.trace_buffer_kb,
        no_trace=args.no_trace,
        trace_mode=args.trace_mode,
        append=tuple(args.append),
        backing=args.backing,
        prealloc=args.prealloc,
        pinning=args.pinning,
        firmware=args.firmware,
        accel=args.accel,
        clock=args.clock,
        timeout=args.timeout,
        boot_deadline=args.boot_deadline,
        guest_output_limit=args.guest_output_limit,
        test_fault=args.test_fault or "",
        backend=args.backend,
        qemu=args.qemu or "",
        connect=args.connect,
        pool_dir=args.pool_dir,
        no_upload=args.no_upload,
        access_matrix=args.access_matrix,
        access_sample=args.access_sample,
        access_address_map=args.access_address_map or "",
    )


def cmd_run(args: argparse.Namespace) -> int:
    from lab.runner import run_options

    opts = run_options_from_args(args)
    if args.repeat == "auto":
        from lab.matrix.ab_auto import run_auto

        return run_auto(opts, args, _progress)
    from lab.analysis.auto_options import reject_without_auto

    reject_without_auto(args)
    return run_options(opts, _progress, json_out=args.json, report=args.report)


def cmd_run_options(args: argparse.Namespace) -> int:
    """A run from a RunOptions JSON file: how the matrix starts its children."""
    from lab.run_options import RunOptions
    from lab.runner import run_options

    return run_options(RunOptions.load(args.file), _progress, json_out=args.json)


def cmd_report(args: argparse.Namespace) -> int:
    from lab.report.build import build_report

    out = args.out or (args.runs[0] / "report.html" if len(args.runs) == 1 else Path("report.html"))
    paths = build_report(args.runs, out, args.significance, include_incomplete=args.include_incomplete)
    damaged = [(r["path"], p) for r in paths.data["runs"] for p in r["metrics"].get("trace_problems", [])]
    for run, problem in damaged:
        print(f"numalab: warning: {run}: {problem} (marked in the report)", file=sys.stderr)
    print(f"report: {paths.html}")
    print(f"data:   {paths.json}")
    print(f"text:   {paths.markdown}")
    for p in paths.perfetto:
        print(f"perfetto: {p}")
    return 1 if damaged else 0


def cmd_compare(args: argparse.Namespace) -> int:
    from lab.analysis import compare as cmp
    from lab.analysis.record import RunRecord

    base = [RunRecord.load(d) for d in args.baseline]
    new = [RunRecord.load(d) for d in args.new]
    c = cmp.compare_runs(base, new, args.significance, include_incomplete=args.include_incomplete)
    render = {"text": cmp.to_text, "md": cmp.to_markdown, "html": cmp.to_html, "json": cmp.to_json}[args.format]
    sys.stdout.write(render(c))
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors on one line like every other error (exit 2)."""

    def error(self, message: str):  # type: ignore[override]
        print(f"numalab: error: {' '.join(message.split())} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    from lab.analysis.numa import default_events
    from lab.guest.plan import TRACE_MODES
    from lab.guest.workloads import WORKLOADS
    from lab.placement.plan import BACKINGS
    from lab.run_options import CHOICES

    p = _Parser(
        prog="numalab",
        description="QEMU/KVM lab for Linux NUMA-balancing and topology work: emulated NUMA machines, "
        "patched kernels, traced workloads.",
    )
    p.add_argument("--version", action="version", version=f"numalab {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    add_topo_commands(sub)

    d = sub.add_parser(
        "doctor",
        help="check the host: accelerator (real KVM probe), tools, NUMA inventory",
        description="Probe KVM with a real guest boot (falls back to TCG), list tool versions "
        "and the host's NUMA inventory. The KVM verdict is cached per host and host kernel.",
    )
    d.add_argument("--json", action="store_true", help="machine-readable output")
    d.add_argument("--refresh", action="store_true", help="probe again instead of using the cached verdict")
    d.add_argument("--qemu", metavar="PATH", help=QEMU_HELP)
    d.add_argument("--connect", metavar="URI", help="also check this libvirt host and list leftover numalab-* domains")
    d.add_argument("--clean", action="store_true", help="with --connect: destroy and undefine the leftovers")
    d.set_defaults(func=cmd_doctor)

    r = sub.add_parser(
        "run",
        help="boot a VM, run a workload with the NUMA tracepoints traced, write a run record",
        description="Boot TOPOLOGY with KERNEL, run WORKLOAD while the kernel traces the "
        "NUMA-balancing tracepoints (trace.dat, for trace-cmd report and KernelShark), and write a run record "
        "(runs/<id>/ or --out).",
    )
    r.add_argument("--topology", default="ring-4", metavar="NAME|FILE", help="topology preset or spec (default ring-4)")
    size_options(r)
    r.add_argument(
        "--kernel",
        action="append",
        metavar="stock|BZIMAGE|NAME",
        help="stock (Debian's), a bzImage path, or a built kernel name (default stock); give it twice for an "
        "A/B run: the kernels alternate A B A B over the repeats and an HTML report compares them",
    )
    r.add_argument("--workload", default="numa01", help=f"one of: {', '.join(WORKLOADS)} (default numa01)")
    r.add_argument("--duration", type=float, default=20.0, metavar="SECONDS", help="workload duration (default 20)")
    r.add_argument(
        "--repeat",
        type=_repeat_arg,
        default=1,
        metavar="N|auto",
        help="run N times (default 1); auto (A/B only): add A B pairs until the --decide metrics are significant "
        "or the budget (--max-repeats, --time-budget) is spent, then print verdict lines",
    )
    from lab.analysis.auto_options import add_auto_options

    add_auto_options(r)
    r.add_argument("--out", type=Path, metavar="DIR", help="run record directory (with --repeat: a parent of the runs)")
    r.add_argument("--runs-dir", type=Path, default=Path("runs"), metavar="DIR", help="where runs go (default ./runs)")
    r.add_argument(
        "--numa-balancing",
        choices=CHOICES["numa_balancing"],
        default="on",
        help="kernel.numa_balancing in the guest (default on); tiering is mode 2 (promotion from lower memory "
        "tiers) with /sys/kernel/mm/numa/demotion_enabled on",
    )
    r.add_argument(
        "--knob",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a debugfs sched/numa_balancing knob, e.g. scan_delay_ms=100 (repeatable)",
    )
    r.add_argument(
        "--kernel-default-knobs",
        action="store_true",
        help="do not apply the short-scan knobs numalab uses by default for short runs",
    )
    r.add_argument(
        "--event",
        action="append",
        default=[],
        metavar="SYS:EVENT",
        help=f"extra trace event (default set: {', '.join(e.full for e in default_events())})",
    )
    r.add_argument(
        "--trace-buffer-kb", type=int, default=4096, metavar="KB", help="per-CPU trace buffer (default 4096)"
    )
    r.add_argument("--no-trace", action="store_true", help="no tracing: no trace events, no trace.dat")
    r.add_argument(
        "--trace-mode",
        choices=TRACE_MODES,
        default="raw",
        help="raw: the kernel's trace buffers only while the workload runs (no recorder tasks in the guest), "
        "copied out raw and made into trace.dat on the host with trace-cmd restore (default); extract: the "
        "same, but trace-cmd extract runs in the guest (over a second longer under TCG); record: the workload "
        "runs under trace-cmd record",
    )
    r.add_argument(
        "--append",
        action="append",
        default=[],
        metavar="ARGS",
        help="extra guest kernel command-line arguments, e.g. --append 'initcall_debug numa_balancing=disable' "
        "(repeatable; recorded in cmdline.txt)",
    )
    r.add_argument("--backing", choices=BACKINGS, default="ram", help="guest memory backing (default ram)")
    r.add_argument("--prealloc", action="store_true", help="preallocate guest memory")
    pinning_option(r)
    r.add_argument(
        "--firmware",
        choices=CHOICES["firmware"],
        default="auto",
        help="guest firmware with --backend qemu: qboot (QEMU's minimal firmware for direct kernel boots, "
        "faster) or seabios (QEMU's default); auto: qboot when QEMU ships it (the default)",
    )
    r.add_argument(
        "--accel",
        choices=CHOICES["accel"],
        default="auto",
        help="accelerator; auto: a real KVM boot probed on the host that runs the VM (cached; TCG if KVM fails)",
    )
    r.add_argument(
        "--clock",
        choices=CHOICES["clock"],
        default="host",
        help="the guest's clock under TCG: host (default), or virtual: it advances with the instructions the vCPUs "
        "execute (QEMU's -icount, 1 G a guest second shared by the vCPUs; QEMU 10: --qemu backports), so host load "
        "cannot change what the guest measures",
    )
    r.add_argument("--timeout", type=float, metavar="SECONDS", help="hard limit per VM (default: scaled to the run)")
    r.add_argument(
        "--boot-deadline",
        type=float,
        metavar="SECONDS",
        help="under TCG, stop and boot the VM once more if its init has not started within SECONDS (a stall of "
        "QEMU's TCG seen here; the stalled boot is kept in the manifest); default 60 + 2 per vCPU, 0: never",
    )
    r.add_argument("--json", action="store_true", help="print the manifest(s) as JSON on stdout")
    r.add_argument("--report", action="store_true", help="also write an HTML report (always done for A/B runs)")
    r.add_argument(
        "--guest-output-limit",
        metavar="SIZE",
        help="most the guest may send back (its results share and what its result tars unpack to), e.g. 2G; a "
        "guest that sends more is stopped and recorded as limit-exceeded (default 1G, more when the trace "
        "buffers need it)",
    )
    r.add_argument("--test-fault", help=argparse.SUPPRESS)  # panic, hang, hostile=/host/path (the tests)
    r.add_argument(
        "--backend",
        choices=CHOICES["backend"],
        default="qemu",
        help="qemu: start QEMU directly (default); libvirt: a libvirt daemon runs the VM (README: libvirt)",
    )
    r.add_argument("--qemu", metavar="PATH", help=QEMU_HELP)
    r.add_argument(
        "--connect", metavar="URI", help="libvirt URI for --backend libvirt (default qemu:///system), e.g. "
        "qemu+ssh://user@host/system",
    )
    r.add_argument(
        "--pool-dir", metavar="DIR", help="with --backend libvirt: numalab's directory on the libvirt host "
        "(default /var/lib/libvirt/numalab for /system URIs)",
    )
    r.add_argument(
        "--no-upload", action="store_true", help="with --backend libvirt: never upload the kernel; the host must "
        "already hold it in --pool-dir (shared storage)",
    )
    r.add_argument(
        "--access-matrix",
        action="store_true",
        help="count the guest's memory accesses by CPU node and memory node with a QEMU TCG plugin (TCG only; "
        "direct QEMU or a local libvirt daemon; slows the guest, so the run's throughput is never compared with "
        "plain runs)",
    )
    r.add_argument(
        "--access-sample", type=int, metavar="N", help="with --access-matrix: look up every Nth access of each "
        "vCPU (default 64; 1 counts every access, 20-50x slower)",
    )
    r.add_argument("--access-address-map", choices=CHOICES["access_address_map"][1:], help=argparse.SUPPRESS)
    r.set_defaults(func=cmd_run)
    # (no help=: not listed) the matrix's children: numalab run-options OUT/logs/<run>.options.json
    ro = sub.add_parser("run-options", description="Run what a RunOptions JSON file (lab.run_options) asks for.")
    ro.add_argument("file", type=Path, metavar="FILE", help="RunOptions as JSON")
    ro.add_argument("--json", action="store_true", help="print the manifest(s) as JSON on stdout")
    ro.set_defaults(func=cmd_run_options)
    from lab.matrix.cli import add_matrix_commands

    add_matrix_commands(sub)
    from lab.kernel.cli import add_kernel_commands

    add_kernel_commands(sub)
    from lab.matrix.reproduce_cli import add_reproduce_command

    add_reproduce_command(sub)

    rep = sub.add_parser(
        "report",
        help="HTML/markdown/JSON report (and Perfetto timelines) from run records",
        description="Analyse run records (trace.dat, vmstat, workload output) and write a self-contained HTML "
        "report plus OUT.json, OUT.md and OUT.perfetto/<run>.json. Runs are grouped by kernel and NUMA-balancing "
        "settings; every group is compared against the first one given.",
    )
    rep.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="run record directories")
    rep.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="HTML file (default RUN_DIR/report.html for one run, ./report.html for several)",
    )
    rep.add_argument(
        "--significance",
        choices=("welch", "ci-overlap"),
        default="welch",
        help="significance rule for A/B tables: welch (Welch's t-test, p<0.05; the default) or ci-overlap "
        "(mmtests' rule, |dmean| > 1.96*(sd_base+sd_new))",
    )
    rep.add_argument(
        "--include-incomplete",
        action="store_true",
        help="count runs whose trace lost more than 1%% of its records in the A/B tables (left out by default)",
    )
    rep.set_defaults(func=cmd_report)

    cmp_p = sub.add_parser(
        "compare",
        help="A/B table of two sets of runs (mmtests compare-kernels style)",
        description="Compare runs: Min, Amean/Hmean, Stddev, CoeffVar, Max per metric, %%diff signed so that + is "
        "better, and a significance mark (not judged with fewer than 3 runs per side).",
    )
    cmp_p.add_argument("--baseline", nargs="+", type=Path, required=True, metavar="RUN_DIR", help="baseline runs")
    cmp_p.add_argument("--new", nargs="+", type=Path, required=True, metavar="RUN_DIR", help="new runs")
    cmp_p.add_argument("--format", choices=("text", "md", "html", "json"), default="text", help="output format")
    cmp_p.add_argument(
        "--significance",
        choices=("welch", "ci-overlap"),
        default="welch",
        help="welch: Welch's t-test, two-sided, p<0.05 (default); ci-overlap: mmtests' rule, "
        "|dmean| > 1.96*(sd_base+sd_new) with sd the runs' standard deviation",
    )
    cmp_p.add_argument(
        "--include-incomplete",
        action="store_true",
        help="count runs whose trace lost more than 1%% of its records (left out by default, with a note)",
    )
    cmp_p.set_defaults(func=cmd_compare)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except LabError as err:
        print(f"numalab: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("numalab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as err:  # a file numalab had to read or write; the library names it where it can
        where = f"{err.filename}: " if err.filename else ""
        print(f"numalab: error: {where}{err.strerror or err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
