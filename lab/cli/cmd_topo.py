"""``numalab topo``: list, show, check and import topology specs, and print what numalab makes of them
(QEMU command line, libvirt domain XML, virtme-ng options). The topology and size options are the shared
ones of lab.cli.shared_options."""

from __future__ import annotations

import argparse
import shlex
import sys
import textwrap
from pathlib import Path

from lab.cli.common import progress, warn
from lab.cli.shared_options import (
    json_option,
    memory_options,
    out_option,
    pinning_option,
    schema_command,
    size_options,
    topology_ref,
)
from lab.errors import LabError
from lab.guest.settings import KERNEL_CMDLINE
from lab.paths import json_text, write_text_atomic
from lab.placement.host_inventory import read_inventory
from lab.placement.pinning import Backing, plan_placement
from lab.topology.model.tiers import describe
from lab.topology.predictions.kernel_view import distance_notes, predict


def _topology(args: argparse.Namespace):
    return topology_ref(args).load()


def _placement_for_emitters(topo, args):
    # Printing a VM definition does not need it to fit on this host.
    return plan_placement(
        topo, read_inventory(), Backing(args.backing, args.prealloc), enforce_fit=False, pinning=args.pinning
    )


def _boot_for_emitters(args):
    from lab.vm.backend import BootSpec  # (on use: start-up time)

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
    from lab.topology.model.spec import load_topology, preset_names  # (on use: start-up time)

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
                "slit_distances": sorted({x for row in t.distances for x in row}),
                "distances": v["distinct_distances"],
                "type": v["type"],
                "description": t.description,
            }
        )
    if args.json:
        print(json_text(rows, indent=2))
        return 0
    # The SLIT's distinct values (local 10 first); the kernel's distance levels, among CPU nodes only, are
    # topo show's "kernel view" line. Each column is as wide as its widest cell, two spaces before the next.
    header = ("NAME", "NODES", "CPUS", "MEM", "SLIT VALUES", "TYPE", "DESCRIPTION")
    cells = [
        (r["name"], str(r["nodes"]), str(r["cpus"]), f"{r['memory_mib']}M", "/".join(map(str, r["slit_distances"])),
         r["type"], r["description"])
        for r in rows
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in (header, *cells)) for i in range(len(header) - 1)]
    right = (False, True, True, True, False, False)  # the counts and sizes right-aligned
    for row in (header, *cells):
        lead = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right)]
        print("  ".join([*lead, row[-1]]))
    return 0


def cmd_topo_show(args: argparse.Namespace) -> int:
    from lab.topology.pictures.render import (  # (on use: start-up time)
        cpu_lines,
        distance_table,
        group_lines,
        link_picture,
    )
    from lab.topology.predictions.cache_aware import predict_sched_cache  # (on use: start-up time)
    from lab.topology.predictions.cpu_view import predict_cpus  # (on use: start-up time)

    topo = _topology(args)
    view = predict(topo)
    cpus_view = predict_cpus(topo)
    sched_cache = predict_sched_cache(topo)
    if args.json:
        costs = topo.llc_costs  # (the memory model's, --coherence on: the spec's llc:, else the defaults)
        llc_model = {"size_mib": costs.size, "transfer_ns": costs.transfer, "given": topo.llc is not None}
        print(json_text(topo.to_dict() | {"kernel_view": view, "cpu_view": cpus_view, "sched_cache": sched_cache,
                                          "llc_model": llc_model}, indent=2))  # fmt: skip
        return 0
    from lab.topology.predictions.kernel_warnings import predicted_warnings  # (on use: start-up time)

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
    print()
    print("\n".join(cpu_lines(topo, cpus_view)))
    print(f"cache-aware scheduling (7.x SCHED_CACHE, under sched_verbose): {sched_cache} cache aware scheduling"
          if sched_cache == "enabling" else
          f"cache-aware scheduling (7.x SCHED_CACHE, under sched_verbose): cache aware scheduling {sched_cache} on "
          "this platform (no LLC of several CPUs has a wider parent)")  # fmt: skip
    for w in predicted_warnings(topo):
        print(f"warning: {w}")
    for note in distance_notes(topo):
        print(f"note: {note}")
    if "memory_tiers" in view:
        print()
        print(describe(view["memory_tiers"]))
    return 0


