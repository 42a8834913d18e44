"""The TCG guest's TSC frequency: learned from a sound calibration, passed as tsc_early_khz=, and a guest
that trusted a deviating PIT is caught. The dmesg lines are from real runs on this host under load."""

from __future__ import annotations

import json

import pytest

from lab.vm.tcg import tcg_boot, tcg_clock

# ring-4-c1 numa01 on the baseline kernel, host load average ~12: the guest clock ran 52x fast.
BAD = (
    "[    0.000000] tsc: Fast TSC calibration failed\n"
    "[    0.016000] tsc: PIT calibration deviates from HPET: 44453 2298615\n"
    "[    0.016000] tsc: Using PIT calibration value\n"
    "[    0.016000] tsc: Detected 44.453 MHz processor\n"
)
# ring-2 pairs, same kernel and hour: the PIT gave up, the HPET was used.
GOOD = (
    "[    0.020000] tsc: Unable to calibrate against PIT\n"
    "[    0.020000] tsc: using HPET reference calibration\n"
    "[    0.020000] tsc: Detected 2297.448 MHz processor\n"
)
LPJ = ("[    0.354358] Calibrating delay loop (skipped), value calculated using timer frequency.. "
       "4594.89 BogoMIPS (lpj=9189792)\n")  # fmt: skip


def test_clock_problem_names_both_frequencies() -> None:
    p = tcg_clock.clock_problem(BAD)
    assert p is not None and "44.5 MHz" in p and "2298.6 MHz" in p and "51.7x too fast" in p
    assert tcg_clock.clock_problem(GOOD) is None
    # a PIT within 5% of the HPET is fine, and so is a deviation the kernel did not act on
    assert tcg_clock.clock_problem(BAD.replace("44453", "2290000")) is None
    assert tcg_clock.clock_problem(BAD.replace("tsc: Using PIT calibration value\n", "")) is None


def test_only_a_sound_calibration_is_learned_and_passed_on(tmp_path, monkeypatch) -> None:
    """(as where this machine's own kernel log cannot be read: see test_tcg_boot for the machine's own figure)"""
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tcg_clock, "host_tsc_khz", lambda dmesg=None: None)
    image = tmp_path / "bzImage"
    image.write_bytes(b"kernel")
    assert tcg_clock.trusted_khz(BAD) is None and tcg_clock.trusted_khz(GOOD) == 2297448
    assert tcg_clock.trusted_khz("[    0.0] tsc: Detected 2297.448 MHz processor\n") is None  # source unknown
    assert tcg_clock.trusted_khz("[ 1.0] tsc: Refined TSC clocksource calibration: 2299.998 MHz\n") == 2299998
    assert tcg_boot.learn(image, "tcg", BAD + LPJ) == 9189792
    assert tcg_boot.boot_args(image, "tcg") == f"{tcg_boot.TCG_ARGS} lpj=9189792"  # no sound clock yet
    tcg_boot.learn(image, "tcg", GOOD + LPJ)
    assert tcg_boot.boot_args(image, "tcg") == f"{tcg_boot.TCG_ARGS} tsc_early_khz=2297448 lpj=9189792"
    # learned once per host: a later boot does not move it, a remote host has its own
    assert tcg_clock.learn(GOOD.replace("2297.448", "2301.000")) == 2297448
    assert tcg_clock.clock_args("qemu+ssh://lab2/system") == ""
    assert tcg_boot.boot_args(image, "kvm") == ""
    (tmp_path / "cache" / "tcg-tsc.json").write_text('{"local": 12}')  # out of range: ignored
    assert tcg_clock.clock_args() == ""


@pytest.mark.vm
def test_a_tcg_guest_boots_with_the_learned_tsc_frequency(tmp_path) -> None:
    """A real TCG boot: the guest takes tsc_early_khz= as its TSC frequency (no PIT calibration to go wrong),
    and its clock agrees with the host's: the workload's guest-timed length fits in the VM's host-timed life."""
    from common import numalab

    if tcg_clock.clock_args() == "":
        tcg_clock.learn(GOOD)  # what a first sound boot on this host teaches
    khz = int(tcg_clock.clock_args().split("=")[1])
    out = tmp_path / "run"
    proc = numalab("run", "--topology", "ring-2", "--cpus-per-node", "1", "--mem-per-node", "256M", "--kernel",
                   "stock", "--workload", "idle", "--duration", "2", "--accel", "tcg", "--out", str(out), "--json",
                   timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = json.loads(proc.stdout)
    dmesg = (out / "dmesg-boot.txt").read_text()
    assert f"tsc_early_khz={khz}" in (out / "cmdline.txt").read_text()
    # "MHz processor" when the early CPU calibration failed; "MHz TSC" next to a CPU figure when it did not
    mhz = f"{khz / 1000:.3f}"
    assert f"tsc: Detected {mhz} MHz processor" in dmesg or f"tsc: Detected {mhz} MHz TSC" in dmesg
    assert "PIT calibration deviates" not in dmesg and tcg_clock.clock_problem(dmesg) is None
    assert 2 <= m["timings"]["workload_s"] < m["timings"]["vm_s"]
