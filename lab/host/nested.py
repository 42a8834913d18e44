"""numalab inside a numalab guest: a machine with KVM and several NUMA nodes, made on one that has neither.

TCG emulates AMD SVM with nested paging (``-cpu max``), so a guest booted under TCG can run KVM. The
*outer* guest is a numalab topology (its nodes are the NUMA nodes the inner numalab sees as its host's),
booted with Debian's stock kernel, which loads ``kvm_amd``. Inside it:

* the host's root filesystem is shared read-only over virtio-9p (tag ``hostroot``) and made the outer
  guest's root through an overlay whose upper layer is the guest's own tmpfs: numalab's checkout, its
  venv, QEMU and trace-cmd are the host's own files, every write stays in the guest's memory, and
  nothing on the host changes except what comes back through the results share;
* ``/dev/kvm`` belongs to group ``kvm`` (0660, as Debian's udev rule makes it) and the user is added to
  that group (in the overlay's ``/etc/group``);
* the script runs as that user through ``setpriv --reset-env``: an ordinary user's PATH
  (``/usr/local/bin:/bin:/usr/bin``, no ``/usr/sbin``), its own HOME and groups;
* what the script writes to ``$NESTED_OUT`` comes back as ``nested.tar``, unpacked into ``out``.

A ``cache_from`` directory (the calling user's numalab cache, by default) is laid under the inner
user's cache: each of its entries is a link there, read-only, so the stock kernel and built kernels
are not fetched or built again inside; whatever the inner numalab makes anew is its own. The inner
guest runs at TCG speed (KVM over TCG), so the tier proves paths, not speed.
"""

from __future__ import annotations

import os
import pwd
import shlex
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.guest import cpio
from lab.guest.image import minimal_initrd, modules_image
from lab.kernel.resolve import resolve_kernel
from lab.paths import REPO_ROOT, cache_root
from lab.placement.host_inventory import read_inventory
from lab.placement.pinning import plan_placement
from lab.record_files import CONSOLE_LOG
from lab.topology.model import Topology
from lab.vm.backend import VmRequest
from lab.vm.qemu.qemu_argv import BootSpec
from lab.vm.qemu.qemu_backend import QemuBackend
from lab.vm.share import ShareLimits, make_share

# 9p for the host's root (virtio and 9p come with lab.guest.image.NEEDED_MODULES), the overlay over it,
# and KVM for AMD (its dependencies, irqbypass and ccp, come from modules.dep).
NESTED_MODULES = ("overlay", "kvm_amd")
MARK = "NUMALAB-NESTED"
NESTED_OUT = "/nested-out"
TAR = "nested.tar"
OUTPUT_LIMIT = 1 << 30  # what the outer guest may send back

_INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
say() { echo "@MARK@ $*"; }
fail() { say failed "$*"; poweroff -f; }
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
while read -r m; do insmod "/lib/modules/$m" || say insmod-failed "$m"; done < /lib/modules/numalab.order
mkdir -p /results /host /ovl /newroot
O="trans=virtio,version=9p2000.L,msize=512000"
mount -t 9p -o "$O,cache=none" results /results || fail results-mount
mount -t 9p -o "$O,cache=loose,ro" hostroot /host || fail hostroot-mount
mount -t tmpfs -o mode=755 tmpfs /ovl && mkdir /ovl/upper /ovl/work
mount -t overlay overlay -o lowerdir=/host,upperdir=/ovl/upper,workdir=/ovl/work /newroot || fail overlay
R=/newroot
mount -t proc proc $R/proc; mount -t sysfs sysfs $R/sys; mount -t devtmpfs devtmpfs $R/dev
# (no tmpfs over /tmp: the checkout may live there, as a CI's clean one does; the overlay keeps writes in memory)
mkdir -p $R/dev/shm $R/dev/pts && mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm && mount -t devpts devpts $R/dev/pts
mount -t debugfs debugfs $R/sys/kernel/debug 2>/dev/null
mkdir -p $R/@OUT@ $R/nested && cp /nested/* $R/nested/
has() { grep -q -w "$1" /proc/cpuinfo && echo "$1"; }
say booted "$(grep -c ^processor /proc/cpuinfo)" $(has svm) $(has npt) $(test -c /dev/kvm && echo /dev/kvm)
chroot $R /bin/sh /nested/prepare.sh > $R/@OUT@/prepare.log 2>&1 || fail prepare "$(tail -1 $R/@OUT@/prepare.log)"
say prepared
# (the script's output to script.log and, each line behind "| ", to the console: the host sees it as it comes)
{ chroot $R /usr/bin/setpriv @SETPRIV@ --reset-env /bin/bash -c 'cd @REPO@ && exec bash /nested/script.sh' 2>&1
  echo $? > /ovl/script.rc; } | tee $R/@OUT@/script.log | while IFS= read -r l; do echo "| $l"; done
say script-exit "$(cat /ovl/script.rc)"
tar -cf /ovl/@TAR@ -C $R/@OUT@ . && dd if=/ovl/@TAR@ of=/results/@TAR@ bs=1M 2>/dev/null || say send-failed
say done
poweroff -f
"""

# Run as root inside the overlay, before the script: the user joins kvm, /dev/kvm is the group's (as udev
# makes it), the repository's directories can be entered, the cache is laid out.
_PREPARE = r"""set -e
U=@USER@
if [ -e /dev/kvm ]; then chgrp kvm /dev/kvm && chmod 0660 /dev/kvm; fi
if [ "$U" != root ]; then
  grep -q "^kvm:" /etc/group || echo "kvm:x:$(( 60000 + $$ % 1000 )):" >> /etc/group
  sed -i "/^kvm:/{s/:$/:$U/;t;/[:,]$U\(,\|$\)/!s/$/,$U/}" /etc/group
  d=@REPO@; while [ "$d" != / ]; do chmod o+x "$d"; d=$(dirname "$d"); done
fi
H=$(getent passwd "$U" | cut -d: -f6)
mkdir -p "$H" && chown "$U:" "$H"
C=@CACHE@
mkdir -p "$C"
F=@CACHE_FROM@
# The kernels and image layers the caller's cache has, each complete entry a link (read-only here): nothing
# half-made, and no host verdict or calibration (KVM's, TCG's delay loop): those are this machine's to find.
if [ -n "$F" ] && [ -d "$F" ]; then
  d=$F; while [ "$d" != / ]; do chmod o+x "$d"; d=$(dirname "$d"); done
  mkdir -p "$C/kernels/builds" "$C/kernels/built" "$C/images" "$C/workloads"
  [ -d "$F/kernels/stock" ] && ln -sfn "$F/kernels/stock" "$C/kernels/stock"
  for e in "$F"/kernels/builds/*; do [ -e "$e/meta.json" ] && ln -sfn "$e" "$C/kernels/builds/"; done
  for e in "$F"/kernels/built/*; do [ -e "$e/meta.json" ] && ln -sfn "$e" "$C/kernels/built/"; done
  for e in "$F"/images/*.cpio; do [ -f "$e" ] && ln -sfn "$e" "$C/images/"; done
  for e in "$F"/workloads/*; do [ -e "$e/.complete" ] && ln -sfn "$e" "$C/workloads/"; done
  # (readable by the user: a cache entry made through mkdtemp is 0700; the overlay copies up only what changes)
  for e in "$C"/kernels/stock "$C"/kernels/builds/* "$C"/kernels/built/* "$C"/images/* "$C"/workloads/*; do
    [ -e "$e" ] || continue
    find -L "$e" -type d ! -perm -o=rx -exec chmod o+rx {} + ; find -L "$e" -type f ! -perm -o=r -exec chmod o+r {} +
  done
fi
chown -R "$U:" "$C" @OUT@
id "$U"
ls -l /dev/kvm 2>&1 || true
"""


@dataclass(frozen=True)
class NestedResult:
    exit_code: int | None  # the script's, None when it never ran to its end
    marks: dict[str, str]  # the outer init's marks, by name (booted, prepared, script-exit, done, failed)
    wall_s: float
    out: Path
    console: Path
    timed_out: bool


def _user(name: str | None) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name) if name else pwd.getpwuid(os.getuid())
    except KeyError:
        raise LabError(f"--user {name}: no such user on this host") from None


def outer_init(user: str, setpriv: str, cache: str, cache_from: str) -> tuple[str, str]:
    """The outer guest's init and the prepare script (run as root in the overlaid root)."""
    subst = {"@MARK@": MARK, "@OUT@": NESTED_OUT, "@TAR@": TAR, "@REPO@": shlex.quote(str(REPO_ROOT)),
             "@SETPRIV@": setpriv, "@USER@": shlex.quote(user), "@CACHE@": shlex.quote(cache),
             "@CACHE_FROM@": shlex.quote(cache_from)}  # fmt: skip
    init, prepare = _INIT, _PREPARE
    for key, value in subst.items():
        init, prepare = init.replace(key, value), prepare.replace(key, value)
    return init, prepare


def _initrd(workdir: Path, init: str, prepare: str, script: str, modules_dir: Path | None) -> Path:
    base = minimal_initrd(workdir / "base.cpio", init)
    extra = workdir / "nested.cpio"
    entries = [
        cpio.directory("nested"),
        cpio.file_entry("nested/prepare.sh", prepare.encode()),
        cpio.file_entry("nested/script.sh", script.encode()),
    ]
    with extra.open("wb") as f:
        cpio.write_cpio(f, entries)
    parts = [base, modules_image(modules_dir, NESTED_MODULES), extra]
    out = workdir / "initrd"
    with out.open("wb") as f:
        for part in parts:
            if part is not None:
                f.write(part.read_bytes())
    return out


def parse_marks(console: str) -> dict[str, str]:
    """The outer init's ``NUMALAB-NESTED name value...`` lines, the last of each name."""
    marks: dict[str, str] = {}
    for line in console.splitlines():
        if line.startswith(MARK + " "):
            name, _, rest = line[len(MARK) + 1 :].partition(" ")
            marks[name] = rest.strip()
    return marks


class _ConsoleTail:
    """An on_tick that passes the console's new script lines ("| ...") and marks to ``echo``."""

    def __init__(self, console: Path, echo) -> None:
        self.console, self.echo, self.offset, self.rest = console, echo, 0, b""

    def __call__(self, _now: float) -> None:
        try:
            with self.console.open("rb") as f:
                f.seek(self.offset)
                data = f.read(1 << 20)
        except OSError:
            return
        self.offset += len(data)
        *lines, self.rest = (self.rest + data).split(b"\n")
        for raw in lines:
            line = raw.decode(errors="replace").rstrip("\r")
            if line.startswith("| "):
                self.echo(line[2:])
            elif line.startswith(MARK + " "):
                self.echo(f"[outer] {line[len(MARK) + 1 :]}")


def run_nested(
    topo: Topology,
    script: str,
    out: Path,
    user: str | None = None,
    cache_from: Path | None = None,
    timeout_s: float = 900.0,
    progress=None,
    echo=None,
) -> NestedResult:
    """Boot ``topo`` under TCG with SVM, run ``script`` (bash, in the repository) inside it as ``user``,
    and unpack what it wrote to ``$NESTED_OUT`` into ``out``. ``echo`` hears each line of the script's
    output as the console shows it, and the outer init's marks."""
    who = _user(user)
    out.mkdir(parents=True, exist_ok=False)
    stock = resolve_kernel("stock")
    inner_cache = f"{who.pw_dir}/.cache/numalab" if who.pw_uid else "/root/.cache/numalab"
    cache_src = cache_from if cache_from is not None else cache_root()
    setpriv = f"--reuid={who.pw_uid} --regid={who.pw_gid} --init-groups" if who.pw_uid else "--reuid=0 --regid=0"
    env = f"export NESTED_OUT={NESTED_OUT} NUMALAB_CACHE={shlex.quote(inner_cache)}\n"
    init, prepare = outer_init(who.pw_name, setpriv, inner_cache, str(cache_src) if cache_src.is_dir() else "")
    work = out / ".outer"
    work.mkdir()
    initrd = _initrd(work, init, prepare, env + script, stock.modules_dir)
    share = make_share(work)
    boot = BootSpec(
        kernel=str(stock.image),
        initrd=str(initrd),
        cmdline="console=ttyS0 panic=-1 loglevel=4",
        results_dir=str(share),
        console_log=str(out / CONSOLE_LOG),
        qmp_socket=str(work / "qmp.sock"),
        accel="tcg",
        name=f"numalab-nested-{os.getpid()}",
        cpu="max",
        host_share="/",
    )
    placement = plan_placement(topo, read_inventory(), pinning="node")
    if progress:
        progress(f"outer guest: {topo.name}, {topo.n_nodes} nodes, {topo.total_cpus} vCPUs under TCG with SVM")
    t0 = time.monotonic()
    tail = _ConsoleTail(Path(boot.console_log), echo) if echo else None
    outcome, _info = QemuBackend().run(
        VmRequest(topo, placement, boot, work, timeout_s, limits=ShareLimits(output_bytes=OUTPUT_LIMIT), on_tick=tail)
    )
    if tail:
        tail(0.0)
    wall = time.monotonic() - t0
    console = Path(boot.console_log)
    marks = parse_marks(console.read_text(errors="replace") if console.exists() else "")
    tar = share / TAR
    if tar.exists():
        with tarfile.open(tar) as tf:
            tf.extractall(out, filter="data")
        tar.unlink()
    code = marks.get("script-exit")
    return NestedResult(
        int(code) if code and code.isdigit() else None, marks, round(wall, 1), out, console, outcome.timed_out
    )
