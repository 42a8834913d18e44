"""numalab's patched QEMU (``make setup-qemu-charge``): remote latency charged to the guest's clock.

Under ``--clock virtual`` (``-icount``) guest time counts instructions, and no
stock QEMU lets a plugin add time to it: ``qemu_plugin_update_ns`` only runs
timers, and holding a vCPU's thread does not move an instruction-counting clock.
``images/qemu/`` has a small patch that adds ``qemu_plugin_charge_ns`` (a stall
charged to the icount clock from a vCPU callback); with it the access-matrix
plugin's latency model charges every modelled miss to the guest's clock
(``numalab run --clock virtual --remote-latency slit --qemu charge``).

This module builds that QEMU: Debian's source of the version that ``make setup-qemu10``
unpacked (found by apt in the backports archive's signed Sources index, its SHA-256 checked;
``lab.host.qemu_source``), the patch series (each tried first), ``qemu-system-x86_64`` alone (TCG,
plugins, libnuma; only the devices of images/qemu/0011, no debug information: about 1,330 build steps),
installed into ``<cache>/qemu-charge/<version>+numalab.<patches' hash>/`` with the backports prefix's
firmware linked beside it. A build of that version and these patches already there is used without asking the archive
(offline too). Nothing is installed into the system; the build directory is removed afterwards. Build
tools come from apt (the Makefile target installs them) and meson from PyPI (Debian 12's is too old for
QEMU 10).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab.errors import LabError
from lab.host import qemu_source
from lab.host.qemu_prefix import print_binary, setup_run
from lab.paths import COMPLETE, TOOL_TEXT, cache_dir, publish_dir, write_text_atomic
from lab.vm.qemu.charge_series import CONFIGURE, prefix_name, series
from lab.vm.qemu.emulator import DEFAULT_QEMU, PREFIX_DATA_DIRS, private_prefixes, resolve

# What QEMU 10.0's configure installs (pythondeps.toml's [meson] group; python/wheels in upstream's tarball):
# qemu_source.check_wheels stops a build of a QEMU that asks for others.
WHEELS = ("meson==1.5.0", "pycotap==1.3.1")
_STEP = re.compile(r"^\[(\d+)/(\d+)\]")


def _run(cmd: list[str], what: str, cwd: Path | None = None, timeout: int = 1800) -> str:
    return setup_run(cmd, what, "setup-qemu-charge", "make setup-qemu-charge installs the build tools", cwd, timeout,
                     lines=3)  # fmt: skip


def _ninja(build: Path, jobs: int, say) -> None:
    """ninja with a progress line every tenth of the build."""
    cmd = ["ninja", "-j", str(jobs), DEFAULT_QEMU]
    try:
        proc = subprocess.Popen(cmd, cwd=build, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **TOOL_TEXT,
                                stdin=subprocess.DEVNULL)  # fmt: skip
    except FileNotFoundError:
        raise LabError("setup-qemu-charge: ninja: not found (make setup-qemu-charge installs it)") from None
    last, tail, shown = 0.0, [], -1
    assert proc.stdout is not None
    for line in proc.stdout:
        tail = [*tail[-20:], line.rstrip()]
        m = _STEP.match(line)
        if m and (tenth := 10 * int(m.group(1)) // int(m.group(2))) > shown and time.monotonic() - last > 5:
            shown, last = tenth, time.monotonic()
            say(f"numalab: building QEMU: {m.group(1)}/{m.group(2)}")
    if proc.wait() != 0:
        errors = [t for t in tail if "error" in t.lower()] or tail
        raise LabError(f"setup-qemu-charge: ninja failed: {errors[-1] if errors else '(no output)'}")


def build(refresh: bool = False, jobs: int | None = None, say=print) -> Path:
    """The patched QEMU's binary for the backports QEMU ``make setup-qemu10`` unpacked: the one already built
    for its version and these patches (no network), or built now from Debian's source of that version."""
    backports = private_prefixes()
    if not backports:
        raise LabError("setup-qemu-charge: needs Debian's backports QEMU unpacked, whose version it builds and "
                       "whose firmware it uses (make setup-qemu10)")  # fmt: skip
    installed = qemu_source.installed_version(backports[0])
    upstream = qemu_source.upstream_version(installed)
    prefix = cache_dir("qemu-charge") / prefix_name(upstream)
    binary = prefix / "usr" / "bin" / DEFAULT_QEMU
    if (prefix / ".complete").exists() and binary.is_file() and not refresh:
        say(f"numalab: patched QEMU already in {prefix}")
        return binary
    apt_root = cache_dir("qemu-charge", ".apt")
    say(f"numalab: asking apt (private lists) for Debian's source of QEMU {installed}")
    source = qemu_source.find(installed, apt_root)
    orig = qemu_source.orig_tarball(source, cache_dir("qemu-charge", ".src"), apt_root, say)
    work = Path(tempfile.mkdtemp(dir=prefix.parent, prefix=f".build-{prefix.name}."))
    tmp = None
    try:
        say(f"numalab: trying the patches on QEMU {source.upstream} ({', '.join(p.name for p in series())})")
        qemu_source.check(orig, source, series(), WHEELS, work / "check")
        say(f"numalab: unpacking {orig.name}, patching")
        src = qemu_source.unpack(orig, work / "src")
        qemu_source.apply_series(src, series(), source)
        wheels = src / "python" / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(wheels), *WHEELS],
             "pip download meson", timeout=600)  # fmt: skip
        out = src / "build"
        out.mkdir()
        say(f"numalab: configuring QEMU {source.upstream} (qemu-system-x86_64: TCG, plugins, libnuma)")
        _run(["../configure", *CONFIGURE, f"--prefix={prefix / 'usr'}"], "configure", cwd=out, timeout=900)
        _ninja(out, jobs or os.cpu_count() or 1, say)
        tmp = Path(tempfile.mkdtemp(dir=prefix.parent, prefix=f".{prefix.name}."))
        (tmp / "usr" / "bin").mkdir(parents=True)
        shutil.copy2(out / DEFAULT_QEMU, tmp / "usr" / "bin" / DEFAULT_QEMU)
        for d in PREFIX_DATA_DIRS:  # the same version's firmware, ROMs and keymaps: Debian's
            if (backports[0] / "usr" / d).is_dir():
                (tmp / "usr" / d).parent.mkdir(parents=True, exist_ok=True)
                (tmp / "usr" / d).symlink_to(backports[0] / "usr" / d)
        write_text_atomic(tmp / "VERSION", f"{source.upstream} (Debian's {source.version}) + "
                          f"{' '.join(p.name for p in series())}\n")  # fmt: skip
        (tmp / COMPLETE).touch()
        publish_dir(tmp, prefix, replace=refresh)
        tmp = None
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if tmp is not None:  # a half-made prefix
            shutil.rmtree(tmp, ignore_errors=True)
    e = resolve(str(binary))
    if not e.charges_time or not e.vcpu_clock:
        missing = "qemu_plugin_charge_ns" if not e.charges_time else "qemu_plugin_vcpu_clock_ns"
        raise LabError(f"setup-qemu-charge: {binary} was built but does not export {missing}")
    say(f"numalab: {e.version} with numalab's patches in {prefix}; use it with --qemu charge")
    return binary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m lab.host.qemu_charge",
        description="Build numalab's patched QEMU (qemu_plugin_charge_ns, for --clock virtual --remote-latency) "
        "into numalab's cache (make setup-qemu-charge); prints the binary's path.",
    )
    p.add_argument("--refresh", action="store_true", help="build again even if this patch series is built")
    p.add_argument("-j", "--jobs", type=int, help="parallel build jobs (default: the CPUs)")
    p.add_argument("--print-binary", action="store_true", help="only print the binary's path (for scripts)")
    args = p.parse_args(argv)
    return print_binary(lambda say: build(refresh=args.refresh, jobs=args.jobs, say=say), quiet=args.print_binary)


if __name__ == "__main__":
    raise SystemExit(main())
