"""The ``numalab`` command: a thin front end over the lab library."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lab import __version__
from lab.errors import LabError


def _topology_ref(args: argparse.Namespace):
    """--topology/TOPOLOGY and the size options (_size_options)."""
    from lab.topology.spec import TopologyRef

    return TopologyRef(args.topology, args.cpus_per_node, args.mem_per_node, args.threads)


def _topology(args: argparse.Namespace):
    return _topology_ref(args).load()


def _size_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cpus-per-node", type=int, metavar="N", help="vCPUs in every node that has CPUs")
    p.add_argument("--mem-per-node", metavar="SIZE", help="memory of every node, e.g. 512M or 1G")
    p.add_argument("--threads", type=int, metavar="N", help="SMT threads per core")


def _pinning_option(p: argparse.ArgumentParser) -> None:
    from lab.placement.plan import PINNINGS

    p.add_argument(
        "--pinning",
        choices=PINNINGS,
        default="auto",
        help="vCPU pinning: cpu (each vCPU on one host CPU), node (on its host node's CPUs), auto (cpu when "
        "every vCPU gets a CPU of its own, else node; the default). Host CPUs are those numalab may run on: "
        "taskset -c LIST numalab run ... keeps a run on LIST",
    )


def _placement_for_emitters(topo, args):
    from lab.placement.host_inventory import read_inventory
    from lab.placement.plan import Backing, plan_placement

    # Printing a VM definition does not need it to fit on this host.
    return plan_placement(
        topo, read_inventory(), Backing(args.backing, args.prealloc), enforce_fit=False, pinning=args.pinning
    )


def _boot_for_emitters(args):
    from lab.guest.plan import KERNEL_CMDLINE
    from lab.vm.qemu_argv import BootSpec

    return BootSpec(
        kernel=args.kernel_path,
        initrd=args.initrd_path,
        cmdline=KERNEL_CMDLINE,
        results_dir=args.results_dir,
        console_log=args.console_log,
        accel=args.accel,
        start_paused=False,
    )


# --- topo -------------------------------------------------------------------


def cmd_topo_list(args: argparse.Namespace) -> int:
    from lab.topology.kernel_view import predict
    from lab.topology.spec import load_topology, preset_names

    rows = []
    for name in preset_names():
        t = load_topology(name)
        v = predict(t)
        rows.append(
            {
                "name": name,
                "nodes": t.n_nodes,
                "cpus": t.total_cpus,
                "memory_mib": t.total_memory_mib,
                "distances": v["distinct_distances"],
                "type": v["type"],
                "description": t.description,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'NAME':<15}{'NODES':>6}{'CPUS':>6}{'MEM':>7}  {'DISTANCES':<18}{'TYPE':<20}DESCRIPTION")
    for r in rows:
        dists = "/".join(map(str, r["distances"]))
        print(
            f"{r['name']:<15}{r['nodes']:>6}{r['cpus']:>6}{r['memory_mib']:>6}M  {dists:<18}{r['type']:<20}"
            f"{r['description']}"
        )
    return 0


def cmd_topo_show(args: argparse.Namespace) -> int:
    from lab.topology.kernel_view import predict
    from lab.topology.render import distance_table, group_lines, link_picture

    topo = _topology(args)
    view = predict(topo)
    if args.json:
        print(json.dumps(topo.to_dict() | {"kernel_view": view}, indent=2))
        return 0
    from lab.topology.kernel_warnings import predicted_warnings

    print(f"{topo.name}: {topo.description}" if topo.description else topo.name)
    print(f"  {topo.n_nodes} nodes, {topo.total_cpus} vCPUs (threads/core {topo.threads}), {topo.total_memory_mib} MiB")
    if topo.extra.get("why"):
        print(f"  why: {topo.extra['why']}")
    print()
    print(distance_table(topo))
    print()
    print(link_picture(topo))
    print()
    print(
        f"kernel view: {view['type']}, {view['levels']} distance levels "
        f"({'/'.join(map(str, view['distinct_distances']))}), {view['numa_levels']} NUMA sched-domain levels"
    )
    if view["cpuless_nodes"]:
        print(f"  CPU-less nodes {view['cpuless_nodes']} take no part in the scheduler's levels")
    for lv in view["level_detail"]:
        beyond = (
            "  beyond RECLAIM_DISTANCE: no wake-affine/fork/exec balancing" if lv["beyond_reclaim_distance"] else ""
        )
        print(f"  level {lv['level']} {lv['name']:<4} distance {lv['distance']}{beyond}")
        for node, span in lv["span_nodes"].items():
            hidden = "" if lv["visible"][node] else "  (degenerate: same span as the level below)"
            print(f"    node {node}: nodes {','.join(map(str, span))}  cpus {lv['span_cpus'][node]}{hidden}")
    print("\n".join(group_lines(view)))
    for w in predicted_warnings(topo):
        print(f"warning: {w}")
    if "memory_tiers" in view:
        from lab.topology.tiers import describe

        print()
        print(describe(view["memory_tiers"]))
    return 0


def cmd_topo_check(args: argparse.Namespace) -> int:
    from lab.topology.kernel_view import predict
    from lab.topology.kernel_warnings import predicted_warnings

    topo = _topology(args)
    v = predict(topo)
    print(
        f"{topo.source or topo.name}: ok ({topo.n_nodes} nodes, {topo.total_cpus} vCPUs, "
        f"{topo.total_memory_mib} MiB, {v['type']})"
    )
    for w in predicted_warnings(topo):
        print(f"numalab: warning: {topo.source or topo.name}: {w}", file=sys.stderr)
    return 0


def cmd_topo_qemu_args(args: argparse.Namespace) -> int:
    import shlex

    from lab.vm.qemu_argv import qemu_argv, topology_args

    topo = _topology(args)
    placement = _placement_for_emitters(topo, args)
    argv = (
        topology_args(topo, placement) if args.topology_only else qemu_argv(topo, placement, _boot_for_emitters(args))
    )
    print(json.dumps(argv) if args.json else shlex.join(argv))
    return 0


def cmd_topo_libvirt_xml(args: argparse.Namespace) -> int:
    from lab.vm.libvirt_xml import domain_xml

    topo = _topology(args)
    placement = _placement_for_emitters(topo, args)
    sys.stdout.write(domain_xml(topo, placement, _boot_for_emitters(args), "kvm" if args.accel == "kvm" else "qemu"))
    return 0


def cmd_topo_vng_args(args: argparse.Namespace) -> int:
    import shlex

    from lab.vm.vng_args import vng_args

    topo = _topology(args)
    opts, notes = vng_args(topo, None if args.no_pin else _placement_for_emitters(topo, args))
    if args.json:
        print(json.dumps({"args": opts, "notes": notes}))
    else:
        print(shlex.join(opts))
        for note in notes:
            print(f"numalab: note: {note}", file=sys.stderr)
    return 0


def cmd_topo_import(args: argparse.Namespace) -> int:
    """numactl -H output (FILE or -) or a sysfs node directory -> a spec file (stdout or --out)."""
    from lab.paths import write_text_atomic
    from lab.topology.importer import import_spec

    topo, text = import_spec(
        args.file, args.from_sysfs, args.name, args.cpus_per_node, args.mem_per_node, args.slow_cpuless
    )
    if args.out:
        out = Path(args.out)
        if out.is_dir():
            raise LabError(f"--out {out}: is a directory")
        write_text_atomic(out, text)
        print(f"{out}: {topo.n_nodes} nodes, {topo.total_cpus} vCPUs, {topo.total_memory_mib} MiB", file=sys.stderr)
    elif args.json:
        print(json.dumps({"spec": text, "topology": topo.to_dict()}, indent=2))
    else:
        sys.stdout.write(text)
    return 0


# --- doctor -----------------------------------------------------------------


def cmd_doctor(args: argparse.Namespace) -> int:
    from lab.host.doctor import doctor_report, print_doctor

    if args.clean and not args.connect:
        raise LabError("--clean: needs --connect URI (the libvirt host to clean)")
    report = doctor_report(
        refresh=args.refresh, progress=None if args.json else _progress, connect=args.connect, clean=args.clean
    )
    if args.json:
        print(json.dumps(report, indent=2))
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
        topology=_topology_ref(args),
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
        timeout=args.timeout,
        guest_output_limit=args.guest_output_limit,
        test_fault=args.test_fault or "",
        backend=args.backend,
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

    topo = sub.add_parser(
        "topo",
        help="topologies: list, show, check, emit QEMU args or libvirt XML",
        description="Work with NUMA topology specs (presets in topologies/ or YAML files).",
    )
    tsub = topo.add_subparsers(dest="topo_command", metavar="SUBCOMMAND", required=True)
    t = tsub.add_parser("list", help="list the presets", description="List the topology presets.")
    t.add_argument("--json", action="store_true", help="machine-readable output")
    t.set_defaults(func=cmd_topo_list)

    def topo_cmd(name: str, func, help_: str):
        q = tsub.add_parser(name, help=help_, description=help_)
        q.add_argument("topology", metavar="NAME|FILE", help="a preset name (numalab topo list) or a YAML spec")
        _size_options(q)
        q.set_defaults(func=func)
        return q

    q = topo_cmd("show", cmd_topo_show, "show the SLIT, the links and the kernel's predicted NUMA view")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    topo_cmd("check", cmd_topo_check, "validate a spec (exit 0 if valid, one-line error otherwise)")
    for name, func, help_ in (
        ("qemu-args", cmd_topo_qemu_args, "print the QEMU command line for a topology"),
        ("libvirt-xml", cmd_topo_libvirt_xml, "print the libvirt domain XML for a topology"),
    ):
        q = topo_cmd(name, func, help_)
        q.add_argument("--backing", choices=BACKINGS, default="ram", help="guest memory backing (default ram)")
        q.add_argument("--prealloc", action="store_true", help="preallocate guest memory")
        _pinning_option(q)
        q.add_argument("--accel", choices=("kvm", "tcg"), default="tcg", help="accelerator (default tcg)")
        q.add_argument("--kernel-path", default="/path/to/bzImage", help="kernel image to put in the output")
        q.add_argument("--initrd-path", default="/path/to/initrd.cpio", help="initrd to put in the output")
        q.add_argument("--results-dir", default="/path/to/results", help="results share directory")
        q.add_argument("--console-log", default="/path/to/console.log", help="serial console log file")
        if name == "qemu-args":
            q.add_argument("--topology-only", action="store_true", help="only -m/-smp/-object/-numa")
            q.add_argument("--json", action="store_true", help="print the argv as a JSON list")

    q = topo_cmd("vng-args", cmd_topo_vng_args, "print the virtme-ng (vng) options for a topology")
    q.add_argument("--backing", choices=BACKINGS, default="ram", help=argparse.SUPPRESS)
    q.add_argument("--prealloc", action="store_true", help=argparse.SUPPRESS)
    _pinning_option(q)
    q.add_argument("--no-pin", action="store_true", help="leave out --pin (vCPU pinning)")
    q.add_argument("--json", action="store_true", help="print {args, notes} as JSON")
    q = tsub.add_parser(
        "import",
        help="a real machine's topology (numactl -H output or sysfs) as a spec",
        description="Read numactl -H output (FILE, or - for stdin; a pasted mail works) or a host's "
        "/sys/devices/system/node (--from-sysfs [ROOT]) and write a spec, scaled to --cpus-per-node and "
        "--mem-per-node (CPU-less nodes stay CPU-less); the real sizes are kept in its description.",
    )
    q.add_argument("file", nargs="?", metavar="FILE|-", help="numactl -H output")
    q.add_argument(
        "--from-sysfs",
        nargs="?",
        const="/sys/devices/system/node",
        metavar="ROOT",
        help="read a sysfs node directory instead (default /sys/devices/system/node)",
    )
    q.add_argument("--name", help="the spec's name (default: the file's name, or host)")
    q.add_argument(
        "--cpus-per-node", type=int, default=2, metavar="N", help="vCPUs of every node with CPUs (default 2)"
    )
    q.add_argument("--mem-per-node", default="512M", metavar="SIZE", help="memory of every node (default 512M)")
    q.add_argument(
        "--slow-cpuless",
        action="store_true",
        help="make the CPU-less nodes a slower memory tier (dax kmem, like CXL memory; see README 'Memory tiers')",
    )
    q.add_argument("--out", metavar="FILE", help="write the spec here (default: standard output)")
    q.add_argument("--json", action="store_true", help="print the spec and the topology as JSON")
    q.set_defaults(func=cmd_topo_import)

    d = sub.add_parser(
        "doctor",
        help="check the host: accelerator (real KVM probe), tools, NUMA inventory",
        description="Probe KVM with a real guest boot (falls back to TCG), list tool versions "
        "and the host's NUMA inventory. The KVM verdict is cached per host and host kernel.",
    )
    d.add_argument("--json", action="store_true", help="machine-readable output")
    d.add_argument("--refresh", action="store_true", help="probe again instead of using the cached verdict")
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
    _size_options(r)
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
    _pinning_option(r)
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
    r.add_argument("--timeout", type=float, metavar="SECONDS", help="hard limit per VM (default: scaled to the run)")
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
