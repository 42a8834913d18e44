"""``numalab nested``: run a command inside a numalab-made machine that has KVM and several NUMA nodes.

The way to try numalab's KVM path and multi-node placement on a host that has neither (lab.host.nested)."""

from __future__ import annotations

import argparse
import shlex
import tempfile
import textwrap
from pathlib import Path

from lab.cli.common import progress
from lab.cli.shared_options import json_option, out_option, size_options
from lab.errors import LabError
from lab.paths import REPO_ROOT, json_text
from lab.record_files import CONSOLE_LOG
from lab.run.options import MAX_TIMEOUT_S, check_seconds

DEFAULT_TOPOLOGY = "ring-2"
DEFAULT_CPUS = 2
DEFAULT_MEM = "3G"
DEFAULT_TIMEOUT_S = 1800.0

EXAMPLES = """examples:
  numalab nested -- numalab doctor
      the KVM probe and the host's two NUMA nodes, as seen inside
  numalab nested --out nested-run -- numalab run --topology ring-4 --cpus-per-node 1 --mem-per-node 256M \\
      --workload numa01 --duration 4 --out '$NESTED_OUT/ring4'
      a KVM run of ring-4 placed on two host nodes; its record comes back in nested-run/ring4
  numalab nested --topology ring-4 --cpus-per-node 1 --mem-per-node 1536M -- numalab doctor
      a four-node host
  numalab nested --libvirt-host --user lab
      the outer machine as a libvirt host: prints its qemu+ssh:// URI (a port on 127.0.0.1, fresh keys,
      its host key pinned) for a matrix's hosts:, and serves it until Ctrl-C or --timeout
  numalab nested --qemu backports -- numalab doctor
      the outer guest under the QEMU 10 that make setup-qemu10 unpacked (the inner guests' QEMU is the host's)
"""


def cmd_nested(args: argparse.Namespace) -> int:
    from lab.host.nested import OuterGuest, libvirt_host, run_nested  # (on use: start-up time)
    from lab.topology.model.ref import TopologyRef  # (on use: start-up time)
    from lab.vm.qemu.emulator import resolve as resolve_emulator  # (on use: start-up time)

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command and not args.libvirt_host:
        raise LabError("nested: no command given (numalab nested [options] -- COMMAND ...)")
    check_seconds(args.timeout, "--timeout", MAX_TIMEOUT_S)  # (run's check: nan, inf and <= 0 are refused)
    ref = TopologyRef(args.topology, args.cpus_per_node or DEFAULT_CPUS, args.mem_per_node or DEFAULT_MEM,
                      args.threads)  # fmt: skip
    topo = ref.load()
    emulator = resolve_emulator(args.qemu or "")  # (run's --qemu: a bad one is one line, before --out is made)
    script = ""
    if command:
        script = f"export PATH={shlex.quote(str(REPO_ROOT / '.venv' / 'bin'))}:$PATH\n{shlex.join(command)}\n"
        # ($NESTED_OUT in an argument is the guest's: shlex.join quoted it, so it is let out of the quotes)
        script = script.replace("$NESTED_OUT", "'\"$NESTED_OUT\"'")
    out = args.out or Path(tempfile.mkdtemp(prefix="numalab-nested-", dir="."))
    if args.out and out.exists() and any(out.iterdir()):
        raise LabError(f"--out {out}: exists and is not empty")
    if out.exists():
        out.rmdir()  # (the library makes it anew; the default's name stays this one's, free until then)
    say = None if args.json else progress
    echo = None if args.json else lambda line: print(line, flush=True)
    guest = OuterGuest(user=args.user, emulator=emulator, progress=say, echo=echo)
    uri = None
    if args.libvirt_host:
        host = None
        try:
            with libvirt_host(topo, out, script, guest, args.timeout) as host:
                uri = host.uri
                ready = {"uri": uri, "ready_s": host.ready_s, "qemu": host.qemu}
                print(json_text(ready) if args.json else f"uri: {uri}", flush=True)
                progress(f"serving libvirt after {host.ready_s:.0f}s; Ctrl-C ends it")
                host.wait()
        except KeyboardInterrupt:
            if host is None:
                raise
            progress("interrupted: the outer guest stops")
        res = host.result
        if res is None:
            raise LabError(f"nested: the outer guest gave no result (its console: {out / CONSOLE_LOG})")
    else:
        res = run_nested(topo, script, out, guest, args.timeout)
    log = out / "script.log"
    summary = {
        "exit_code": res.exit_code,
        "timed_out": res.timed_out,
        "silent_s": res.silent_s,
        "records": res.records,
        "wall_s": res.wall_s,
        "marks": res.marks,
        "out": str(out),
        "console": str(res.console),
        "script_log": str(log),
        "vm_failure": res.vm_failure,
        "qemu_log": str(res.qemu_log) if res.qemu_log else None,
        "qemu": res.qemu or {"binary": emulator.binary, "version": emulator.short_version},  # the outer guest's
        **({"uri": uri} if args.libvirt_host else {}),
    }
    if args.json:
        print(json_text(summary, indent=2))
    else:
        for line in res.lines(topo.name):
            progress(line)
    if res.timed_out or res.exit_code is None:
        return 1
    return res.exit_code