def cmd_topo_check(args: argparse.Namespace) -> int:
    from lab.topology.predictions.kernel_warnings import predicted_warnings  # (on use: start-up time)

    topo = topology_ref(args).load(cache=False)  # a check writes nothing, not even the parsed-spec cache
    v = predict(topo)
    print(
        f"{topo.source or topo.name}: ok ({topo.n_nodes} nodes, {topo.total_cpus} vCPUs, "
        f"{topo.total_memory_mib} MiB, {v['type']})"
    )
    for w in predicted_warnings(topo):
        warn(f"{topo.source or topo.name}: {w}")
    for note in distance_notes(topo):
        progress(f"note: {topo.source or topo.name}: {note}")
    return 0


def cmd_topo_qemu_args(args: argparse.Namespace) -> int:
    from lab.vm.qemu.qemu_argv import qemu_argv, topology_args  # (on use: start-up time)

    topo = _topology(args)
    placement = _placement_for_emitters(topo, args)
    argv = (
        topology_args(topo, placement) if args.topology_only else qemu_argv(topo, placement, _boot_for_emitters(args))
    )
    print(json_text(argv) if args.json else shlex.join(argv))
    return 0


def cmd_topo_libvirt_xml(args: argparse.Namespace) -> int:
    from lab.vm.libvirt.libvirt_xml import domain_xml  # (on use: start-up time)

    topo = _topology(args)
    placement = _placement_for_emitters(topo, args)
    sys.stdout.write(domain_xml(topo, placement, _boot_for_emitters(args), "kvm" if args.accel == "kvm" else "qemu"))
    return 0


def cmd_topo_vng_args(args: argparse.Namespace) -> int:
    from lab.vm.qemu.vng_args import left_out, vng_args  # (on use: start-up time)

    topo = _topology(args)
    opts, notes = vng_args(topo, None if args.no_pin else _placement_for_emitters(topo, args))
    dropped = left_out(topo)
    if args.json:
        print(json_text({"args": opts, "notes": notes, "left_out": [d.to_dict() for d in dropped]}))
        return 0
    print(shlex.join(opts))  # (stdout is the options alone, for $(...); what they leave out is said on stderr)
    for d in dropped:
        warn(d.line(), bare=True)
    for note in notes:
        progress(f"note: {note}")
    return 0


IMPORT_EXAMPLES = """examples:
  numalab topo import numactl.txt --out box.yaml       # numactl -H output (or - for stdin)
  numalab topo import genoa.xml --cpus-per-node 4      # hwloc XML: lstopo --of xml genoa.xml
  numalab topo import --hwloc-synthetic 'pack:2 numa:3 l3:1 core:2 pu:2' --out snc3.yaml
  numalab topo import --from-sysfs                     # this host: /sys/devices/system/{node,cpu}
  numalab topo import --from-sysfs copy/node           # a copy of node/ alone: the nodes and the SLIT

docs/topologies.md, "Importing a machine with its caches"."""


