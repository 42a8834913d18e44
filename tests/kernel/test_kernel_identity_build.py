"""A kernel is what it says it is (issue 35), on real builds and real boots.

The failing case: two builds that differ in one constant whose compressed payloads have the same size, so
``arch/x86/boot/compressed/piggy.S`` is byte-identical and ccache (depend mode) used to answer ``piggy.o``
with the previous build's kernel inside. The source is a git tree at a tag (a repository made once from
Debian's 6.1 source, deterministic, kept in the cache), as a developer's clone would be; the patch changes
``sysctl_numa_balancing_scan_size`` (256 MB), which the guest reads back from debugfs.

- numalab's recipe: 128 then 64, each ``--rebuild`` (one-file incremental builds), each boots its own value and
  its guest shows the build's build-id (identity verified);
- the recipe before the fix (``NUMALAB_TEST_STALE_CCACHE=1``: plain ccache, no payload check, its own warm
  directory): 128 then 64 again; the second bzImage carries the first's kernel, and the run says so:
  ``kernel-mismatch``, the guest reading back 128.

Bounded: four incremental builds (about a minute each on 2 cores) and four idle 1-second boots; the repository
(about 2 minutes) and the stale recipe's directory (ccache hits) are made once per machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import numalab

pytestmark = [pytest.mark.vm, pytest.mark.kernel_build]

TAG = "v6.1-debian"  # the test repository's (tests/kernel/conftest.py)
# One timestamp for the kernel's banner, so the two builds differ in the constant alone (the case that failed had
# the same compressed size by chance; this makes it so by design).
TIMESTAMP = {"KBUILD_BUILD_TIMESTAMP": "Thu Jan  1 00:00:00 UTC 2026"}


def _scan_patch(tmp_path: Path, mb: int) -> Path:
    p = tmp_path / f"scan-{mb}.patch"
    p.write_text(
        "--- a/kernel/sched/fair.c\n+++ b/kernel/sched/fair.c\n@@ -1105,3 +1105,3 @@\n"
        " /* Portion of address space to scan in MB */\n-unsigned int sysctl_numa_balancing_scan_size = 256;\n"
        f"+unsigned int sysctl_numa_balancing_scan_size = {mb};\n \n"
    )
    return p


def _build(repo: Path, patch: Path, name: str, env: dict) -> dict:
    proc = numalab("kernel", "build", "--source", f"{repo}@{TAG}", "--patch", str(patch), "--name", name,
                   "--rebuild", "--json", env=env, timeout=1800)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _boot(name: str, out: Path) -> tuple[dict, str | None]:
    proc = numalab("run", "--topology", "ring-2", "--cpus-per-node", "1", "--mem-per-node", "256M", "--kernel",
                   name, "--workload", "idle", "--duration", "1", "--out", str(out), "--json", timeout=600)  # fmt: skip
    m = json.loads(proc.stdout)
    scan = next((ln.split()[1] for ln in m["settings"]["readback"] if ln.startswith("scan_size_mb ")), None)
    return m, scan


def test_each_one_constant_build_boots_its_own_kernel_and_a_stale_one_is_caught(kernel_repo, tmp_path) -> None:
    env = {**TIMESTAMP}
    built = {mb: _build(kernel_repo, _scan_patch(tmp_path, mb), f"scan-{mb}", env) for mb in (128, 64)}
    for mb, meta in built.items():
        assert meta["payload_build_id"] == meta["build_id"] and meta["recipe"] == "checked"
        m, scan = _boot(f"scan-{mb}", tmp_path / f"run-{mb}")
        assert m["status"] == "ok", m["reason"]
        assert scan == str(mb), (mb, scan)
        assert m["kernel"]["identity"] == "verified" and m["kernel"]["build_id"] == meta["build_id"]
    # The case that failed: the two payloads wrap into the same piggy.S, byte for byte.
    assert built[128]["piggy_sha256"] == built[64]["piggy_sha256"]
    assert built[128]["build_id"] != built[64]["build_id"]

    stale_env = {**env, "NUMALAB_TEST_STALE_CCACHE": "1"}
    old = {mb: _build(kernel_repo, _scan_patch(tmp_path, mb), f"stale-{mb}", stale_env) for mb in (128, 64)}
    assert old[64]["recipe"] == "stale-test"
    assert old[64]["payload_build_id"] == old[128]["build_id"] != old[64]["build_id"]  # the old payload
    m, scan = _boot("stale-64", tmp_path / "run-stale")
    assert m["status"] == "kernel-mismatch", (m["status"], m["reason"])
    assert scan == "128"  # the kernel that booted is the previous build's
    assert old[128]["build_id"][:16] in m["reason"] and old[64]["build_id"][:16] in m["reason"]
    assert m["kernel"]["identity"] == "mismatch"
