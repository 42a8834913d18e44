"""What every command of the front end shares: the parser class (usage errors on one line) and progress."""

from __future__ import annotations

import argparse
import sys

QEMU_HELP = (
    "the QEMU to run VMs with (--backend qemu): system (qemu-system-x86_64 on PATH), backports (the QEMU 10 "
    "that make setup-qemu10 unpacked), charge (numalab's patched QEMU 10 that make setup-qemu-charge built: "
    "--clock virtual with --remote-latency) or a binary's path; default $NUMALAB_QEMU, else system. Its version "
    "and firmware come from the binary itself"
)


def progress(msg: str) -> None:
    print(f"numalab: {msg}", file=sys.stderr, flush=True)


class Parser(argparse.ArgumentParser):
    """argparse, with its usage errors on one line like every other error (exit 2)."""

    def error(self, message: str):  # type: ignore[override]
        print(f"numalab: error: {' '.join(message.split())} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)
