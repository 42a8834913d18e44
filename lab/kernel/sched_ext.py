"""sched_ext's side of a kernel build: the kernel tree's own example schedulers (``tools/sched_ext``), built
against the build's ``vmlinux`` with clang after the bzImage, and stored in the build's cache entry
(``<entry>/schedulers/scx_simple``...); and what a kernel says about sched_ext (its config).

A build asks for them by asking for ``CONFIG_SCHED_CLASS_EXT=y`` (the ``sched-ext`` fragment,
kernel-configs/sched-ext.config). Each step is timed: the build log and the build's meta.json
(``schedulers.steps``) say what it cost.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from lab.errors import LabError
from lab.kernel.fragments import Fragment, parse_config, requested

SYMBOL = "CONFIG_SCHED_CLASS_EXT"
# The examples of the kernel tree (tools/sched_ext), by binary, with the name their ops carry (.name in the
# .bpf.c: what /sys/kernel/sched_ext/root/ops shows while one runs). Not scx_flatcg: a cgroup scheduler, it
# needs CONFIG_CGROUP_SCHED (struct cgroup, the ops' cgroup_* callbacks), which numalab's kernels leave out (the
# fair class would get task groups); with a fragment that adds CGROUPS and CGROUP_SCHED it builds as --scheduler PATH.
EXAMPLES: dict[str, str] = {"scx_simple": "simple", "scx_qmap": "qmap", "scx_central": "central"}
SCHEDULERS_DIR = "schedulers"
# Bump when the recipe below changes what a sched_ext build's schedulers are (part of its cache key).
RECIPE = 2
CLANG = os.environ.get("NUMALAB_CLANG", "clang-16")
LLVM_STRIP = os.environ.get("NUMALAB_LLVM_STRIP", "llvm-strip-16")

Progress = Callable[[str], None]


def wants_schedulers(fragments: list[Fragment]) -> bool:
    """Whether a build's fragments ask for sched_ext (then its build also builds the example schedulers)."""
    return requested(fragments).get(SYMBOL, ("n", ""))[0] == "y"


def config_has_sched_ext(config: Path | None) -> bool:
    """Whether a kernel's saved .config has sched_ext built in."""
    if config is None or not config.is_file():
        return False
    return parse_config(config.read_text(errors="replace")).get(SYMBOL) == "y"


def shipped(config: Path | None) -> dict[str, Path]:
    """The example schedulers a built kernel carries (name -> binary), from its cache entry (beside its config)."""
    if config is None:
        return {}
    d = config.parent / SCHEDULERS_DIR
    return {n: d / n for n in EXAMPLES if (d / n).is_file()}


def _tools_identity() -> str:
    out = []
    for tool in (CLANG, "pahole"):
        try:
            text = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
        except OSError:
            text = "missing"
        out.append(f"{tool}: {text.strip().splitlines()[0] if text.strip() else 'missing'}")
    return "; ".join(out)


def key_part(fragments: list[Fragment]) -> dict:
    """What the cache key of a build that asks for sched_ext adds: the recipe and the clang and pahole used
    (the BTF and the BPF objects are theirs). {} for other builds: their keys stay as they were."""
    if not wants_schedulers(fragments):
        return {}
    return {"sched_ext": {"recipe": RECIPE, "tools": _tools_identity()}}


def check_tools() -> None:
    """clang and pahole on the host, before a sched_ext build starts (one line naming what is missing)."""
    missing = [t for t in (CLANG, LLVM_STRIP, "pahole") if shutil.which(t) is None]
    if missing:
        raise LabError(f"--fragment sched-ext: {', '.join(missing)} not found (make setup installs clang-16, "
                       "llvm-16 and dwarves)")  # fmt: skip


def _step(name: str, cmd: list[str], cwd: Path, log, env: dict) -> float:
    log.write(f"numalab: sched_ext step {name}\n$ {' '.join(cmd)}\n")
    log.flush()
    t0 = time.monotonic()
    rc = subprocess.run(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    seconds = round(time.monotonic() - t0, 1)
    log.write(f"numalab: sched_ext step {name}: exit {rc} after {seconds:g} s\n")
    log.flush()
    if rc != 0:
        raise LabError(f"kernel build: the sched_ext step {name!r} failed (exit {rc}; log: {log.name})")
    return seconds


def build_examples(tree: Path, out: Path, jobs: int, log, progress: Progress) -> tuple[dict[str, Path], list[dict]]:
    """Build tools/sched_ext's examples against ``out/vmlinux`` (its BTF) in a warm directory beside ``out``:
    first libbpf, bpftool and vmlinux.h, then each scheduler. Returns (name -> binary, the timed steps)."""
    work = out.parent / f"{out.name}.sched_ext"
    work.mkdir(exist_ok=True)
    env = {**os.environ, "LC_ALL": "C"}
    base = ["make", "-C", str(tree / "tools/sched_ext"), f"O={work}", f"VMLINUX_BTF={out / 'vmlinux'}",
            f"CLANG={CLANG}", f"LLVM_STRIP={LLVM_STRIP}", f"-j{jobs}"]  # fmt: skip
    build = work / "build"
    steps = []
    prep = [str(build / "obj/libbpf/libbpf.a"), str(build / "sbin/bpftool"), str(build / "include/vmlinux.h")]
    progress("building the sched_ext examples: libbpf, bpftool, vmlinux.h")
    steps.append({"step": "libbpf+bpftool+vmlinux.h", "seconds": _step("libbpf+bpftool+vmlinux.h",
                                                                        [*base, *prep], tree, log, env)})  # fmt: skip
    binaries = {}
    for name in EXAMPLES:
        progress(f"building the sched_ext example {name}")
        steps.append({"step": name, "seconds": _step(name, [*base, name], tree, log, env)})
        binary = build / "bin" / name
        if not binary.is_file():
            raise LabError(f"kernel build: the sched_ext step {name!r} made no {binary} (log: {log.name})")
        binaries[name] = binary
    return binaries, steps
