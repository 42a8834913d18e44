"""The outer guest of lab.host.nested as a second libvirt host, reached over ssh through the loopback address.

The outer guest's only network is QEMU's user-mode networking with ``restrict=on`` and one forward,
``127.0.0.1:PORT`` on this machine to the guest's port 22: nothing else on any network is a target,
and the guest can reach nothing. Inside, as root: ``sshd`` and the *system* libvirt daemon
(``virtlogd``, then ``libvirtd``). The ordinary user logs in with a key and reaches ``qemu:///system``
as a member of group ``libvirt``, with the socket's group access as its only check
(``auth_unix_rw = "none"``: no polkit daemon runs in the guest). Why the system daemon and not a
session one: it is what a real host serves over ssh (the docs' ``qemu+ssh://lab@box2/system``), its
pool is the default ``/var/lib/libvirt/numalab``, and its QEMU runs as ``libvirt-qemu``, in group
``kvm``; a session daemon would be spawned by the first ssh login and live only as long as its
connections.

Every session makes its own keys in a private directory (0700): the client's key pair, and the
guest's host key, whose public half is pinned in a ``known_hosts`` of that directory. The host's ssh
reads only that directory's ``ssh_config`` (``-F``, through the ``ssh`` wrapper that the URI's
``command=`` names: libvirt's ssh transport passes ``keyfile=`` as ``-i`` but has no parameter for a
known-hosts file), with ``StrictHostKeyChecking yes``: a guest whose host key is not the pinned one is
refused. No file of the calling user's (``~/.ssh``) is read or written.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.guest import cpio

GUEST_HOSTNAME = "numalab-nested"
POOL_MIB = 1024  # the libvirt pool's ext4 (a sparse file in the guest's memory): kernels, initramfs, results
CLIENT_KEY = "id_ed25519"
HOST_KEY = "ssh_host_ed25519_key"


# What the outer guest runs from this host's root (shared read-only), and the package that has it. Its sshd
# is not the host's: lab.host.sshd_prefix unpacks one into numalab's cache (no host sshd is installed).
GUEST_TOOLS = {
    "/usr/sbin/libvirtd": "libvirt-daemon-system",
    "/usr/sbin/virtlogd": "libvirt-daemon-system",
    "/usr/sbin/mkfs.ext4": "e2fsprogs",
    "/usr/bin/virt-ssh-helper": "libvirt-daemon",
}


def check_guest_tools(root: Path = Path("/")) -> None:
    """A one-line error before any boot when the outer guest would miss one of its servers."""
    for path, package in GUEST_TOOLS.items():
        if not (root / path.lstrip("/")).exists():
            raise LabError(f"nested --libvirt-host: {path}: not found; install {package} (make setup)")


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 free now (QEMU binds it a moment later; a clash is QEMU's error)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class SshHost:
    """The outer guest as a libvirt host: who logs in where, and the files the host's ssh uses."""

    user: str
    port: int
    dir: Path  # private (0700): keys, known_hosts, ssh_config, the ssh wrapper

    @property
    def key(self) -> Path:
        return self.dir / CLIENT_KEY

    @property
    def host_key(self) -> Path:
        return self.dir / HOST_KEY

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    @property
    def ssh_config(self) -> Path:
        return self.dir / "ssh_config"

    @property
    def ssh_wrapper(self) -> Path:
        return self.dir / "ssh"

    def uri(self, path: str = "/system") -> str:
        """The libvirt URI: its ssh is the wrapper, which reads only this session's ssh_config."""
        return f"qemu+ssh://{self.user}@127.0.0.1:{self.port}{path}?command={self.ssh_wrapper}&no_tty=1"

    def ssh_argv(self, *command: str) -> list[str]:
        """An ssh command line into the guest with this session's key and pinned host key."""
        return [str(self.ssh_wrapper), "-p", str(self.port), f"{self.user}@127.0.0.1", *command]


