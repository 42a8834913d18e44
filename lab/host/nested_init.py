"""The outer guest's init, its prepare script and its initrd (lab.host.nested): what runs inside the guest that
runs numalab, and the names the host and that init share (its console marks, its records' tars, the stop file).
"""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

from lab.guest import cpio
from lab.guest.image import minimal_initrd, modules_image
from lab.host import nested_ssh
from lab.host.accel import ACCEL_DIR
from lab.paths import REPO_ROOT
from lab.vm.tcg import tcg_boot, tcg_clock

# 9p for the host's root (virtio and 9p come with lab.guest.image.NEEDED_MODULES), the overlay over it,
# and KVM for AMD (its dependencies, irqbypass and ccp, come from modules.dep).
NESTED_MODULES = ("overlay", "kvm_amd")
# The libvirt host's one network device (net_failover and failover from modules.dep), and ext4 on a loop
# device for its pool (crc32c_generic: ext4's soft dependency, which modules.dep does not list).
SSH_MODULES = ("virtio_net", "loop", "crc32c_generic", "ext4")
STOP = "stop"  # left in the results share by the host: the libvirt host's script may end
MARK = "NUMALAB-NESTED"
NESTED_OUT = "/nested-out"
TAR = "nested.tar"
PARTIAL = "nested-partial.tar"  # the records as they were at the last copy (a guest that never said done)
PARTIAL_S = 60
ALIVE_S = 30  # the init marks "alive" on the console this often, from its mounts to its end
CLOSED = "closed.list"  # in the initrd's nested/: the cache entries' paths others cannot read (NUL-separated)
# The caller's cache entries the guest's user gets, each as the prepare script links it (complete ones only)
_SHARED_ENTRIES = (("kernels/stock", ""), ("kernels/builds/*", "meta.json"), ("kernels/built/*", "meta.json"),
                   ("images/*.cpio", ""), ("workloads/*", ".complete"))  # fmt: skip
# What in numalab's cache is this host's own (the KVM verdict, TCG's calibrations), not the guest's to reuse
HOST_OWN = (ACCEL_DIR, tcg_boot.CALIBRATION_FILE, tcg_clock.CALIBRATION_FILE)

_INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
say() { echo "@MARK@ $*"; }
R=/newroot
# The records ($NESTED_OUT) to the results share: all of them at the end (@TAR@), and a copy every
# @PARTIAL_S@ s while the script runs or the guest serves (@PARTIAL@, renamed into place whole), so that a
# guest that hangs or is stopped at its timeout still brings back what it had.
send() { tar -cf /ovl/@TAR@ -C $R/@OUT@ . && dd if=/ovl/@TAR@ of=/results/@TAR@ bs=1M 2>/dev/null || say send-failed; }
partial() { tar -cf /ovl/p.tar -C $R/@OUT@ . 2>/dev/null; dd if=/ovl/p.tar of=/results/p.tmp bs=1M 2>/dev/null &&
  mv /results/p.tmp /results/@PARTIAL@; rm -f /ovl/p.tar; }
