"""A second QEMU beside the system's: Debian's backports build, unpacked into a private prefix.

``make setup-qemu10`` (``python -m lab.host.qemu_prefix``) asks apt for
``qemu-system-x86`` from ``<codename>-backports`` with a private apt
configuration (its own source list, package lists and download cache under
numalab's cache), downloads the packages apt would upgrade for it
(``apt-get download``: QEMU, its data and firmware, SeaBIOS) and unpacks them
into ``<cache>/qemu/<version>/``. Nothing is installed; the system's apt
sources and packages are left alone. The archive is the one the system's own
sources name for Debian (a local mirror stays the mirror).

A private prefix gets no security updates from apt: fetch again (``--refresh``)
to follow the backports archive.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from lab.errors import LabError
from lab.paths import COMPLETE, TOOL_TEXT, cache_dir, publish_dir, write_text_atomic
from lab.vm.qemu.emulator import DEFAULT_QEMU, private_prefixes, resolve

PACKAGE = "qemu-system-x86"
_INST = re.compile(r"^Inst (\S+) (?:\[[^]]*\] )?\((\S+) (.*)\)")


def _codename() -> str:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        text = ""
    fields = dict(ln.split("=", 1) for ln in text.splitlines() if "=" in ln)
    if fields.get("ID", "").strip('"') != "debian" or not fields.get("VERSION_CODENAME"):
        raise LabError("setup-qemu10: needs Debian (its backports archive); give another QEMU with --qemu PATH")
    return fields["VERSION_CODENAME"].strip('"')


def setup_run(cmd: list[str], what: str, who: str, missing: str, cwd: Path | None = None, timeout: int = 900,
              lines: int = 1) -> str:  # fmt: skip
    """A setup command's step: its stdout, or a one-line error starting with ``who`` (``missing``: what to say
    when the program is not there; the last ``lines`` lines of its output when it fails)."""
    try:
        res = subprocess.run(cmd, capture_output=True, **TOOL_TEXT, cwd=cwd, stdin=subprocess.DEVNULL, timeout=timeout)
    except FileNotFoundError:
        raise LabError(f"{who}: {cmd[0]}: not found ({missing})") from None
    except subprocess.TimeoutExpired:
        raise LabError(f"{who}: {what}: no answer in {timeout // 60} minutes") from None
    if res.returncode != 0:
        tail = (res.stderr or res.stdout).strip().splitlines()[-lines:] or ["(no output)"]
        raise LabError(f"{who}: {what} failed: {' / '.join(tail)}")
    return res.stdout


def _run(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    return setup_run(cmd, what, "setup-qemu10", "needs Debian's apt", cwd)


def debian_archive(codename: str) -> str:
    """The archive URI the system's apt sources use for Debian ``codename`` (apt-get indextargets)."""
    out = _run(["apt-get", "indextargets", "--format", "$(REPO_URI) $(RELEASE) $(ORIGIN)"], "apt-get indextargets")
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == codename and parts[2] == "Debian":
            return parts[0]
    raise LabError(f"setup-qemu10: the system's apt sources name no Debian {codename} archive "
                   "(run apt-get update first)")  # fmt: skip


class PrivateApt:
    """apt with its own source list, lists and cache (under ``root``): the system's stay as they are. The
    list names ``archive``'s ``suites`` of ``codename`` (``deb`` lines, or ``deb-src`` with ``kind``); apt
    checks the archive's signature with the system's keys. ``who`` starts its one-line errors."""

    def __init__(self, root: Path, archive: str, codename: str,
                 suites: tuple[str, ...] = ("", "-updates", "-backports"), kind: str = "deb",
                 who: str = "setup-qemu10") -> None:  # fmt: skip
        self.root, self.who = root, who
        for d in ("lists/partial", "cache/archives/partial", "etc"):
            (root / d).mkdir(parents=True, exist_ok=True)
        write_text_atomic(root / "etc" / "sources.list",
                          "".join(f"{kind} {archive} {codename}{s} main\n" for s in suites))  # fmt: skip
        self.options = [
            "-o", f"Dir::Etc::SourceList={root / 'etc' / 'sources.list'}",
            "-o", "Dir::Etc::SourceParts=/nonexistent",
            "-o", f"Dir::State::Lists={root / 'lists'}",
            "-o", f"Dir::Cache={root / 'cache'}",
        ]  # fmt: skip
        if os.geteuid() == 0:  # root's apt would hand downloads to _apt, who cannot write into root's cache
            self.options += ["-o", "APT::Sandbox::User=root"]

    def run(self, program: str, args: list[str], what: str, cwd: Path | None = None, timeout: int = 900,
            lines: int = 1) -> str:  # fmt: skip
        """``program`` (apt-get, apt-cache) with this configuration: its stdout, or a one-line error (the last
        ``lines`` lines apt said)."""
        return setup_run([program, *self.options, *args], what, self.who, "needs Debian's apt", cwd, timeout, lines)

    def update(self, timeout: int = 900, strict: bool = False) -> None:
        """``apt-get update`` of the private lists; ``strict``: an index that cannot be fetched (no network, a
        bad signature) is an error, not old lists kept."""
        self.run("apt-get", ["-q", "update", *(["--error-on=any"] if strict else [])],
                 "apt-get update (private lists)", timeout=timeout, lines=2)  # fmt: skip

    def upgrade_set(self, package: str, release: str) -> list[tuple[str, str]]:
        """(name, version) of what installing ``package`` from ``release`` would bring from ``release``: the
        package and those of its dependencies this system's versions do not satisfy."""
        out = self.run("apt-get", ["-s", "-q", "install", "--no-install-recommends", "-t", release, package],
                       f"apt-get -s install {package}")  # fmt: skip
        return upgrade_set(out, package, release)

    def download(self, packages: list[tuple[str, str]], into: Path) -> list[Path]:
        self.run("apt-get", ["-q", "download", *(f"{n}={v}" for n, v in packages)], "apt-get download", cwd=into)
        return sorted(into.glob("*.deb"))


