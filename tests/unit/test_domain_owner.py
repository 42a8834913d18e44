"""Who owns a numalab libvirt domain: the exact process (pid and start time), not a program name."""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from lab.vm.libvirt.libvirt_leftovers import METADATA_NS, process_start, with_metadata


def test_a_process_is_its_pid_and_start() -> None:
    me = process_start(os.getpid())
    assert me and me == process_start(os.getpid())
    child = subprocess.Popen(["sleep", "5"])
    try:
        assert process_start(child.pid) not in ("", me)
    finally:
        child.kill()
        child.wait()
    assert process_start(child.pid) == ""  # gone (and a reuse of its pid would start later)


def test_the_domain_metadata_names_its_owner(tmp_path: Path) -> None:
    xml = "<domain type='qemu'><name>numalab-x</name><memory unit='MiB'>64</memory></domain>"
    run = ET.fromstring(with_metadata(xml, tmp_path)).find(f"metadata/{{{METADATA_NS}}}run")
    assert run is not None
    assert run.get("pid") == str(os.getpid()) and run.get("pid_start") == process_start(os.getpid())
    assert run.get("run_dir") == str(tmp_path)
