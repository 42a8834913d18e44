"""The guest image: a small initramfs built from host binaries, cached by content.

An image is concatenated cpio archives (the kernel unpacks them in turn):

* **base** (kernel-independent): static busybox, ``numalab-tracegrab``,
  ``numalab-model-start`` (one instruction that starts the access-matrix plugin's model) and the guest init;
* **workload** (per workload binary): the static workload programs the run's
  workload declares (``Workload.programs``: ``numa01``, ``pairs``, ...). Each is
  about 0.8 MB of static libc, and every MB of initramfs costs a TCG boot about
  10 ms (QEMU loads it, the kernel unpacks it), so a run carries only its own;
* **tools** (only when the run needs them): the real ``trace-cmd`` (trace modes
  ``extract`` and ``record``) and ``perf`` (declared in ``Workload.tools`` by the
  ``perf bench numa`` workloads),
  each with its shared-library closure (resolved with ``ldd``, as dracut does, by
  lab.workloads.image_layers, which hands this module the files);
  perf's closure is most of an image (about 40 MB), and unpacking it costs a
  TCG guest a fifth of a second, so a run that does not use it goes without;
* **modules** (per kernel): the virtio/9p modules a modular kernel needs, with
  their dependencies in load order;
* **user** (a user's workload): its files in ``/workload`` and the host files it needs
  at their own paths (its tools, the shared libraries of those and of its programs);
* **plan** (per run): ``/plan/plan.sh``, the settings the init runs.

Base, workload, tools and modules are cached under ``cache_root()/images`` by a hash of
their content, so they are rebuilt only when an input changes.

This module lays out what it is given (program names, host paths); what a workload needs
is worked out above it, in lab.workloads.image_layers: it imports nothing of lab.workloads.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from lab.errors import LabError
from lab.guest import cpio
from lab.paths import COMPLETE, REPO_ROOT, TOOL_TEXT, cache_dir, publish_dir, write_text_atomic

BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")
TRACE_CMD = "/usr/bin/trace-cmd"  # the trace modes that run trace-cmd take the host's (trace_tools)
INIT = REPO_ROOT / "images" / "guest" / "init"
GUEST_DIR = "workload"  # a user's workload's files in the guest (/workload, its working directory)
WORKLOAD_SRC = REPO_ROOT / "images" / "workloads"
TRACEGRAB = "numalab-tracegrab"
MODEL_START = "numalab-model-start"  # images/workloads/model_start.c: the instruction the plugin's arm=mark waits for
TOOLS = (TRACEGRAB, MODEL_START)  # the base's own programs, never a workload's
# What the init mounts with `mount -a` (the results share comes later, after any modules).
FSTAB = """\
proc /proc proc defaults 0 0
sysfs /sys sysfs defaults 0 0
devtmpfs /dev devtmpfs defaults 0 0
debugfs /sys/kernel/debug debugfs defaults 0 0
tracefs /sys/kernel/tracing tracefs defaults 0 0
tmpfs /tmp tmpfs defaults 0 0
"""
# Modules a modular (distro) kernel needs: for the results share, and pvpanic's driver (the ISA device is
# ACPI's QEMU0001), through which the guest kernel tells the host it panicked (lab.run.status).
NEEDED_MODULES = ("virtio_pci", "9pnet_virtio", "9p", "pvpanic_mmio")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _host_file(path: str, into: str | None = None) -> cpio.Entry:
    real = Path(path).resolve()
    data = real.read_bytes()
    return cpio.file_entry(into or path, data, executable=os.access(real, os.X_OK))


def find_busybox() -> str:
    for cand in BUSYBOX_CANDIDATES:
        if Path(cand).exists():
            return cand
    raise LabError("busybox: not found; install busybox-static (make setup)")


def build_workloads() -> Path:
    """Build the static workload binaries, cached by a hash of their sources."""
    srcs = sorted(p for p in WORKLOAD_SRC.iterdir() if p.is_file() and p.suffix in (".c", ".h", ""))
    key = _sha(b"".join(p.name.encode() + p.read_bytes() for p in srcs))[:16]
    out = cache_dir("workloads") / key
    if (out / ".complete").exists():
        return out
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{key}."))
    res = subprocess.run(["make", "-s", "-C", str(WORKLOAD_SRC), f"OUT={tmp}"], capture_output=True, **TOOL_TEXT)
    if res.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        last = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise LabError(f"images/workloads: build failed: {last[0]}")
    (tmp / COMPLETE).touch()
    return publish_dir(tmp, out)


def minimal_initrd(path: Path, init: str) -> Path:
    """An initramfs of static busybox and ``init`` (a script run by /bin/busybox sh): the KVM
    probe's guest, and the boot benchmark's floor."""
    with open(path, "wb") as f:
        cpio.write_cpio(
            f,
            [
                cpio.directory("bin"),
                cpio.directory("proc"),
                cpio.file_entry("bin/busybox", Path(find_busybox()).read_bytes(), executable=True),
                cpio.file_entry("init", init.encode(), executable=True),
            ],
        )
    return path


def _busybox_applets(busybox: str) -> list[str]:
    proc = subprocess.run([busybox, "--list"], capture_output=True, text=True)
    names = [n for n in proc.stdout.split() if re.fullmatch(r"[\w.\[\]-]+", n) and n != "busybox"]
    if proc.returncode != 0 or "sh" not in names:
        raise LabError(f"{busybox}: 'busybox --list' failed; reinstall busybox-static")
    return sorted(names)


def base_entries() -> list[cpio.Entry]:
    entries: dict[str, cpio.Entry] = {}

    def add(e: cpio.Entry) -> None:
        entries[e.path] = e

    busybox = find_busybox()
    add(_host_file(busybox, "bin/busybox"))
    # The applet links, made here rather than by `busybox --install` in the guest (hundreds of
    # symlink calls at every boot). Our own binaries in /usr/bin come first in the guest's PATH.
    for applet in _busybox_applets(busybox):
        add(cpio.symlink(f"bin/{applet}", "busybox"))
    for tool in TOOLS:
        add(_host_file(str(build_workloads() / tool), f"usr/bin/{tool}"))
    add(cpio.file_entry("init", INIT.read_bytes(), executable=True))
    add(cpio.file_entry("etc/fstab", FSTAB.encode()))
    dirs = ["proc", "sys", "dev", "tmp", "results", "plan", "usr/sbin", "sbin", "lib/modules", "etc"]
    return cpio.parents(list(entries) + [d + "/x" for d in dirs]) + list(entries.values())


def _cached_archive(kind: str, entries: list[cpio.Entry]) -> Path:
    h = hashlib.sha256()
    for e in entries:
        h.update(f"{e.path}\0{e.mode}\0".encode(errors="surrogateescape") + _sha(e.data).encode())
    path = cache_dir("images") / f"{kind}-{h.hexdigest()[:16]}.cpio"
    if not path.exists():
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", delete=False) as f:
            cpio.write_cpio(f, entries)
        os.chmod(f.name, 0o644)  # readable by a hypervisor running as another user
        os.replace(f.name, path)
    return path


def _base_fingerprint() -> str:
    """A cheap stand-in for the base archive's content hash: busybox's identity (path, inode,
    size, mtime), the workload binaries' directory (named by a hash of their sources), the init
    and fstab, and the code that lays the archive out."""
    busybox = Path(find_busybox()).resolve()
    st = busybox.stat()
    parts = [
        f"{busybox}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}",
        str(build_workloads()),
        _sha(INIT.read_bytes() + FSTAB.encode()),
        _sha(Path(__file__).read_bytes() + Path(cpio.__file__).read_bytes()),
    ]
    return _sha("\0".join(parts).encode())[:24]


def base_image() -> Path:
    """The kernel-independent part of the initramfs (cached). Found by a fingerprint of its
    inputs when it was built before (reading, hashing and listing busybox's applets again takes
    30-70 ms of every run); built from its entries and their content hash otherwise."""
    index = cache_dir("images") / "base-index"
    fingerprint = _base_fingerprint()
    known = index / fingerprint
    try:
        path = cache_dir("images") / known.read_text().strip()
        if path.is_file():
            return path
    except OSError:
        pass
    path = _cached_archive("base", base_entries())
    index.mkdir(exist_ok=True)
    write_text_atomic(known, path.name + "\n")
    return path


def trace_tools(trace_mode: str, tracing: bool) -> tuple[str, ...]:
    """The tools the trace needs in the guest: trace-cmd (TRACE_CMD) unless the trace is taken raw
    (numalab-tracegrab, in the base) or not at all."""
    return ("trace-cmd",) if tracing and trace_mode != "raw" else ()


def workload_binaries(programs: tuple[str, ...], workload: str) -> tuple[str, ...]:
    """The lab's own programs the workload ``workload`` declares (``Workload.programs``), each one
    that images/workloads builds; the base's tools (TOOLS) are never a workload's."""
    built = build_workloads()
    for name in programs:
        if name in TOOLS or not (built / name).is_file():
            raise LabError(f"workload {workload}: images/workloads builds no workload program {name!r}")
    return programs


def workload_image(names: tuple[str, ...]) -> Path | None:
    """The workload binaries a run starts, as an archive to lay over the base (cached); None
    for none."""
    if not names:
        return None
    built = build_workloads()
    entries = [_host_file(str(built / name), f"usr/bin/{name}") for name in names]
    return _cached_archive("workload", entries)


def tool_image(name: str, files: list[str]) -> Path:
    """One host tool, given as its host files (the binary and its shared-library closure, each at its own
    path), as an archive to lay over the base (cached)."""
    entries = {e.path: e for e in map(_host_file, files)}
    return _cached_archive(f"tool-{name}", cpio.parents(list(entries)) + list(entries.values()))


def user_image(files: tuple[tuple[str, str], ...], host_files: tuple[str, ...]) -> Path:
    """A user's workload, given as ``files`` (host path, name in /workload: carried there, executable whatever
    their mode, so that ``./repro`` just works) and ``host_files`` (carried at their own paths: its tools and
    the shared libraries of those and of its files), as an archive (cached by content)."""
    entries: dict[str, cpio.Entry] = {}
    for host, guest in files:
        path = f"{GUEST_DIR}/{guest}"
        entries[path] = cpio.file_entry(path, Path(host).read_bytes(), executable=True)
    entries |= {e.path: e for e in map(_host_file, host_files)}
    paths = [*entries, f"{GUEST_DIR}/x"]
    return _cached_archive("user", cpio.parents(paths) + list(entries.values()))


SCHEDULER_DIR = "scheduler"  # a --scheduler binary's guest directory (/scheduler/NAME)


def scheduler_image(binary: Path, name: str, host_files: tuple[str, ...]) -> Path:
    """A sched_ext scheduler (--scheduler): its binary as /scheduler/NAME (executable) and ``host_files`` (its
    shared libraries) at their own paths, as an archive (cached by content)."""
    path = f"{SCHEDULER_DIR}/{name}"
    entries: dict[str, cpio.Entry] = {path: cpio.file_entry(path, binary.read_bytes(), executable=True)}
    entries |= {e.path: e for e in map(_host_file, host_files)}
    return _cached_archive("scheduler", cpio.parents(list(entries)) + list(entries.values()))


# dax kmem for the CPU-less slow nodes of a tiered topology (lab.topology.model.tiers): the HMEM driver
# makes their soft-reserved memory a dax device, the init binds it to kmem.
TIER_MODULES = ("dax_hmem", "kmem")


def tier_modules(topo) -> tuple[str, ...]:
    """The extra modules a topology needs (TIER_MODULES when it has slow nodes)."""
    return TIER_MODULES if topo.tiers and topo.tiers.slow_nodes else ()


def _module_order(modules_dir: Path, extra: tuple[str, ...] = ()) -> list[str]:
    """NEEDED_MODULES (and ``extra``) and their dependencies from modules.dep, dependencies first."""
    deps: dict[str, list[str]] = {}
    for line in (modules_dir / "modules.dep").read_text().splitlines():
        mod, _, rest = line.partition(":")
        deps[mod] = rest.split()
    by_name = {re.sub(r"\.ko(\.\w+)?$", "", Path(m).name).replace("-", "_"): m for m in deps}
    order: list[str] = []

    def visit(mod: str) -> None:
        if mod in order:
            return
        # modules.dep lists the full closure; visit in reverse so deepest load first.
        for dep in reversed(deps.get(mod, [])):
            visit(dep)
        order.append(mod)

    for name in (*NEEDED_MODULES, *extra):
        if name not in by_name:
            continue  # built into this kernel
        visit(by_name[name])
    return order


def modules_image(modules_dir: Path | None, extra: tuple[str, ...] = ()) -> Path | None:
    """The modules a modular kernel needs (and ``extra`` ones), decompressed, plus their load order."""
    if modules_dir is None:
        return None
    order = _module_order(modules_dir, extra)
    if not order:
        return None
    entries = []
    names = []
    for mod in order:
        data = (modules_dir / mod).read_bytes()
        name = Path(mod).name
        if name.endswith(".xz"):
            data, name = lzma.decompress(data), name[:-3]
        elif not name.endswith(".ko"):
            raise LabError(f"{modules_dir / mod}: unsupported module compression")
        entries.append(cpio.file_entry(f"lib/modules/{name}", data))
        names.append(name)
    entries.append(cpio.file_entry("lib/modules/numalab.order", ("\n".join(names) + "\n").encode()))
    return _cached_archive("modules", cpio.parents([e.path for e in entries]) + entries)


def assemble_initrd(out: Path, parts: list[Path | None], plan_sh: str, stage_token: str = "") -> Path:
    """Concatenate the cached archives (base, workload, tools, modules; None is skipped) and a
    plan archive into one initrd file. ``stage_token`` (the run's, lab.vm.console) goes in
    ``/plan/token``, which the init reads and deletes first thing: no other guest process sees it there."""
    entries = [cpio.directory("plan"), cpio.file_entry("plan/plan.sh", plan_sh.encode())]
    if stage_token:
        entries.append(cpio.Entry("plan/token", stat.S_IFREG | 0o400, stage_token.encode() + b"\n"))
    with open(out, "wb") as f:
        for part in parts:
            if part is not None:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, f, 1 << 20)
        cpio.write_cpio(f, entries)
    return out
