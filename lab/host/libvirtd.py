"""Start libvirt's daemons by hand when systemd is absent (containers, CI, these lab machines).

``make libvirt-up`` runs this module (``python3 -m lab.host.libvirtd up``). It needs nothing but the
standard library and the Debian packages (``libvirt-daemon-system``), so it
works before the virtualenv exists.

* ``up``: start ``virtlogd`` (serial console files are written by it) and
  then ``virtqemud`` when the host has the modular daemons, else the
  monolithic ``libvirtd``; wait until the daemon's socket accepts
  connections. With systemd running it asks systemd instead. Daemons that
  already run are left alone; what was started is recorded in
  ``/run/numalab-libvirt.json`` so ``down`` stops exactly that.
* ``up --session-user NAME``: also run an unprivileged *session* daemon as
  the system user NAME (created if missing), a second, independent libvirt
  "host" on this machine: its own domains, its own QEMU user, no access to
  root's files. Its URI is printed (``qemu+unix:///session?socket=...``).
* ``status``: what runs, as JSON.
* ``down``: stop what ``up`` started (only that).
"""

from __future__ import annotations

import argparse
import grp
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from lab.paths import TOOL_TEXT, json_text, system_tool, write_text_atomic

RUN = Path("/run")
STATE_FILE = RUN / "numalab-libvirt.json"
SYSTEM_SOCKETS = {
    "virtqemud": RUN / "libvirt" / "virtqemud-sock",
    "libvirtd": RUN / "libvirt" / "libvirt-sock",
}
PIDFILES = {
    "virtlogd": RUN / "virtlogd.pid",
    "virtqemud": RUN / "virtqemud.pid",
    "libvirtd": RUN / "libvirtd.pid",
}
SESSION_HOME = Path("/var/lib")
START_TIMEOUT_S = 30.0
UP_COMMAND = "python3 -m lab.host.libvirtd"


class DaemonError(Exception):
    """A one-line reason the daemons could not be started."""


def _which(name: str) -> str | None:
    return system_tool(name)