def cmd_topo_import(args: argparse.Namespace) -> int:
    """numactl -H output or hwloc XML (FILE or -), a sysfs directory or an hwloc synthetic description -> a spec
    file (stdout or --out)."""
    from lab.topology.importers.topo_import import import_spec  # (on use: start-up time)

    spec = import_spec(
        args.file,
        args.from_sysfs,
        args.name,
        args.cpus_per_node,
        args.mem_per_node,
        args.slow_cpuless,
        args.hwloc_synthetic,
    )
    if args.out:
        out = Path(args.out)
        if out.is_dir():
            raise LabError(f"--out {out}: is a directory")
        write_text_atomic(out, spec.text)
        progress(f"{out}: {spec.n_nodes} nodes, {spec.total_cpus} vCPUs, {spec.total_memory_mib} MiB")
        for note in spec.notes:
            progress(f"note: {note}")
    elif args.json:
        topology = {"topology": spec.topology.to_dict()} if spec.topology else {}
        print(json_text({"spec": spec.text, "data": spec.data, "notes": list(spec.notes)} | topology, indent=2))
    else:
        sys.stdout.write(spec.text)
    for w in spec.warnings:  # (topo check's, of a --cpus-per-node given: the default scale has none it can avoid)
        warn(f"--cpus-per-node {args.cpus_per_node}: {w}" if args.cpus_per_node is not None else w)
    return 0


def add_parser(sub) -> None:
    topo = sub.add_parser(
        "topo",
        help="topologies: list, show, check, emit QEMU args or libvirt XML",
        description="Work with NUMA topology specs (presets in topologies/ or YAML files).",
    )
    tsub = topo.add_subparsers(dest="topo_command", metavar="SUBCOMMAND", required=True)
    t = tsub.add_parser("list", help="list the presets",
                        description="List the topology presets; SLIT VALUES are the distinct values of each one's "
                        "SLIT (numalab topo show NAME has the table and the kernel's distance levels).")  # fmt: skip
    json_option(t)
    t.set_defaults(func=cmd_topo_list)
    q = _topo_cmd(tsub, "show", cmd_topo_show, "show the SLIT, the links and the kernel's predicted NUMA view")
    json_option(q)
    q = _topo_cmd(tsub, "check", cmd_topo_check, "validate a spec (exit 0 if valid, one-line error otherwise)")
    q.epilog = ("A remote SLIT distance is 11..255. 255, ACPI's 'unreachable', is accepted as a distance: QEMU "
                "passes it on and the Linux kernel takes it as one (the farthest level), which a spec may want; "
                "check and show say so in a note. A link listed twice is refused.")  # fmt: skip
    _emitter_parsers(tsub)
    _vng_parser(tsub)
    _import_parser(tsub)
    schema_command(tsub, "topology", "topology specs")


def _topo_cmd(tsub, name: str, func, help_: str) -> argparse.ArgumentParser:
    """A topo subcommand that reads one topology (a preset or a spec file) and takes the size options."""
    q = tsub.add_parser(name, help=help_, description=help_)
    q.add_argument("topology", metavar="NAME|FILE", help="a preset name (numalab topo list) or a YAML spec")
    size_options(q.add_argument_group("sizes"))
    q.set_defaults(func=func)
    return q


def _emitter_parsers(tsub) -> None:
    """topo qemu-args and topo libvirt-xml: the VM on the host and the paths written into the output."""
    for name, func, help_ in (
        ("qemu-args", cmd_topo_qemu_args, "print the QEMU command line for a topology"),
        ("libvirt-xml", cmd_topo_libvirt_xml, "print the libvirt domain XML for a topology"),
    ):
        q = _topo_cmd(tsub, name, func, help_)
        g = q.add_argument_group("the VM on the host")
        memory_options(g)
        pinning_option(g)
        # (tcg, not run's auto: printing a VM definition probes nothing)
        g.add_argument("--accel", choices=("kvm", "tcg"), default="tcg", help="accelerator (default tcg)")
        g = q.add_argument_group("paths written into the output")
        g.add_argument("--kernel-path", default="/path/to/bzImage", help="kernel image to put in the output")
        g.add_argument("--initrd-path", default="/path/to/initrd.cpio", help="initrd to put in the output")
        g.add_argument("--results-dir", default="/path/to/results", help="results share directory")
        g.add_argument("--console-log", default="/path/to/console.log", help="serial console log file")
        if name == "qemu-args":
            g = q.add_argument_group("output")
            g.add_argument("--topology-only", action="store_true", help="only -m/-smp/-object/-numa")
            json_option(g)