def upgrade_set(simulated: str, package: str, release: str) -> list[tuple[str, str]]:
    """(name, version) of the packages an ``apt-get -s install -t RELEASE PACKAGE`` would take from the
    backports archive (its ``Inst`` lines); a one-line error when PACKAGE is not among them."""
    found = []
    for line in simulated.splitlines():
        m = _INST.match(line)
        if m and "backports" in m.group(3).lower():
            found.append((m.group(1), m.group(2)))
    if not any(name == package for name, _ in found):
        raise LabError(f"setup-qemu10: {release} has no newer {package} than this system's")
    return found


def prefix_dir(version: str) -> Path:
    """``<cache>/qemu/<Debian version>``, the version made file-name safe."""
    return cache_dir("qemu") / re.sub(r"[^A-Za-z0-9.+-]", "_", version.split(":", 1)[-1])


def fetch(release_suffix: str = "backports", refresh: bool = False, say=print) -> Path:
    """The backports QEMU's binary in its private prefix: the newest one already unpacked (no network), or,
    with ``refresh`` or when there is none, the archive's current version, fetched and unpacked."""
    have = private_prefixes()
    if have and not refresh:
        binary = have[0] / "usr" / "bin" / DEFAULT_QEMU
        say(f"numalab: QEMU from {have[0]} (--refresh to look for a newer one)")
        return binary
    codename = _codename()
    release = f"{codename}-{release_suffix}"
    apt = PrivateApt(cache_dir("qemu", ".apt"), debian_archive(codename), codename)
    say(f"numalab: asking apt (private lists) for {PACKAGE} from {release}")
    apt.update()
    packages = apt.upgrade_set(PACKAGE, release)
    version = dict(packages)[PACKAGE]
    prefix = prefix_dir(version)
    binary = prefix / "usr" / "bin" / DEFAULT_QEMU
    if (prefix / ".complete").exists() and binary.is_file() and not refresh:
        say(f"numalab: QEMU {version} already in {prefix}")
        return binary
    tmp = Path(tempfile.mkdtemp(dir=prefix.parent, prefix=f".{prefix.name}."))
    try:
        debs = tmp / ".debs"
        debs.mkdir()
        say(f"numalab: downloading {', '.join(f'{n} {v}' for n, v in packages)}")
        for deb in apt.download(packages, debs):
            _run(["dpkg-deb", "-x", str(deb), str(tmp)], f"dpkg-deb -x {deb.name}")
        shutil.rmtree(debs)
        check_libraries(tmp / "usr" / "bin" / DEFAULT_QEMU, "setup-qemu10")
        write_text_atomic(tmp / "VERSION", f"{version}\n{release}\n")
        (tmp / COMPLETE).touch()
        publish_dir(tmp, prefix, replace=refresh)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    e = resolve(str(binary))
    say(f"numalab: {e.version} in {prefix} (firmware from {', '.join(e.data_dirs)}); "
        "use it with --qemu " + str(binary))  # fmt: skip
    return binary


def check_libraries(binary: Path, step: str, env: dict[str, str] | None = None) -> None:
    """One line naming ``step`` (the make target) if ``binary`` would miss a library of this system (ldd; with
    ``env``, e.g. a prefix's LD_LIBRARY_PATH)."""
    proc = subprocess.run(["ldd", str(binary)], capture_output=True, **TOOL_TEXT, timeout=60, env=env)
    missing = [ln.split()[0] for ln in proc.stdout.splitlines() if "not found" in ln]
    if proc.returncode != 0 or missing:
        why = ", ".join(missing) or (proc.stderr.strip() or "ldd failed")
        raise LabError(f"{step}: {binary.name} needs libraries this system lacks: {why}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m lab.host.qemu_prefix",
        description="Fetch Debian's backports QEMU into a private prefix under numalab's cache (make setup-qemu10); "
        "prints the binary's path. System packages and apt sources are left alone.",
    )
    p.add_argument("--refresh", action="store_true",
                   help="ask the archive for its current version (and fetch it) even if one is unpacked")  # fmt: skip
    p.add_argument("--print-binary", action="store_true", help="only print the binary's path (for scripts)")
    args = p.parse_args(argv)
    return print_binary(lambda say: fetch(refresh=args.refresh, say=say), quiet=args.print_binary)


def print_binary(make: Callable[[Callable[[str], None]], Path], quiet: bool) -> int:
    """A setup command's end: ``make(say)`` the binary (progress on stderr unless ``quiet``), print its path;
    a LabError is one line and exit 2."""
    say = (lambda _m: None) if quiet else (lambda m: print(m, file=sys.stderr))
    try:
        binary = make(say)
    except LabError as err:
        print(f"numalab: error: {err}", file=sys.stderr)
        return 2
    print(binary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
