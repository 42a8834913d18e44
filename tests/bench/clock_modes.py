"""Where the virtual clock's cost is: icount against TCG's other ways of running numalab's QEMU.

    .venv/bin/python tests/bench/clock_modes.py [REPEATS] [LIBIPS]   (default: 2 repeats, no ips row)

Runs numa01 on ring-2 (1 vCPU a node, 256 MiB a node, 3 s, NUMA balancing on, no trace) with numalab's
patched QEMU (``--qemu charge``, make setup-qemu-charge) under ``--clock virtual`` (icount: one thread,
guest time = instructions), and through a small exec wrapper (compiled here) that takes ``-icount`` out of
the same argv: ``single`` keeps one thread for both vCPUs, ``multi`` gives each its own (multi-threaded
TCG), and ``ips`` adds QEMU's ``contrib/plugins/ips.c`` (LIBIPS: that plugin built as a shared object,
``gcc -shared -fPIC -o libips.so contrib/plugins/ips.c -I include/qemu $(pkg-config --cflags --libs
glib-2.0)`` in QEMU 10's source) at 1 G instructions a second a vCPU: the per-vCPU instruction count and
conditional callback a clock per vCPU would need (docs/throughput.md, "A clock per vCPU in place of
icount"). Without icount the guest's clock is the host's, so those runs are not guest-time runs: they bound
what dropping icount could gain, in boot seconds and in GB written per host second of the workload window.
Figures, not a test.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARGS = ["--topology", "ring-2", "--cpus-per-node", "1", "--mem-per-node", "256M", "--accel", "tcg",
        "--workload", "numa01", "--no-trace", "--numa-balancing", "on", "--duration", "3", "--clock", "virtual",
        "--json"]  # fmt: skip
WRAPPER_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	const char *real = getenv("CLOCK_MODES_QEMU"), *mode = getenv("CLOCK_MODES_MODE"), *ips = getenv("CLOCK_MODES_IPS");
	char **out = calloc(argc + 4, sizeof(char *));
	int n = 0;
	if (!real || !mode || !out)
		return 2;
	out[n++] = (char *)real;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-icount") && i + 1 < argc) {
			i++;
			continue;
		}
		if (!strcmp(argv[i], "tcg,thread=single") && strcmp(mode, "single"))
			out[n++] = "tcg,thread=multi";
		else
			out[n++] = argv[i];
	}
	if (!strcmp(mode, "ips") && ips) {
		out[n++] = "-plugin";
		out[n++] = (char *)ips;
	}
	execv(real, out);
	perror(real);
	return 127;
}
"""


def charge_qemu() -> str:
    sys.path.insert(0, str(REPO))
    from lab.errors import LabError
    from lab.vm.qemu.emulator import find_binary

    try:
        return find_binary("charge")
    except LabError as err:
        sys.exit(f"clock_modes: {err}")


def one(mode: str, out: Path, wrapper: Path, qemu: str, libips: str) -> dict:
    env = {**os.environ, "CLOCK_MODES_QEMU": qemu, "CLOCK_MODES_MODE": mode,
           "CLOCK_MODES_IPS": f"{libips},ips=1000000000"}  # fmt: skip
    binary = qemu if mode == "icount" else str(wrapper)
    argv = [sys.executable, "-m", "lab.cli", "run", *ARGS, "--qemu", binary, "--out", str(out)]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    try:
        m = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    stage = {st["name"]: st["host_s"] for st in m.get("stages", [])}
    r = (m.get("workload") or {}).get("result") or {}
    host = stage.get("workload-end", 0.0) - stage.get("workload-start", 0.0)
    return {
        "status": m["status"],
        "boot_s": m["timings"].get("boot_s"),
        "gb_per_host_s": r["bytes_touched"] / 1e9 / host if r.get("bytes_touched") and host > 0 else None,
    }


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    libips = sys.argv[2] if len(sys.argv) > 2 else ""
    if libips and not Path(libips).is_file():
        sys.exit(f"clock_modes: {libips}: not a file (contrib/plugins/ips.c built as a shared object)")
    modes = ["icount", "single", "multi", *(["ips"] if libips else [])]
    qemu = charge_qemu()
    rows: dict[str, list[dict]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = Path(tmp) / "qemu-system-x86_64"  # (numalab reads the version from the binary it is given)
        (Path(tmp) / "wrap.c").write_text(WRAPPER_C)
        subprocess.run(["gcc", "-O2", "-o", str(wrapper), str(Path(tmp) / "wrap.c")], check=True)
        for i in range(repeats):  # (interleaved: the host's load falls on every mode alike)
            for mode in modes:
                r = one(mode, Path(tmp) / f"{mode}-{i}", wrapper, qemu, libips)
                print(f"  {mode} #{i}: {r}", flush=True)
                rows[mode].append(r)
    print(f"{'mode':8s} {'boot s (median, range)':>26s} {'GB per host s (median, range)':>32s}")
    for mode, rs in rows.items():
        cols = []
        for key in ("boot_s", "gb_per_host_s"):
            v = [r[key] for r in rs if r.get(key)]
            cols.append(f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "-")
        print(f"{mode:8s} {cols[0]:>26s} {cols[1]:>32s}")


if __name__ == "__main__":
    main()