fail() { say failed "$*"; [ -n "$SENDER" ] && kill $SENDER; [ -d $R/@OUT@ ] && send; poweroff -f; }
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
while read -r m; do insmod "/lib/modules/$m" || say insmod-failed "$m"; done < /lib/modules/numalab.order
mkdir -p /results /host /ovl /newroot
O="trans=virtio,version=9p2000.L,msize=512000"
mount -t 9p -o "$O,cache=none" results /results || fail results-mount
mount -t 9p -o "$O,cache=loose,ro" hostroot /host || fail hostroot-mount
mount -t tmpfs -o mode=755 tmpfs /ovl && mkdir /ovl/upper /ovl/work
mount -t overlay overlay -o lowerdir=/host,upperdir=/ovl/upper,workdir=/ovl/work /newroot || fail overlay
mount -t proc proc $R/proc; mount -t sysfs sysfs $R/sys; mount -t devtmpfs devtmpfs $R/dev
# (no tmpfs over /tmp: the checkout may live there, as a CI's clean one does; the overlay keeps writes in memory)
mkdir -p $R/dev/shm $R/dev/pts && mount -t tmpfs -o mode=1777 tmpfs $R/dev/shm && mount -t devpts devpts $R/dev/pts
mount -t debugfs debugfs $R/sys/kernel/debug 2>/dev/null
( while sleep @ALIVE_S@; do say alive; done ) &
mkdir -p $R/@OUT@ $R/nested && cp /nested/* $R/nested/
has() { grep -q -w "$1" /proc/cpuinfo && echo "$1"; }
# hold_kvm: one KVM VM (an in-kernel LAPIC and one vCPU that never runs) held from here to the guest's end, made
# while it is quiet: KVM's static keys (preempt_notifier_key, patched into finish_task_switch(); apic_sw_disabled)
# then never flip again as the inner VMs come and go. Each flip is a text_poke_bp() of code every CPU runs, and
# under TCG (QEMU 7.2) a vCPU could keep running the poke's int3 after the byte was restored: every CPU trapping
# there for good, as at an inner libvirt domain's start. Only a libvirt host's guest holds it, once its script has
# ended: the script's inner VMs never met that freeze, and while it was held from boot two script runs stopped
# in new ways (docs/tcg.md).
hold_kvm() {
  [ -c $R/dev/kvm ] && chroot $R /usr/bin/python3 -c 'import fcntl, os, signal
vm = fcntl.ioctl(os.open("/dev/kvm", os.O_RDWR), 0xAE01, 0)  # KVM_CREATE_VM
fcntl.ioctl(vm, 0xAE60, 0)  # KVM_CREATE_IRQCHIP
fcntl.ioctl(vm, 0xAE41, 0)  # KVM_CREATE_VCPU 0
print("@MARK@ kvm-held", flush=True)
if os.fork():
    os._exit(0)
signal.pause()'
}
say booted "$(grep -c ^processor /proc/cpuinfo)" $(has svm) $(has npt) $(test -c /dev/kvm && echo /dev/kvm)
chroot $R /bin/sh /nested/prepare.sh > $R/@OUT@/prepare.log 2>&1 || fail prepare "$(tail -1 $R/@OUT@/prepare.log)"
say prepared
( while sleep @PARTIAL_S@; do partial; done ) &
SENDER=$!
# (the script's output to script.log and, each line behind "| ", to the console: the host sees it as it comes)
{ chroot $R /usr/bin/setpriv @SETPRIV@ --reset-env /bin/bash -c 'cd @REPO@ && exec bash /nested/script.sh' 2>&1
  echo $? > /ovl/script.rc; } | tee $R/@OUT@/script.log | while IFS= read -r l; do echo "| $l"; done
say script-exit "$(cat /ovl/script.rc)"
@SERVE@@SERVE_WAIT@kill $SENDER; SENDER=
send
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
F=@CACHE_FROM@
OWN=
if [ -n "$F" ] && [ "$(readlink -f "$F")" = "$(readlink -f "$C")" ]; then
  # (root's own cache, the caller's: the overlay shows it as it is and keeps every write in the guest; only this
  # host's verdicts and calibrations are hidden, for the guest to find its own; no chown, which would copy it up)
  for e in @HOST_OWN@; do rm -rf "$C/$e"; done
  F= OWN=1
fi
mkdir -p "$C"
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
  # (readable by the user: a cache entry made through mkdtemp is 0700; the overlay copies up only what changes.
  # What others cannot read the host listed (closed_to_others): a walk of the entries over 9p took 27 of the
  # 44 s of a quiet host's whole outer run)
  xargs -0 -r chmod o+rX < /nested/@CLOSED@
fi
[ -n "$OWN" ] || chown -R "$U:" "$C"
chown -R "$U:" @OUT@
id "$U"
ls -l /dev/kvm 2>&1 || true
"""


def outer_init(user: str, setpriv: str, cache: str, cache_from: str, ssh_port: int = 0, sshd: str = "/usr/sbin/sshd",
               sshd_libs: str = "", hold_kvm: bool = True) -> tuple[str, str]:  # fmt: skip
    """The outer guest's init and the prepare script (run as root in the overlaid root). With ``ssh_port``
    the guest also serves as a libvirt host (lab.host.nested_ssh) from the script's end until the host
    leaves ``stop`` in the results share: its sshd is ``sshd`` (lab.host.sshd_prefix's, with ``sshd_libs``
    first on its library path), and it holds one KVM VM while it serves unless ``hold_kvm`` is False (only
    the reproduction knob, NO_KVM_HOLD_ENV, turns it off: the guest then marks ``kvm-not-held``)."""
    # (the script's records into the share first: the serving that follows cannot lose them)
    hold = "hold_kvm\n" if hold_kvm else "say kvm-not-held\n"
    serve = "partial\n" + hold + nested_ssh.SERVE.replace("@PORT@", str(ssh_port)) if ssh_port else ""
    serve = serve.replace("@POOL_MIB@", str(nested_ssh.POOL_MIB))
    serve_wait = f"while [ ! -e /results/{STOP} ]; do sleep 1; done\n" if ssh_port else ""
    subst = {"@SERVE@": serve, "@SERVE_WAIT@": serve_wait, "@HOSTNAME@": nested_ssh.GUEST_HOSTNAME,
             "@HOST_KEY@": nested_ssh.HOST_KEY, "@SSHD@": shlex.quote(sshd), "@SSHD_LIBS@": shlex.quote(sshd_libs),
             "@PARTIAL@": PARTIAL, "@PARTIAL_S@": str(PARTIAL_S), "@ALIVE_S@": str(ALIVE_S),
             "@MARK@": MARK, "@OUT@": NESTED_OUT, "@TAR@": TAR, "@REPO@": shlex.quote(str(REPO_ROOT)),
             "@SETPRIV@": setpriv, "@USER@": shlex.quote(user), "@CACHE@": shlex.quote(cache),
             "@CACHE_FROM@": shlex.quote(cache_from), "@HOST_OWN@": " ".join(HOST_OWN),
             "@CLOSED@": CLOSED}  # fmt: skip
    init, prepare = _INIT, _PREPARE + (nested_ssh.PREPARE if ssh_port else "")
    for key, value in subst.items():
        init, prepare = init.replace(key, value), prepare.replace(key, value)
    return init, prepare


def closed_to_others(cache_from: Path | None) -> list[str]:
    """The paths in ``cache_from``'s entries the guest's user gets (_SHARED_ENTRIES; symbolic links followed, as
    the guest's chmod does) that others cannot read: directories without o+rx, files without o+r. Listed on
    the host, where the walk is quick; the prepare script opens exactly these (its own walk went over 9p)."""
    if cache_from is None or not cache_from.is_dir():
        return []
    closed: list[str] = []

    def visit(path: Path) -> None:
        try:
            st = path.stat()
        except OSError:
            return  # (a dangling link: the guest's chmod would fail on it alike; nothing to open)
        is_dir = stat.S_ISDIR(st.st_mode)
        if st.st_mode & (0o005 if is_dir else 0o004) != (0o005 if is_dir else 0o004):
            closed.append(str(path))

    for pattern, complete in _SHARED_ENTRIES:
        for entry in sorted(cache_from.glob(pattern)):
            if complete and not (entry / complete).exists():
                continue
            visit(entry)
            if entry.is_dir():
                seen: set[tuple[int, int]] = set()  # (a link back to a directory above: find -L stops there too)
                for root, dirs, files in os.walk(entry, followlinks=True):
                    st = os.stat(root)
                    if (st.st_dev, st.st_ino) in seen:
                        dirs[:] = []
                        continue
                    seen.add((st.st_dev, st.st_ino))
                    for name in dirs + files:
                        visit(Path(root) / name)
    return closed


def outer_initrd(workdir: Path, init: str, prepare: str, script: str, modules_dir: Path | None,
            ssh: nested_ssh.SshHost | None = None, closed: list[str] | None = None) -> Path:  # fmt: skip
    """The outer guest's initrd in ``workdir``: the minimal base with ``init``, the modules it loads (KVM, the
    overlay; with ``ssh`` the libvirt host's network and pool), and ``prepare``, ``script``, the paths the
    prepare script opens to the user (``closed``: closed_to_others) and the ssh files."""
    base = minimal_initrd(workdir / "base.cpio", init)
    extra = workdir / "nested.cpio"
    entries = [
        cpio.directory("nested"),
        cpio.file_entry("nested/prepare.sh", prepare.encode()),
        cpio.file_entry("nested/script.sh", script.encode()),
        cpio.file_entry(f"nested/{CLOSED}", b"".join(p.encode() + b"\0" for p in closed or [])),
    ]
    if ssh is not None:
        entries += nested_ssh.guest_files(ssh, NESTED_OUT)
    with extra.open("wb") as f:
        cpio.write_cpio(f, entries)
    modules = NESTED_MODULES + (SSH_MODULES if ssh is not None else ())
    parts = [base, modules_image(modules_dir, modules), extra]
    out = workdir / "initrd"
    with out.open("wb") as f:
        for part in parts:
            if part is not None:
                f.write(part.read_bytes())
    return out