def _alive(pid: int, comm: str | None = None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if comm is None:
        return True
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == comm[:15]
    except OSError:
        return False


def _pid_from(pidfile: Path, comm: str) -> int | None:
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if _alive(pid, comm) else None


def socket_accepts(path: Path) -> bool:
    """True when a daemon listens on the unix socket ``path``."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        s.close()


def systemd_running() -> bool:
    return Path("/run/systemd/system").is_dir()


def qemu_daemon() -> str:
    """The daemon serving qemu:///system on this host: virtqemud (modular) or libvirtd."""
    return "virtqemud" if _which("virtqemud") else "libvirtd"


def system_socket() -> Path:
    """The socket qemu:///system clients connect to (whichever daemon is running, else the expected one)."""
    for path in SYSTEM_SOCKETS.values():
        if socket_accepts(path):
            return path
    return SYSTEM_SOCKETS[qemu_daemon()]


def session_paths(user: str) -> dict:
    home = SESSION_HOME / user
    runtime = home / "run"
    return {
        "home": home,
        "runtime": runtime,
        "socket": runtime / "libvirt" / "libvirt-sock",
        "pidfile": runtime / "libvirt" / "libvirtd.pid",
    }


def session_uri(user: str) -> str:
    return f"qemu+unix:///session?socket={session_paths(user)['socket']}"


def status(session_user: str | None = None) -> dict:
    daemons = {}
    for name, pidfile in PIDFILES.items():
        daemons[name] = {"binary": _which(name), "pid": _pid_from(pidfile, name)}
    sock = system_socket()
    out = {
        "systemd": systemd_running(),
        "qemu_daemon": qemu_daemon(),
        "daemons": daemons,
        "system_socket": str(sock),
        "system_up": socket_accepts(sock),
        "virtlogd_up": socket_accepts(RUN / "libvirt" / "virtlogd-sock"),
    }
    if session_user:
        p = session_paths(session_user)
        out["session"] = {
            "user": session_user,
            "uri": session_uri(session_user),
            "pid": _pid_from(p["pidfile"], "libvirtd"),
            "up": socket_accepts(p["socket"]),
        }
    return out


def _wait_for(check, what: str, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise DaemonError(f"{what} did not come up within {timeout_s:.0f}s")


def _run(argv: list[str], env: dict | None = None) -> None:
    res = subprocess.run(argv, capture_output=True, **TOOL_TEXT, env=env, timeout=60)
    if res.returncode != 0:
        msg = (res.stderr or res.stdout).strip().splitlines()
        raise DaemonError(f"{' '.join(argv)}: exit {res.returncode}: {msg[-1] if msg else 'no message'}")


def _load_state() -> dict:
    try:
        return json.loads(STATE_FILE.read_text())
    except (OSError, ValueError):
        return {"started": []}


def _save_state(state: dict) -> None:
    write_text_atomic(STATE_FILE, json_text(state, indent=2) + "\n")


def kvm_device_like_udev(dev: Path = Path("/dev/kvm")) -> str | None:
    """Give /dev/kvm the owner and mode Debian's udev rules give it (root:kvm 0660), when no udev did.

    Without udev (containers, these lab machines) /dev/kvm can be root-only.
    libvirt then probes QEMU as root and finds KVM, but checks the cached
    capabilities as the QEMU user, finds /dev/kvm unusable, and throws the
    cache away on every call: each API call and domain start re-probes QEMU
    (seconds each, about a minute per domain start). Returns what was done.
    """
    try:
        st = dev.stat()
        kvm_gid = grp.getgrnam("kvm").gr_gid
    except (OSError, KeyError):
        return None
    if st.st_gid == kvm_gid and st.st_mode & 0o060 == 0o060:
        return None
    os.chown(dev, 0, kvm_gid)
    dev.chmod(0o660)
    return f"{dev}: root:kvm 0660, as udev would set it"


def _start_system() -> list[dict]:
    started: list[dict] = []
    if systemd_running():
        daemon = qemu_daemon()
        if not socket_accepts(system_socket()):
            _run(["systemctl", "start", "virtlogd.socket", f"{daemon}.socket", f"{daemon}.service"])
            _wait_for(lambda: socket_accepts(system_socket()), f"{daemon} (systemd)")
        return started
    if _which("virtlogd") is None:
        raise DaemonError("virtlogd: not found; install libvirt-daemon-system (make setup)")
    fixed = kvm_device_like_udev()
    if fixed:
        started.append({"name": "kvm-permissions", "pid": None, "detail": fixed})
    if not socket_accepts(RUN / "libvirt" / "virtlogd-sock"):
        _run([_which("virtlogd"), "-d"])
        _wait_for(lambda: socket_accepts(RUN / "libvirt" / "virtlogd-sock"), "virtlogd")
        started.append({"name": "virtlogd", "pid": _pid_from(PIDFILES["virtlogd"], "virtlogd")})
    if not any(socket_accepts(p) for p in SYSTEM_SOCKETS.values()):
        daemon = qemu_daemon()
        binary = _which(daemon)
        if binary is None:
            raise DaemonError(f"{daemon}: not found; install libvirt-daemon-system (make setup)")
        _run([binary, "-d"])
        _wait_for(lambda: socket_accepts(SYSTEM_SOCKETS[daemon]), daemon)
        started.append({"name": daemon, "pid": _pid_from(PIDFILES[daemon], daemon)})
    return started


def _ensure_user(user: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(user)
    except KeyError:
        pass
    home = SESSION_HOME / user
    _run(["useradd", "--system", "--create-home", "--home-dir", str(home), "--shell", "/usr/sbin/nologin", user])
    return pwd.getpwnam(user)


def _start_session(user: str) -> list[dict]:
    p = session_paths(user)
    if socket_accepts(p["socket"]):
        return []
    if os.geteuid() != 0:
        raise DaemonError(f"--session-user {user}: starting a daemon as another user needs root")
    pw = _ensure_user(user)
    home = Path(pw.pw_dir)
    runtime = p["runtime"]
    for d in (home, runtime):
        d.mkdir(parents=True, exist_ok=True)
        os.chown(d, pw.pw_uid, pw.pw_gid)
    runtime.chmod(0o700)
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(home),
        "USER": user,
        "LOGNAME": user,
        "XDG_RUNTIME_DIR": str(runtime),
    }
    _run(["runuser", "-u", user, "--", _which("libvirtd") or "libvirtd", "-d"], env=env)
    _wait_for(lambda: socket_accepts(p["socket"]), f"the session libvirtd of {user}")
    return [{"name": "libvirtd-session", "user": user, "pid": _pid_from(p["pidfile"], "libvirtd")}]


def up(session_user: str | None = None) -> dict:
    """Start what is missing; return {"started": [...], "uris": [...]}."""
    state = _load_state()
    started = _start_system()
    uris = ["qemu:///system"]
    if session_user:
        started += _start_session(session_user)
        uris.append(session_uri(session_user))
    state["started"] = [s for s in state.get("started", []) if s.get("pid") and _alive(s["pid"])] + started
    if started:
        _save_state(state)
    return {"started": started, "uris": uris}


def down(pids: list[int] | None = None) -> list[dict]:
    """Stop the daemons ``up`` started (or only ``pids`` of them); return what was stopped."""
    state = _load_state()
    stopped, kept = [], []
    # The QEMU daemon first, virtlogd last: domains' console files are virtlogd's.
    order = sorted(state.get("started", []), key=lambda s: s["name"] == "virtlogd")
    for s in order:
        pid = s.get("pid")
        if not pid or (pids is not None and pid not in pids):
            kept.append(s)
            continue
        if _alive(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 15
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        stopped.append(s)
    state["started"] = kept
    _save_state(state)
    return stopped


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=UP_COMMAND, description=__doc__.split("\n\n")[0])
    p.add_argument("action", nargs="?", choices=("up", "down", "status"), default="up")
    p.add_argument("--session-user", metavar="NAME", help="also run a session libvirtd as system user NAME")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    args = p.parse_args(argv)
    try:
        if args.action == "up":
            res = up(args.session_user)
        elif args.action == "down":
            res = {"stopped": down()}
        else:
            res = status(args.session_user)
    except DaemonError as err:
        print(f"{UP_COMMAND}: error: {err}", file=sys.stderr)
        return 1
    if args.json:
        print(json_text(res, indent=2))
    elif args.action == "up":
        for s in res["started"]:
            print(f"set {s['detail']}" if "detail" in s else f"started {s['name']} (pid {s['pid']})")
        if not res["started"]:
            print("libvirt daemons already running")
        for uri in res["uris"]:
            print(f"uri: {uri}")
    elif args.action == "down":
        for s in res["stopped"]:
            print(f"stopped {s['name']} (pid {s['pid']})")
    else:
        print(json_text(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