def _keygen(path: Path, comment: str) -> str:
    ssh_keygen = shutil.which("ssh-keygen")
    if ssh_keygen is None:
        raise LabError("ssh-keygen: not found; install openssh-client (make setup)")
    proc = subprocess.run([ssh_keygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    if proc.returncode != 0:
        raise LabError(f"ssh-keygen {path}: {(proc.stderr or proc.stdout).strip()}")
    return path.with_suffix(".pub").read_text().strip()


def make_ssh_host(dir: Path, user: str, port: int) -> SshHost:
    """Fresh keys in ``dir`` (made here, 0700), the guest's host key pinned for ``[127.0.0.1]:port``."""
    ssh = shutil.which("ssh")
    if ssh is None:
        raise LabError("ssh: not found; install openssh-client (make setup)")
    dir.mkdir(mode=0o700)
    host = SshHost(user, port, dir)
    _keygen(host.key, f"numalab-nested-client-{os.getpid()}")
    host_pub = _keygen(host.host_key, f"numalab-nested-host-{os.getpid()}")
    key_type, key_b64 = host_pub.split()[:2]
    host.known_hosts.write_text(f"[127.0.0.1]:{port} {key_type} {key_b64}\n")
    host.ssh_config.write_text(
        "# numalab nested: this session's only ssh settings (ssh -F); no ~/.ssh file is read\n"
        "Host 127.0.0.1\n"
        f"  User {user}\n"
        f"  IdentityFile {host.key}\n"
        "  IdentitiesOnly yes\n"
        "  IdentityAgent none\n"
        f"  UserKnownHostsFile {host.known_hosts}\n"
        "  GlobalKnownHostsFile /dev/null\n"
        "  StrictHostKeyChecking yes\n"
        "  UpdateHostKeys no\n"
        "  CheckHostIP no\n"
        f"  HostKeyAlgorithms {key_type}\n"
        "  BatchMode yes\n"
        "  PasswordAuthentication no\n"
        "  KbdInteractiveAuthentication no\n"
        "  ConnectTimeout 120\n"
        "  ServerAliveInterval 30\n"
        "  ServerAliveCountMax 10\n"
        "Host * !127.0.0.1\n"
        "  # (nothing but the forwarded port on the loopback address is ever a target)\n"
        "  ProxyCommand /bin/false\n"
    )
    host.ssh_wrapper.write_text(f'#!/bin/sh\nexec {ssh} -F {host.ssh_config} "$@"\n')
    host.ssh_wrapper.chmod(0o700)
    return host


SSHD_CONFIG = """\
# numalab nested: the outer guest's sshd, for one user's key only
Port 22
ListenAddress 0.0.0.0
HostKey /nested/{host_key}
AuthorizedKeysFile /nested/authorized_keys
AllowUsers {user}
PermitRootLogin no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM yes
AllowTcpForwarding no
AllowAgentForwarding no
X11Forwarding no
UseDNS no
PidFile /run/sshd.pid
LogLevel VERBOSE
"""

# The system daemon: the socket's group is the only check (no polkit daemon runs in the guest).
LIBVIRTD_CONF = """\
unix_sock_group = "libvirt"
unix_sock_ro_perms = "0777"
unix_sock_rw_perms = "0770"
auth_unix_ro = "none"
auth_unix_rw = "none"
log_outputs = "3:file:{out}/libvirtd.log"
"""

# Run as root by the outer init (busybox sh) in the overlaid root $R, after prepare.sh and before the
# script: the network (user-mode, one address), a tmpfs /run (the host's /run is not the guest's), sshd,
# virtlogd and libvirtd; then the "serving" mark once libvirtd's socket accepts.
SERVE = r"""mount -t tmpfs -o mode=755 tmpfs $R/run && mkdir -p $R/run/sshd $R/run/libvirt && chmod 755 $R/run/sshd
hostname @HOSTNAME@
# (its name resolves without DNS, which restrict=on leaves unreachable: libvirtd asks for it on every
# hostname call, and each unanswered lookup cost seconds)
echo "127.0.1.1 @HOSTNAME@" >> $R/etc/hosts
ip link set lo up && ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 || fail network
chmod 600 $R/nested/@HOST_KEY@ && chmod 644 $R/nested/authorized_keys $R/nested/sshd_config
# (QEMU in the daemon's own mount namespace finds no /dev/kvm under this chroot: "Could not access KVM
# kernel module"; the overlay's qemu.conf only)
echo "namespaces = []" >> $R/etc/libvirt/qemu.conf || fail qemu.conf
# The pool on ext4 in a file: libvirt's results share is 9p "mapped" (user.virtfs xattrs), which the
# overlay's tmpfs upper layer cannot hold (tmpfs has user xattrs from Linux 6.6 on; the stock kernel is 6.1).
P=/var/lib/libvirt/numalab
dd if=/dev/zero of=$R/run/numalab-pool.img bs=1M count=0 seek=@POOL_MIB@ 2>/dev/null && mkdir -p $R$P &&
  chroot $R $SP /usr/sbin/mkfs.ext4 -q -F /run/numalab-pool.img && mount -o loop $R/run/numalab-pool.img $R$P ||
  fail pool
SP="/usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C"
chroot $R $SP LD_LIBRARY_PATH=@SSHD_LIBS@ @SSHD@ -f /nested/sshd_config -E @OUT@/sshd.log || fail sshd
chroot $R $SP /usr/sbin/virtlogd -d || fail virtlogd
chroot $R $SP /usr/sbin/libvirtd -d -f /nested/libvirtd.conf || fail libvirtd
i=0; while [ ! -S $R/run/libvirt/libvirt-sock ] && [ $i -lt 600 ]; do sleep 1; i=$((i+1)); done
[ -S $R/run/libvirt/libvirt-sock ] || fail libvirtd-socket
say serving @PORT@
"""

# Run by prepare.sh's caller as root after it: sshd's privilege-separation user (made by openssh-server's
# package, which this host need not have), the user in group libvirt (as Debian's package does for its
# admins); the overlay's /etc/passwd and /etc/group only.
PREPARE = r"""U=@USER@
grep -q "^sshd:" /etc/passwd || echo "sshd:x:$(( 62000 + $$ % 1000 )):65534::/run/sshd:/usr/sbin/nologin" >> /etc/passwd
grep -q "^libvirt:" /etc/group || echo "libvirt:x:$(( 61000 + $$ % 1000 )):" >> /etc/group
sed -i "/^libvirt:/{s/:$/:$U/;t;/[:,]$U\(,\|$\)/!s/$/,$U/}" /etc/group
"""


def guest_files(host: SshHost, out: str) -> list[cpio.Entry]:
    """The files /nested gets in the outer guest: sshd's config and host key, the authorized key, libvirtd's
    config."""
    return [
        cpio.file_entry(f"nested/{HOST_KEY}", host.host_key.read_bytes()),
        cpio.file_entry("nested/authorized_keys", host.key.with_suffix(".pub").read_bytes()),
        cpio.file_entry("nested/sshd_config", SSHD_CONFIG.format(host_key=HOST_KEY, user=host.user).encode()),
        cpio.file_entry("nested/libvirtd.conf", LIBVIRTD_CONF.format(out=out).encode()),
    ]
