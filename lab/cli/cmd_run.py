"""``numalab run``: its flags become the library's RunOptions (lab.run.options), the only place that reads them.
Also the matrix's children's ``numalab run-options FILE``, kept out of the public command list."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lab.analysis.ab_plan import ABPlan
from lab.cli.cmd_topo import topology_ref
from lab.cli.common import Parser, debug, options_line, progress
from lab.cli.shared_options import (
    ab_options,
    ab_plan_of,
    balancing_options,
    connect_option,
    json_option,
    memory_options,
    min_effect_option,
    out_option,
    pinning_option,
    qemu_options,
    run_settings,
    scheduler_option,
    schedulers_of,
    significance_option,
    topology_options,
    tracing_options,
    workload_of,
    workload_options,
)
from lab.errors import LabError
from lab.paths import json_text
from lab.run.options import CHOICES, RunOptions


def _repeat_arg(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or auto, got {text!r}") from None


def run_options_from_args(args: argparse.Namespace):
    """``numalab run``'s flags -> the library's RunOptions (lab.run.options); the only place that reads them."""
    return RunOptions.of(
        topology=topology_ref(args),
        kernels=tuple(args.kernel or ("stock",)),
        schedulers=schedulers_of(args),
        workload=workload_of(args),
        workload_cmd=args.workload_cmd or "",
        workload_files=tuple(args.workload_file),
        repeat=1 if args.repeat == "auto" else args.repeat,
        out=args.out,
        runs_dir=args.runs_dir,
        **run_settings(args),
        backing=args.backing,
        prealloc=args.prealloc,
        pinning=args.pinning,
        timeout=args.timeout,
        boot_deadline=args.boot_deadline,
        guest_output_limit=args.guest_output_limit,
        test_fault=args.test_fault or "",
    )


def reject_without_auto(args: argparse.Namespace) -> None:
    """--decide, --min-pairs, --max-pairs and --time-budget mean nothing without --repeat auto: say so rather
    than ignore them."""
    for opt, value in (("--decide", args.decide), ("--min-pairs", args.min_pairs),
                       ("--max-pairs", args.max_pairs), ("--time-budget", args.time_budget)):  # fmt: skip
        if value is not None and value != []:
            raise LabError(f"{opt}: only with --repeat auto")


def cmd_run(args: argparse.Namespace) -> int:
    from lab.run.batch import run_options  # (on use: start-up time)

    opts = run_options_from_args(args)
    debug(f"run options (those not at their defaults): {options_line(opts)}")
    if args.repeat == "auto":
        from lab.run.auto_pairs import run_auto  # (on use: start-up time)

        plan = ab_plan_of(args)
        debug(f"--repeat auto: {plan.min_pairs}..{plan.max_pairs} pairs, time budget {plan.time_budget}, "
              f"deciding on {', '.join(plan.decide)} by {plan.significance}")  # fmt: skip
        return finish(run_auto(opts, plan, progress, json_out=args.json), json_out=args.json, report=True, plan=plan)
    reject_without_auto(args)
    # (the report's A/B tables read by --significance and --min-effect, as --repeat auto's are)
    reading = ABPlan.of(significance=args.significance, min_effect=args.min_effect)
    return finish(run_options(opts, progress, json_out=args.json), json_out=args.json, report=args.report,
                  plan=reading)  # fmt: skip


def cmd_run_options(args: argparse.Namespace) -> int:
    """A run from a RunOptions JSON file: how the matrix starts its children."""
    from lab.run.batch import run_options  # (on use: start-up time)

    return finish(run_options(RunOptions.load(args.file), progress, json_out=args.json), json_out=args.json)


def finish(batch, json_out: bool, report: bool = False, plan: ABPlan | None = None) -> int:
    """After a batch (lab.run.batch.Batch): its HTML report, for an A/B batch or with ``report`` (its A/B tables
    read by ``plan``: its significance rule and minimum effect, --min-effect; None: the defaults), and with
    ``json_out`` its manifests (--repeat auto: its verdict data) on stdout. Returns the exit status."""
    from lab.report.report_model import build_report  # (on use: start-up time)

    if batch.interrupted:
        return batch.status
    human = sys.stderr if json_out else sys.stdout
    if report or len(batch.sides) > 1:
        paths = build_report(batch.paths, batch.report_path(), plan)
        print(f"report: {paths.html}", file=human)
    if batch.verdict is not None:
        print(f"verdict data: {batch.report_path().parent / 'verdict.json'}", file=human)
    if json_out:
        data = batch.verdict if batch.verdict is not None else batch.manifests
        print(json_text(data[0] if isinstance(data, list) and len(data) == 1 else data, indent=2))
    return batch.status


def add_parser(sub) -> None:
    r = sub.add_parser(
        "run",
        help="boot a VM, run a workload with the NUMA tracepoints traced, write a run record",
        usage="numalab run [--topology NAME|FILE] [--kernel KERNEL [--kernel KERNEL]] [--workload NAME|FILE.yaml]\n"
        "                   [--duration SECONDS] [--repeat N|auto] [options]",
        description="Boot TOPOLOGY with KERNEL, run WORKLOAD while the kernel traces the "
        "NUMA-balancing tracepoints (trace.dat, for trace-cmd report and KernelShark), and write a run record "
        "(runs/<id>/ or --out). With --json, the manifest(s).",
    )
    topology_options(r)
    g = r.add_argument_group("kernel")
    g.add_argument(
        "--kernel",
        action="append",
        metavar="stock|BZIMAGE|NAME",
        help="stock (Debian's), a bzImage path, or a built kernel name (default stock); give it twice for an "
        "A/B run: the kernels alternate A B A B over the repeats and an HTML report compares them",
    )
    scheduler_option(g, several=True)
    add_run_arguments(r, repeat=1)
    r.set_defaults(func=cmd_run)


def add_run_arguments(r: argparse.ArgumentParser, *, repeat: int | str) -> None:
    """Everything ``run`` takes but its kernels (``numalab ab`` builds those): the workload, the settings, the
    repeats and the A/B budget (``repeat``: the default of --repeat), the VM, libvirt, TCG's instruments and
    the output, one argument group a function."""
    d = RunOptions()
    workload_options(r, one_off=True)
    balancing_options(r)
    tracing_options(r)
    _repeat_arguments(r, repeat)
    _qemu_arguments(r, d)
    _vm_arguments(r)
    _libvirt_arguments(r, d)
    _tcg_model_arguments(r)
    _output_arguments(r, d)


def _repeat_arguments(r: argparse.ArgumentParser, repeat: int | str) -> None:
    g = r.add_argument_group("repeats and A/B (--repeat auto: A B pairs until the verdict is significant or the "
                             "budget is spent)")  # fmt: skip
    g.add_argument(
        "--repeat",
        type=_repeat_arg,
        default=repeat,
        metavar="N|auto",
        help=f"run N times (default {repeat}); auto (A/B only): add A B pairs until the --decide metrics are "
        "significant or the budget (--max-pairs, --time-budget) is spent, then print verdict lines",
    )
    significance_option(g)
    min_effect_option(g)
    ab_options(g, several=True, runs="A B pairs",
               budget="no pair is started that would end after it (judged by the last pair's time)",
               old=("--min-repeats", "--max-repeats"))  # fmt: skip


def _qemu_arguments(r: argparse.ArgumentParser, d: RunOptions) -> None:
    g = qemu_options(r)
    g.add_argument(
        "--firmware",
        choices=CHOICES["firmware"],
        default=d.vm.firmware,
        help="guest firmware with --backend qemu: qboot (QEMU's minimal firmware for direct kernel boots, "
        "faster) or seabios (QEMU's default); auto: qboot when QEMU ships it (the default)",
    )


def _vm_arguments(r: argparse.ArgumentParser) -> None:
    g = r.add_argument_group("the VM on the host")
    memory_options(g)
    pinning_option(g)
    g.add_argument("--timeout", type=float, metavar="SECONDS", help="hard limit per VM (default: scaled to the run)")
    g.add_argument(
        "--boot-deadline",
        type=float,
        metavar="SECONDS",
        help="under TCG, stop and boot the VM once more if its init has not started within SECONDS (a stall of "
        "QEMU's TCG seen here; the stalled boot is kept in the manifest); default 60 + 2 per vCPU, 0: never",
    )
    g.add_argument(
        "--guest-output-limit",
        metavar="SIZE",
        help="most the guest may send back (its results share and what its result tars unpack to), e.g. 2G; a "
        "guest that sends more is stopped and recorded as limit-exceeded (default 1G, more when the trace "
        "buffers need it)",
    )
    g.add_argument("--test-fault", help=argparse.SUPPRESS)  # panic, hang, hostile=/host/path (the tests)


def _libvirt_arguments(r: argparse.ArgumentParser, d: RunOptions) -> None:
    g = r.add_argument_group("libvirt (docs/libvirt.md)")
    g.add_argument(
        "--backend",
        choices=CHOICES["backend"],
        default=d.vm.backend,
        help=f"(default {d.vm.backend}) qemu: start QEMU directly; libvirt: a libvirt daemon runs the VM",
    )
    connect_option(g)
    g.add_argument(
        "--pool-dir",
        metavar="DIR",
        help="with --backend libvirt: numalab's directory on the libvirt host "
        "(default /var/lib/libvirt/numalab for /system URIs)",
    )
    g.add_argument(
        "--no-upload",
        action="store_true",
        help="with --backend libvirt: never upload the kernel; the host must "
        "already hold it in --pool-dir (shared storage)",
    )


def _tcg_model_arguments(r: argparse.ArgumentParser) -> None:
    g = r.add_argument_group("memory accesses and remote latency under TCG (docs/throughput.md)")
    g.add_argument(
        "--access-matrix",
        action="store_true",
        help="count the guest's memory accesses by CPU node and memory node with a QEMU TCG plugin (TCG only; "
        "direct QEMU or a local libvirt daemon; slows the guest, so the run's throughput is never compared with "
        "plain runs)",
    )
    g.add_argument(
        "--access-sample",
        type=int,
        metavar="N",
        help="with --access-matrix: look up every Nth access of each "
        "vCPU (default 64; 1 counts every access, 20-50x slower)",
    )
    g.add_argument("--access-address-map", choices=CHOICES["access_address_map"][1:], help=argparse.SUPPRESS)
    g.add_argument(
        "--remote-latency",
        choices=CHOICES["remote_latency"],
        help="slit: charge each modelled cache miss to a remote node (ratio - 1) x L ns by holding the vCPU, "
        "ratio = SLIT distance / 10; under --clock virtual every miss ratio x L ns of guest time (needs --qemu "
        "charge); table: the ratios of the topology spec's latency_ratio: matrix (TCG plugin: TCG, direct QEMU; "
        "docs/throughput.md). Default off",
    )
    g.add_argument(
        "--remote-latency-ns",
        type=float,
        metavar="L",
        help="with --remote-latency: the local miss latency L in ns that the ratios scale "
        "(default 200: TCG's local miss here; under --clock virtual 100 ns of guest time; docs/throughput.md)",
    )
    g.add_argument(
        "--remote-bandwidth-gbs",
        type=float,
        metavar="B",
        help="with --remote-latency: the local bandwidth in GB/s at which a miss that continues a stream is charged "
        "(64 B / B x the pair's bandwidth ratio: the spec's bandwidth_ratio:, else the latency ratio) instead of "
        "its latency; 0: no stream detection (default 2; under --clock virtual 10; docs/throughput.md)",
    )
    g.add_argument(
        "--coherence",
        choices=("on", "off"),
        help="with --remote-latency: a line written on one node and then read or written on another is a transfer "
        "between them, charged the pair's miss latency (default off; exact under --clock virtual; "
        "docs/throughput.md)",
    )
    g.add_argument(
        "--cache-ways",
        type=int,
        metavar="N",
        help="with --remote-latency: the modelled per-vCPU cache's ways (1-64, a power of two; default 8, as m1 has: "
        "docs/throughput.md, the cache's ways)",
    )
    g.add_argument(
        "--coherence-mib",
        type=int,
        metavar="MIB",
        help="with --coherence on: what each LLC holds, in MiB (a node's caches are its LLCs' total); a line its "
        "owner has brought in that much since is memory's again, and the next node to use it pays no transfer "
        "(default 32, one LLC of a current server's node; 0: no limit; docs/throughput.md)",
    )


def _output_arguments(r: argparse.ArgumentParser, d: RunOptions) -> None:
    g = r.add_argument_group("output")
    out_option(g, "DIR", "run record directory (with --repeat: a parent of the runs)")
    g.add_argument(
        "--runs-dir", type=Path, default=d.runs_dir, metavar="DIR", help=f"where runs go (default ./{d.runs_dir})"
    )
    g.add_argument("--report", action="store_true", help="also write an HTML report (always done for A/B runs)")
    json_option(g)


def run_options_main(argv: list[str]) -> int:
    """``numalab run-options FILE [--json]``: how the matrix starts its children (not a public command)."""
    ro = Parser(prog="numalab run-options", description="Run what a RunOptions JSON file (lab.run.options) asks for.")
    ro.add_argument("file", type=Path, metavar="FILE", help="RunOptions as JSON")
    json_option(ro)
    return cmd_run_options(ro.parse_args(argv))
