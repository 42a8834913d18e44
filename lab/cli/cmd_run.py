"""``numalab run``: its flags become the library's RunOptions (lab.run.options), the only place that reads them.
Also the matrix's children's ``numalab run-options FILE``, kept out of the public command list."""

from __future__ import annotations

import argparse
from pathlib import Path

from lab.cli.cmd_topo import pinning_option, size_options, topology_ref
from lab.cli.common import QEMU_HELP, Parser, progress


def _repeat_arg(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or auto, got {text!r}") from None


def run_options_from_args(args: argparse.Namespace):
    """``numalab run``'s flags -> the library's RunOptions (lab.run.options); the only place that reads them."""
    from lab.run.options import RunOptions

    return RunOptions(
        topology=topology_ref(args),
        kernels=tuple(args.kernel or ("stock",)),
        workload=_workload_arg(args, RunOptions.workload),
        workload_cmd=args.workload_cmd or "",
        workload_files=tuple(args.workload_file),
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
        remote_latency=args.remote_latency,
        remote_latency_ns=args.remote_latency_ns,
    )


def _workload_arg(args: argparse.Namespace, d_workload: str) -> str:
    """--workload, or the default; not both --workload and --workload-cmd."""
    from lab.errors import LabError

    if args.workload and args.workload_cmd:
        raise LabError("--workload-cmd: not with --workload (the command is the workload)")
    return args.workload or d_workload


def cmd_run(args: argparse.Namespace) -> int:
    from lab.run.batch import run_options

    opts = run_options_from_args(args)
    if args.repeat == "auto":
        from lab.run.auto_pairs import run_auto

        return run_auto(opts, args, progress)
    from lab.cli.repeat_auto_args import reject_without_auto

    reject_without_auto(args)
    return run_options(opts, progress, json_out=args.json, report=args.report)


def cmd_run_options(args: argparse.Namespace) -> int:
    """A run from a RunOptions JSON file: how the matrix starts its children."""
    from lab.run.batch import run_options
    from lab.run.options import RunOptions

    return run_options(RunOptions.load(args.file), progress, json_out=args.json)


def add_parser(sub) -> None:
    from lab.analysis.numa import default_events
    from lab.guest.init_plan import TRACE_MODES
    from lab.guest.workloads import WORKLOADS
    from lab.placement.pinning import BACKINGS
    from lab.run.options import CHOICES, RunOptions

    d = RunOptions()  # the library's defaults are the command's: one place says them

    r = sub.add_parser(
        "run",
        help="boot a VM, run a workload with the NUMA tracepoints traced, write a run record",
        description="Boot TOPOLOGY with KERNEL, run WORKLOAD while the kernel traces the "
        "NUMA-balancing tracepoints (trace.dat, for trace-cmd report and KernelShark), and write a run record "
        "(runs/<id>/ or --out).",
    )
    r.add_argument(
        "--topology",
        default=d.topology.name,
        metavar="NAME|FILE",
        help=f"topology preset or spec (default {d.topology.name})",
    )
    size_options(r)
    r.add_argument(
        "--kernel",
        action="append",
        metavar="stock|BZIMAGE|NAME",
        help="stock (Debian's), a bzImage path, or a built kernel name (default stock); give it twice for an "
        "A/B run: the kernels alternate A B A B over the repeats and an HTML report compares them",
    )
    r.add_argument(
        "--workload",
        metavar="NAME|FILE.yaml",
        help=f"a built-in, one of: {', '.join(WORKLOADS)} (default {d.workload}); or your own workload file "
        "(command, files, tools, packages, results, metrics: docs/workloads.md, 'Your own workload')",
    )
    r.add_argument(
        "--workload-cmd",
        metavar="CMD",
        help="a one-off workload: this shell command runs in the guest's /workload ({cpus}, {nodes}, {mem_mib}, "
        "{duration} are filled in) and prints a 'NUMALAB_RESULT {json}' line; every number in it is a metric, "
        "higher being better (a workload file can say otherwise)",
    )
    r.add_argument(
        "--workload-file",
        action="append",
        default=[],
        metavar="PATH",
        help="with --workload-cmd: a host file (a static program, a script) copied into the guest's /workload "
        "(repeatable)",
    )
    r.add_argument(
        "--duration",
        type=float,
        default=d.duration,
        metavar="SECONDS",
        help=f"workload duration (default {d.duration:g})",
    )
    r.add_argument(
        "--repeat",
        type=_repeat_arg,
        default=1,
        metavar="N|auto",
        help="run N times (default 1); auto (A/B only): add A B pairs until the --decide metrics are significant "
        "or the budget (--max-repeats, --time-budget) is spent, then print verdict lines",
    )
    from lab.cli.repeat_auto_args import add_auto_options

    add_auto_options(r)
    r.add_argument("--out", type=Path, metavar="DIR", help="run record directory (with --repeat: a parent of the runs)")
    r.add_argument(
        "--runs-dir", type=Path, default=d.runs_dir, metavar="DIR", help=f"where runs go (default ./{d.runs_dir})"
    )
    r.add_argument(
        "--numa-balancing",
        choices=CHOICES["numa_balancing"],
        default=d.numa_balancing,
        help=f"kernel.numa_balancing in the guest (default {d.numa_balancing}); tiering is mode 2 (promotion from "
        "lower memory tiers) with /sys/kernel/mm/numa/demotion_enabled on",
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
        "--trace-buffer-kb",
        type=int,
        default=d.trace_buffer_kb,
        metavar="KB",
        help=f"per-CPU trace buffer (default {d.trace_buffer_kb})",
    )
    r.add_argument("--no-trace", action="store_true", help="no tracing: no trace events, no trace.dat")
    r.add_argument(
        "--trace-mode",
        choices=TRACE_MODES,
        default=d.trace_mode,
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
    r.add_argument("--backing", choices=BACKINGS, default=d.backing, help=f"guest memory backing (default {d.backing})")
    r.add_argument("--prealloc", action="store_true", help="preallocate guest memory")
    pinning_option(r)
    r.add_argument(
        "--firmware",
        choices=CHOICES["firmware"],
        default=d.firmware,
        help="guest firmware with --backend qemu: qboot (QEMU's minimal firmware for direct kernel boots, "
        "faster) or seabios (QEMU's default); auto: qboot when QEMU ships it (the default)",
    )
    r.add_argument(
        "--accel",
        choices=CHOICES["accel"],
        default=d.accel,
        help=f"accelerator (default {d.accel}); auto: a real KVM boot probed on the host that runs the VM (cached; TCG "
        "if KVM fails)",
    )
    r.add_argument(
        "--clock",
        choices=CHOICES["clock"],
        default=d.clock,
        help=f"the guest's clock under TCG (default {d.clock}): host, or virtual: it advances with the instructions "
        "the vCPUs execute (QEMU's -icount, 1 G a guest second shared by the vCPUs; QEMU 10: --qemu backports), so "
        "host load cannot change what the guest measures",
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
        default=d.backend,
        help=f"(default {d.backend}) qemu: start QEMU directly; libvirt: a libvirt daemon runs the VM (docs: libvirt)",
    )
    r.add_argument("--qemu", metavar="PATH", help=QEMU_HELP)
    r.add_argument(
        "--connect",
        metavar="URI",
        help="libvirt URI for --backend libvirt (default qemu:///system), e.g. qemu+ssh://user@host/system",
    )
    r.add_argument(
        "--pool-dir",
        metavar="DIR",
        help="with --backend libvirt: numalab's directory on the libvirt host "
        "(default /var/lib/libvirt/numalab for /system URIs)",
    )
    r.add_argument(
        "--no-upload",
        action="store_true",
        help="with --backend libvirt: never upload the kernel; the host must "
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
        "--access-sample",
        type=int,
        metavar="N",
        help="with --access-matrix: look up every Nth access of each "
        "vCPU (default 64; 1 counts every access, 20-50x slower)",
    )
    r.add_argument("--access-address-map", choices=CHOICES["access_address_map"][1:], help=argparse.SUPPRESS)
    r.add_argument(
        "--remote-latency",
        choices=CHOICES["remote_latency"],
        default="off",
        help="slit: charge each modelled cache miss to a remote node (ratio - 1) x L ns by holding the vCPU, "
        "ratio = SLIT distance / 10; under --clock virtual every miss ratio x L ns of guest time (needs --qemu "
        "charge); table: the ratios of the topology spec's latency_ratio: matrix (TCG plugin: TCG, direct QEMU; "
        "docs/throughput.md). Default off",
    )
    r.add_argument(
        "--remote-latency-ns",
        type=float,
        metavar="L",
        help="with --remote-latency: the local miss latency L in ns that the ratios scale "
        "(default 200: TCG's local miss here; under --clock virtual 100 ns of guest time; docs/throughput.md)",
    )
    r.set_defaults(func=cmd_run)


def run_options_main(argv: list[str]) -> int:
    """``numalab run-options FILE [--json]``: how the matrix starts its children (not a public command)."""
    ro = Parser(prog="numalab run-options", description="Run what a RunOptions JSON file (lab.run.options) asks for.")
    ro.add_argument("file", type=Path, metavar="FILE", help="RunOptions as JSON")
    ro.add_argument("--json", action="store_true", help="print the manifest(s) as JSON on stdout")
    return cmd_run_options(ro.parse_args(argv))
