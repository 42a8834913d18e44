#!/usr/bin/env python3
"""Where an idle run's time goes: QEMU alone on a numalab run's own command line.

    tests/bench/boot_floor.py RUN_DIR [REPEATS]

Takes RUN_DIR/qemu-argv.txt (a finished ``numalab run`` on a built kernel, which
needs no modules: tests/bench/boot.sh gives it one), and times, with no
numalab process around it (no QMP pause, no pinning, no collection):

* ``floor``: the same QEMU, kernel and machine with an init that powers off at
  once: QEMU, firmware and the kernel's own boot;
* ``plan``: the same with numalab's real guest image and an idle plan: what
  the guest init adds (readback, tracing, vmstat, results over 9p).

Prints the medians. A figure, not a test.
"""

from __future__ import annotations

import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lab.analysis.numa import default_events  # noqa: E402
from lab.guest import image  # noqa: E402
from lab.guest.settings import GuestSettings  # noqa: E402
from lab.workloads.image_layers import programs_for  # noqa: E402
from lab.workloads.registry import get_workload  # noqa: E402

POWEROFF_INIT = "#!/bin/busybox sh\n/bin/busybox poweroff -f\n"


def argv_for(run_argv: list[str], initrd: Path, results: Path) -> list[str]:
    """The run's argv, started at once (no -S, no QMP), with another initrd and results directory."""
    out, i = [], 0
    while i < len(run_argv):
        arg = run_argv[i]
        if arg == "-S":
            i += 1
            continue
        if arg == "-qmp":
            i += 2
            continue
        if arg == "-initrd":
            out += [arg, str(initrd)]
        elif arg == "-chardev":
            out += [arg, f"file,id=console,path={results}/console.log"]
        elif arg == "-fsdev":
            out += [arg, f"local,id=results,path={results},security_model=none,multidevs=remap"]
        else:
            out.append(arg)
            i += 1
            continue
        i += 2
    return out


def timed(argv: list[str]) -> float:
    t0 = time.monotonic()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=True)
    return time.monotonic() - t0


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    run = Path(sys.argv[1])
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    run_argv = shlex.split((run / "qemu-argv.txt").read_text())
    with tempfile.TemporaryDirectory(prefix="numalab-floor-") as tmp_s:
        tmp = Path(tmp_s)
        floor_initrd = image.minimal_initrd(tmp / "floor.cpio", POWEROFF_INIT)
        plan = GuestSettings(
            workload_cmd="idle --duration 0.1", duration_s=0.1, trace_events=tuple(e.full for e in default_events())
        )
        layers = [image.base_image(), image.workload_image(programs_for(get_workload("idle")))]
        plan_initrd = image.assemble_initrd(tmp / "plan.cpio", layers, plan.to_shell())
        figures: dict[str, list[float]] = {"floor": [], "plan": []}
        for _ in range(repeats):
            for name, initrd in (("floor", floor_initrd), ("plan", plan_initrd)):
                results = tmp / f"results-{name}"
                subprocess.run(["rm", "-rf", str(results)], check=True)
                results.mkdir()
                figures[name].append(timed(argv_for(run_argv, initrd, results)))
    floor, plan_s = statistics.median(figures["floor"]), statistics.median(figures["plan"])
    print(f"QEMU + kernel to an init that powers off at once: {floor:.2f}s (median of {repeats})")
    print(f"QEMU + kernel + numalab's guest init, idle 0.1 s plan: {plan_s:.2f}s (the init adds {plan_s - floor:.2f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