def add_parser(sub) -> None:
    p = sub.add_parser(
        "nested",
        help="run a command inside a numalab guest that has KVM and several NUMA nodes",
        description=textwrap.fill(
            "Boot a numalab topology under TCG with -cpu max (AMD SVM with nested paging: KVM inside), "
            "the host's / shared read-only as its root (writes stay in the guest's memory), and run COMMAND in "
            "this checkout as an ordinary user in the kvm group. The guest's nodes are the inner numalab's host "
            "nodes: a laptop or a two-socket workstation, on a host without KVM or NUMA. What COMMAND writes to "
            "$NESTED_OUT comes back in --out. Needs root (the outer guest's user and groups are set up from it). "
            "The inner guests run at TCG's speed: this proves paths, not speed.",
            88,
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g = p.add_argument_group("the outer machine")
    g.add_argument("--topology", default=DEFAULT_TOPOLOGY, metavar="NAME|FILE",
                   help=f"its NUMA topology: a preset or a spec file (default {DEFAULT_TOPOLOGY}, with "
                   f"{DEFAULT_CPUS} CPUs and {DEFAULT_MEM} a node)")  # fmt: skip
    size_options(g)
    g.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                   help=f"host seconds the outer guest may run (default {DEFAULT_TIMEOUT_S:g})")  # fmt: skip
    g.add_argument("--user", metavar="NAME",
                   help="the host user COMMAND runs as (default: the one who runs numalab nested)")  # fmt: skip
    g.add_argument("--libvirt-host", action="store_true",
                   help="also serve the outer machine as a libvirt host: sshd and the system libvirtd inside, "
                   "reached as qemu+ssh://USER@127.0.0.1:PORT/system through a port forwarded on the loopback "
                   "address only, with keys made for this session and the guest's host key pinned; its URI is "
                   "printed, and it serves until Ctrl-C or --timeout (COMMAND is optional: it runs first)")  # fmt: skip
    g.add_argument("--qemu", metavar="PATH",
                   help="the outer guest's QEMU, chosen as numalab run's --qemu: system (qemu-system-x86_64 on "
                   "PATH), backports (the QEMU 10 that make setup-qemu10 unpacked), charge, or a binary's path; "
                   "default $NUMALAB_QEMU, else system. Its version is in the summary (qemu). Inside, numalab chooses "
                   "its own (the system QEMU unless COMMAND asks for another)")  # fmt: skip
    json_option(p)
    out_option(p, "DIR", "where $NESTED_OUT comes back, with the outer console (default: a new numalab-nested-* here)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                   help="what to run inside, in this checkout (numalab is on its PATH)")  # fmt: skip
    p.set_defaults(func=cmd_nested)
