"""A kernel under test is untrusted: a hostile root guest cannot touch the host through numalab
(real VMs under QEMU, the stock kernel)."""

from __future__ import annotations

import json
import os
import re
import stat

import pytest
from common import numalab

pytestmark = pytest.mark.vm


def test_a_hostile_guest_plants_links_setuid_files_devices_and_too_much_data(tmp_path) -> None:
    """The guest init's `hostile` fault, as root in the guest: symlinks to a host file under every name the
    host writes or reads (manifest.json, console.log, qemu.log, results.tar, guest-done), a setuid-root
    copy of busybox, a /dev/mem device node, a link to / in a directory, then 4 GiB of zeros."""
    target = tmp_path / "host-file"
    target.write_text("a host file the guest must not reach\n")
    before = target.stat()
    out = tmp_path / "run"
    proc = numalab("run", "--topology", "ring-2", "--workload", "idle", "--duration", "1",
                   "--test-fault", f"hostile={target}", "--guest-output-limit", "16M",
                   "--out", str(out), "--json", timeout=300)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    m = json.loads(proc.stdout)
    # Stopped at the limit (not after writing 4 GiB), and recorded with a clear status.
    assert m["status"] == "limit-exceeded", m["reason"]
    assert "over the 16 MiB limit (--guest-output-limit)" in m["reason"]
    assert "fault-hostile-planted" in [s["name"] for s in m["stages"]]
    # The host file is untouched.
    assert target.read_text() == "a host file the guest must not reach\n"
    assert (target.stat().st_mtime_ns, target.stat().st_size) == (before.st_mtime_ns, before.st_size)
    # The host saw only plain files in the share: no symlink, no device, no setuid bit.
    share = m["guest_share"]
    assert share["special"] == []
    seen = {e["name"]: e for e in share["unexpected"]}
    for name in ("manifest.json", "console.log", "qemu.log", "link", "suid", "mem", "dir/root"):
        assert seen[name]["type"] == "file" and seen[name]["mode"] == "0600", seen.get(name)
    # Stopped long before 4 GiB: no single file grows past the per-file cap (the console limit, 64 MiB,
    # plus 1 MiB), and the share as a whole is polled (under heavy host load a poll can come late).
    assert max(e["bytes"] for e in share["unexpected"]) <= 65 << 20
    assert share["bytes"] < 256 << 20
    # The run record is the host's: its manifest is a real file, nothing in it is a link or setuid.
    assert json.loads((out / "manifest.json").read_text())["status"] == "limit-exceeded"
    assert "host file" not in (out / "console.log").read_text()
    for root, dirs, files in os.walk(out):
        for name in dirs + files:
            st = os.lstat(os.path.join(root, name))
            assert not stat.S_ISLNK(st.st_mode) and not st.st_mode & 0o6000, os.path.join(root, name)
    # The readback sent before the attack still made it.
    assert (out / "topology.txt").is_file() and m["guest_topology_ok"] is True


def test_a_missing_trace_event_fails_the_run_naming_it(tmp_path) -> None:
    out = tmp_path / "run"
    proc = numalab("run", "--topology", "ring-2", "--workload", "idle", "--duration", "1",
                   "--event", "sched:no_such_event", "--out", str(out), "--json", timeout=300)  # fmt: skip
    assert proc.returncode == 1
    m = json.loads(proc.stdout)
    assert m["status"] == "workload-failed"
    assert m["reason"] == "the guest init failed: no such trace event sched:no_such_event in this kernel"
    assert "workload-start" not in [s["name"] for s in m["stages"]]  # refused before the workload ran


def test_a_comma_in_the_run_directory_reaches_qemu_as_part_of_the_path(tmp_path) -> None:
    """QEMU's option parser would read `path=/x,readonly=on` as an option: commas are doubled."""
    out = tmp_path / "a,readonly=on"
    proc = numalab("run", "--topology", "ring-2", "--workload", "idle", "--duration", "1",
                   "--out", str(out), "--json", timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "ok"
    assert re.search(r"^NUMALAB-STAGE [0-9a-f]{32} done ", (out / "console.log").read_text(), re.M)
    argv = json.loads(proc.stdout)["backend"]["argv"]
    partial = out.parent / f".{out.name}.partial"
    assert f"file,id=console,path={str(partial).replace(',', ',,')}/console.log" in argv
