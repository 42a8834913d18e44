"""Debian's apt with a private configuration: its own source list, package lists and download cache under
numalab's cache, so that numalab can fetch from Debian's archive (a backports QEMU, a newer kernel's source)
without touching the system's apt sources or installing anything. apt checks the archive's signature with the
system's keys and every download's hash against the signed index.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from lab.errors import LabError
from lab.paths import TOOL_TEXT, write_text_atomic

_INST = re.compile(r"^Inst (\S+) (?:\[[^]]*\] )?\((\S+) (.*)\)")


def codename(
    who: str = "setup-qemu10", hint: str = "needs Debian (its backports archive); give another QEMU with --qemu PATH"
) -> str:
    """This Debian's release name (``bookworm``), from /etc/os-release; elsewhere one line: ``who``: ``hint``."""
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        text = ""
    fields = dict(ln.split("=", 1) for ln in text.splitlines() if "=" in ln)
    if fields.get("ID", "").strip('"') != "debian" or not fields.get("VERSION_CODENAME"):
        raise LabError(f"{who}: {hint}")
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


def debian_archive(codename: str, who: str = "setup-qemu10") -> str:
    """The archive URI the system's apt sources use for Debian ``codename`` (apt-get indextargets)."""
    out = setup_run(["apt-get", "indextargets", "--format", "$(REPO_URI) $(RELEASE) $(ORIGIN)"], "apt-get indextargets",
                    who, "needs Debian's apt")  # fmt: skip
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == codename and parts[2] == "Debian":
            return parts[0]
    raise LabError(f"{who}: the system's apt sources name no Debian {codename} archive "
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
        return upgrade_set(out, package, release, self.who)

    def download(self, packages: list[tuple[str, str]], into: Path) -> list[Path]:
        self.run("apt-get", ["-q", "download", *(f"{n}={v}" for n, v in packages)], "apt-get download", cwd=into)
        return sorted(into.glob("*.deb"))


def upgrade_set(simulated: str, package: str, release: str, who: str = "setup-qemu10") -> list[tuple[str, str]]:
    """(name, version) of the packages an ``apt-get -s install -t RELEASE PACKAGE`` would take from the
    backports archive (its ``Inst`` lines); a one-line error when PACKAGE is not among them."""
    found = []
    for line in simulated.splitlines():
        m = _INST.match(line)
        if m and "backports" in m.group(3).lower():
            found.append((m.group(1), m.group(2)))
    if not any(name == package for name, _ in found):
        raise LabError(f"{who}: {release} has no newer {package} than this system's")
    return found
