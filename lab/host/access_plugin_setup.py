"""The access-matrix TCG plugin built for a QEMU at setup (``make setup``, ``make setup-qemu10``): ``python -m
lab.host.access_plugin_setup [QEMU]`` (QEMU as ``numalab run --qemu`` takes it; default: the system's). The
plugin itself, its build and its arguments are lab.vm.tcg.access_plugin's; a run builds it on first use too.
"""

from __future__ import annotations

import sys

from lab.errors import LabError
from lab.vm.qemu.emulator import resolve
from lab.vm.tcg.access_plugin import build_plugin, parse_qemu_version


def main(argv: list[str] | None = None) -> int:
    """``python -m lab.host.access_plugin_setup [QEMU]``: build the plugin for that QEMU (default: the system's;
    make setup does this)."""
    args = sys.argv[1:] if argv is None else argv
    try:
        text = resolve(args[0] if args else "").version
    except LabError as err:
        print(f"numalab: {err}; the access-matrix plugin is built when QEMU is installed")
        return 0
    try:
        so = build_plugin(parse_qemu_version(text))
    except LabError as err:
        print(f"numalab: error: {err}", file=sys.stderr)
        return 2
    print(f"numalab: access-matrix plugin for {text}: {so}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
