"""numalab doctor: a real KVM probe boot (not /dev/kvm's presence), TCG fallback with a warning, in bounded time."""

from __future__ import annotations

import json
import time

import pytest
from common import numalab

pytestmark = [pytest.mark.vm, pytest.mark.alone]  # (the probe waits host seconds)


def test_doctor_probes_for_real_and_falls_back_to_tcg() -> None:
    t0 = time.monotonic()
    proc = numalab("doctor", "--refresh", "--json", timeout=120)
    took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    acc = report["accelerator"]
    assert acc["cached"] is False  # --refresh: this verdict comes from a probe boot just now
    assert acc["accel"] in ("kvm", "tcg")
    if acc["accel"] == "kvm":
        assert acc["kvm"]["ok"] is True
    else:  # here: /dev/kvm exists but guests hang or QEMU aborts; the lab must say so and use TCG
        assert acc["kvm"]["ok"] is False and acc["kvm"]["detail"]
        assert "TCG" in acc["warning"] and "tcg,thread=multi" in acc["warning"]
        assert acc["tcg"]["ok"] is True  # and TCG itself was shown to boot
    # (how long it took is not a pass/fail figure: a CI rehearsal beside other VMs took over 60 s; the
    # subprocess's 120 s bound still fails a probe that waits out a hung guest's whole deadline)
    print(f"doctor --refresh took {took:.0f} s")
    assert report["tools"]["trace-cmd"] and report["host"]["nodes"]
    # The QEMUs it can run: the chosen one (the system's) first, with its version and qboot; any that
    # make setup-qemu10 unpacked after it.
    chosen = report["emulators"][0]
    assert chosen["chosen"] and chosen["version"] and chosen["binary"].startswith("/")
    assert all(not e["chosen"] for e in report["emulators"][1:])
    # The human form says the same in one warning line.
    proc = numalab("doctor", timeout=60)
    assert proc.returncode == 0
    if acc["accel"] == "tcg":
        assert "KVM is unusable" in proc.stderr + proc.stdout
