"""``numalab doctor``: what the host can do."""

from __future__ import annotations

import argparse

from lab.cli.common import progress
from lab.cli.shared_options import json_option, qemu_option
from lab.errors import LabError
from lab.paths import json_text


def cmd_doctor(args: argparse.Namespace) -> int:
    from lab.host.doctor import doctor_report, print_doctor  # (on use: start-up time)

    if args.clean and not args.connect:
        raise LabError("--clean: needs --connect URI (the libvirt host to clean)")
    report = doctor_report(
        refresh=args.refresh,
        progress=None if args.json else progress,
        connect=args.connect,
        clean=args.clean,
        qemu=args.qemu or "",
    )
    if args.json:
        print(json_text(report, indent=2))
    else:
        print_doctor(report)
    return 0


def add_parser(sub) -> None:
    d = sub.add_parser(
        "doctor",
        help="check the host: accelerator (real KVM probe), tools, NUMA inventory",
        description="Probe KVM with a real guest boot (falls back to TCG), list tool versions "
        "and the host's NUMA inventory. The KVM verdict is cached per host and host kernel.",
    )
    json_option(d)
    d.add_argument("--refresh", action="store_true", help="probe again instead of using the cached verdict")
    qemu_option(d)
    d.add_argument("--connect", metavar="URI", help="also check this libvirt host and list leftover numalab-* domains")
    d.add_argument("--clean", action="store_true", help="with --connect: destroy and undefine the leftovers")
    d.set_defaults(func=cmd_doctor)