def _vng_parser(tsub) -> None:
    """topo vng-args: the options virtme-ng takes for the same VM."""
    q = _topo_cmd(tsub, "vng-args", cmd_topo_vng_args, "print the virtme-ng (vng) options for a topology")
    q.epilog = ("The options go to stdout alone, for vng $(numalab topo vng-args ...). What they cannot give the guest "
                "is said on stderr, one line a topology field with its value, and the exit code stays 0: the CPU "
                "grid (packages, llcs_per_node or a node's llcs, cores_per_cluster: --cpus is numalab's layout "
                "without a grid), cpu_vendor and cpu_model (vng sets -cpu itself), tiers.slow_nodes and hmat; "
                "then notes on what virtme-ng does with memory and pinning. --json gives {args, notes, "
                "left_out}.")  # fmt: skip
    memory_options(q)  # (accepted like the other emitters' and hidden: vng-args prints no memory backing)
    for a in q._actions[-2:]:  # noqa: SLF001
        a.help = argparse.SUPPRESS
    pinning_option(q)
    q.add_argument("--no-pin", action="store_true", help="leave out --pin (vCPU pinning)")
    json_option(q)


def _import_parser(tsub) -> None:
    """topo import: a real machine's topology (numactl -H, hwloc, sysfs) as a spec."""
    q = tsub.add_parser(
        "import",
        help="a real machine's topology (numactl -H, hwloc, sysfs) as a spec",
        description=textwrap.fill(
            "Read a real machine and write a spec, scaled to --cpus-per-node and --mem-per-node (CPU-less nodes "
            "stay CPU-less, memoryless ones memoryless); the real sizes are kept in its description. FILE is "
            "numactl -H output (a pasted mail works) or an hwloc XML file (lstopo --of xml), told apart by "
            "content; - reads standard input. hwloc XML, an hwloc synthetic description and a sysfs copy with "
            "cpu/ give the CPU grid too: packages, llcs_per_node (L3s a node; each node's own llcs: where nodes "
            "hold different numbers), cores_per_cluster (cores sharing an L2), threads, cpu_vendor and cpu_model; a "
            "field the machine does not fill evenly is left out, and a comment in the YAML says why.",
            100,
            break_on_hyphens=False,
        ),
        epilog=IMPORT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    q.add_argument("file", nargs="?", metavar="FILE|-", help="numactl -H output or hwloc XML")
    q.add_argument(
        "--from-sysfs",
        nargs="?",
        const="/sys/devices/system",
        metavar="ROOT",
        help="read sysfs instead: ROOT holds node/ and maybe cpu/ (default /sys/devices/system), or is a node "
        "directory (cpu/ beside it is read when it is named node)",
    )
    q.add_argument(
        "--hwloc-synthetic",
        metavar="DESC",
        help="read an hwloc synthetic description instead, as lstopo --input takes it (pack:2 numa:3 l3:1 core:2 "
        "pu:2; numa:2(memory=16GiB))",
    )
    q.add_argument("--name", help="the spec's name (default: the file's name, or host)")
    q.add_argument(
        "--cpus-per-node",
        type=int,
        metavar="N",
        help="vCPUs of every node with CPUs, a multiple of its LLCs x cores a cluster x threads (default 2, or "
        "the fewest that multiple allows that the kernel reads as the machine: no LLC or module of one core, no "
        "socket of 3 CPUs; a scale given that it cannot read is taken, with topo check's warning); where nodes hold "
        "different numbers of L3s, of the nodes with the fewest, the others as many an L3",
    )
    q.add_argument(
        "--mem-per-node", default="512M", metavar="SIZE", help="memory of every node with memory (default 512M)"
    )
    q.add_argument(
        "--slow-cpuless",
        action="store_true",
        help="make the CPU-less nodes a slower memory tier (dax kmem, like CXL memory; see README 'Memory tiers')",
    )
    out_option(q, "FILE", "write the spec here (default: standard output)")
    json_option(q)
    q.set_defaults(func=cmd_topo_import)
