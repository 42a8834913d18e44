"""The guest init's workload_pids (images/guest/init): a workload's processes, two levels down, for --node-maps.

It reads the kernel's children file when there is one, and otherwise every process's parent from /proc/PID/stat:
numalab's own allnoconfig-based kernels have no CONFIG_PROC_CHILDREN, and there the view saw the workload's first
process alone (0.7 MiB of numa01's hundreds). Both ways are run here under the host's busybox, over a real
process tree of this host; the fallback by a copy of the function whose test for the children file always fails
(this host's kernel has the file). tests/vm/test_vm_views.py boots the baseline kernel, where only the fallback
can find the processes."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from common import require_setup_package

INIT = Path(__file__).resolve().parents[2] / "images" / "guest" / "init"
TREE = 'sh -c "sleep 9 & sh -c \\"sleep 9 & sleep 9 & wait\\" & wait" & top=$!; sleep 0.5'


def _function(no_children_file: bool) -> str:
    text = INIT.read_text()
    body = re.search(r"^workload_pids\(\) \{\n.*?^\}\n", text, re.M | re.S)
    assert body, "images/guest/init has no workload_pids()"
    fn = body.group(0)
    if no_children_file:
        fn = fn.replace("[ -r /proc/$w/task/$w/children ]", "false", 1)
        assert "false" in fn
    return fn


def _pids(no_children_file: bool) -> tuple[int, list[int]]:
    script = f"{_function(no_children_file)}\n{TREE}\nworkload_pids $top\necho $top; echo $all\nkill $all\n"
    proc = subprocess.run(["busybox", "sh", "-c", script], capture_output=True, text=True, timeout=20)
    assert proc.returncode == 0, proc.stderr
    top, found = proc.stdout.splitlines()[:2]
    return int(top), sorted(map(int, found.split()))


def test_the_children_file_and_the_parents_in_stat_find_the_same_processes() -> None:
    require_setup_package(shutil.which("busybox") is not None, "busybox", "busybox-static")
    top, by_file = _pids(no_children_file=False)
    # the top shell, its sleep and its inner shell, and that shell's two sleeps
    assert by_file[0] == top and len(by_file) == 5, by_file
    top2, by_stat = _pids(no_children_file=True)
    assert by_stat[0] == top2 and len(by_stat) == 5, by_stat
