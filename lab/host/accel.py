"""Which accelerator really works here: a real boot under KVM, with a short timeout.

/dev/kvm existing proves nothing (on some hosts guests hang right after the
BIOS), so the probe boots the stock kernel with a tiny initramfs whose init
prints a marker and powers off. The verdict is cached per host and host kernel.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from pathlib import Path

from lab.guest.image import minimal_initrd
from lab.paths import cache_dir, write_text_atomic
from lab.record_files import CONSOLE_LOG, QEMU_LOG
from lab.vm.qemu_backend import run_vm

PROBE_MARK = "NUMALAB-PROBE-OK"
PROBE_TIMEOUT_S = 25.0
_PROBE_INIT = f"""#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox echo {PROBE_MARK}
/bin/busybox poweroff -f
"""


def _cache_file() -> Path:
    return cache_dir("accel") / f"{platform.node()}-{platform.release()}.json"


def probe(accel: str, kernel: Path, timeout_s: float = PROBE_TIMEOUT_S) -> dict:
    """Boot a 1-vCPU guest with ``accel``; {"ok", "seconds", "detail"}."""
    if accel == "kvm":
        if not os.path.exists("/dev/kvm"):
            return {"ok": False, "seconds": 0.0, "detail": "/dev/kvm does not exist"}
        if not os.access("/dev/kvm", os.R_OK | os.W_OK):
            return {"ok": False, "seconds": 0.0, "detail": "/dev/kvm is not accessible (add yourself to group kvm)"}
    with tempfile.TemporaryDirectory(prefix="numalab-probe-") as tmp_s:
        tmp = Path(tmp_s)
        minimal_initrd(tmp / "initrd", _PROBE_INIT)
        console = tmp / CONSOLE_LOG
        accel_args = ["-accel", "kvm", "-cpu", "host"] if accel == "kvm" else ["-accel", "tcg,thread=multi"]
        argv = [
            "qemu-system-x86_64",
            "-machine",
            "pc",
            *accel_args,
            "-m",
            "256M",
            "-smp",
            "1",
            "-nodefaults",
            "-no-user-config",
            "-no-reboot",
            "-display",
            "none",
            "-kernel",
            str(kernel),
            "-initrd",
            str(tmp / "initrd"),
            "-append",
            "console=ttyS0 quiet panic=-1",
            "-chardev",
            f"file,id=console,path={console}",
            "-serial",
            "chardev:console",
        ]
        t0 = time.monotonic()
        out = run_vm(argv, console, None, {}, timeout_s, tmp / QEMU_LOG)
        seconds = round(time.monotonic() - t0, 2)
        text = console.read_text(errors="replace") if console.exists() else ""
        qemu_err = (tmp / QEMU_LOG).read_text(errors="replace").strip()
    if PROBE_MARK in text:
        return {"ok": True, "seconds": seconds, "detail": f"a guest booted and powered off in {seconds:.1f}s"}
    if out.timed_out:
        detail = f"the guest hung: no output from init within {timeout_s:.0f}s"
    else:
        detail = f"QEMU exited {out.exit_code}: {qemu_err.splitlines()[-1] if qemu_err else 'no message'}"
    return {"ok": False, "seconds": seconds, "detail": detail}


def accel_verdict(kernel: Path, refresh: bool = False) -> dict:
    """{"accel": "kvm"|"tcg", "kvm": probe, "tcg": probe|None, "cached": bool, ...}, cached per host kernel."""
    path = _cache_file()
    if path.exists() and not refresh:
        try:
            verdict = json.loads(path.read_text())
            verdict["cached"] = True
            return verdict
        except (json.JSONDecodeError, OSError):
            pass
    kvm = probe("kvm", kernel)
    verdict = {
        "accel": "kvm" if kvm["ok"] else "tcg",
        "kvm": kvm,
        "host": platform.node(),
        "host_kernel": platform.release(),
        "probed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if not kvm["ok"]:
        verdict["tcg"] = probe("tcg", kernel, timeout_s=60)
        verdict["warning"] = (
            f"KVM is unusable ({kvm['detail']}); using TCG software emulation "
            "(-accel tcg,thread=multi), which is much slower"
        )
    write_text_atomic(path, json.dumps(verdict, indent=2) + "\n")
    verdict["cached"] = False
    return verdict
