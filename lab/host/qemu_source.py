"""The QEMU source ``make setup-qemu-charge`` builds: Debian's, of the backports QEMU ``make setup-qemu10`` unpacked.

The version is not pinned here: it is the one in the backports prefix (its ``VERSION``), so the patched
QEMU and the firmware linked beside it are of one version, and a newer backports QEMU is a newer build.
apt finds that version's source, with a private configuration (a ``deb-src`` line for
``<codename>-backports`` of the archive the system's apt sources name, its own lists under
``<cache>/qemu-charge/.apt``): ``apt-get update`` checks the archive's signature with the system's keys,
``apt-cache showsrc`` gives the source's files and SHA-256s from that signed index, and
``apt-get source --download-only`` downloads the orig tarball (apt checks the hash; so does numalab, also
for the copy kept in ``<cache>/qemu-charge/.src``). The system's apt sources are not touched.

Before anything is built, each patch of ``images/qemu/series`` is tried (``patch --dry-run``) on the
unpacked source and then applied, and QEMU's ``pythondeps.toml`` is checked to ask for the wheels numalab
downloads: a patch that does not apply, or other wheels, is one line naming the version.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.host.qemu_prefix import PrivateApt, _codename, debian_archive, setup_run
from lab.paths import REPO_ROOT, TOOL_TEXT

WHO = "setup-qemu-charge"
SOURCE = "qemu"  # Debian's source package of qemu-system-x86
_CHECKSUM = re.compile(r"^\s+([0-9a-f]{64})\s+(\d+)\s+(\S+)\s*$")
_ORIG = re.compile(r"\.orig\.tar\.(?:xz|gz|bz2)$")


@dataclass(frozen=True)
class DebianSource:
    """One version of a Debian source package, as its (apt-checked) Sources index gives it."""

    package: str
    version: str  # Debian's, with its epoch: 1:10.0.2+ds-2+deb13u1~bpo12+1
    directory: str  # pool/main/q/qemu
    files: dict[str, tuple[str, int]]  # name -> (SHA-256, size)

    @property
    def upstream(self) -> str:
        return upstream_version(self.version)

    @property
    def orig(self) -> tuple[str, str, int]:
        """(name, SHA-256, size) of the orig tarball (its ``.asc`` signature is not it)."""
        found = [(n, h, s) for n, (h, s) in self.files.items() if _ORIG.search(n)]
        if len(found) != 1:
            raise LabError(f"{WHO}: Debian's {self.package} {self.version} lists {len(found)} orig tarballs "
                           f"({', '.join(self.files) or 'no files'}), expected one")  # fmt: skip
        return found[0]


def upstream_version(debian: str) -> str:
    """``1:10.0.2+ds-2+deb13u1~bpo12+1`` -> ``10.0.2``: no epoch, no Debian revision, no repack suffix."""
    v = debian.split(":", 1)[-1]
    v = v.rsplit("-", 1)[0] if "-" in v else v
    return re.sub(r"[+~](?:ds|dfsg)\d*$", "", v)


def source_version(binary: str) -> str:
    """The source version of a binary package's version: a binNMU's ``+bN`` dropped."""
    return re.sub(r"\+b\d+$", "", binary)


def installed_version(prefix: Path) -> str:
    """Debian's version of the backports QEMU unpacked in ``prefix`` (the first line of its ``VERSION``)."""
    try:
        version = (prefix / "VERSION").read_text().split("\n", 1)[0].strip()
    except OSError:
        version = ""
    if not version:
        raise LabError(f"{WHO}: {prefix / 'VERSION'} names no version (python -m lab.host.qemu_prefix --refresh "
                       "unpacks it again)")  # fmt: skip
    return version


def parse_sources(text: str) -> list[DebianSource]:
    """The paragraphs of a Sources index (``apt-cache showsrc``'s output): package, version, directory and
    the ``Checksums-Sha256`` files of each; paragraphs without them are left out."""
    found = []
    for para in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        files: dict[str, tuple[str, int]] = {}
        key = ""
        for line in para.splitlines():
            if line[:1] in (" ", "\t"):
                if key == "checksums-sha256" and (m := _CHECKSUM.match(line)):
                    files[m.group(3)] = (m.group(1), int(m.group(2)))
            elif ":" in line:
                key, value = line.split(":", 1)
                key = key.strip().lower()
                fields[key] = value.strip()
        if fields.get("package") and fields.get("version") and fields.get("directory") and files:
            found.append(DebianSource(fields["package"], fields["version"], fields["directory"], files))
    return found


def choose(offered: list[DebianSource], installed: str, release: str) -> DebianSource:
    """The source of the backports QEMU ``installed`` (a binary version): that version, else another Debian
    revision of the same upstream (the same orig tarball); a one-line error naming what ``release`` has."""
    wanted = source_version(installed)
    for s in offered:
        if s.version == wanted:
            return s
    for s in offered:
        if s.upstream == upstream_version(wanted):
            return s
    has = ", ".join(sorted({s.version for s in offered})) or "none"
    raise LabError(
        f"{WHO}: {release} no longer has the source of the backports QEMU unpacked here ({installed}; it has "
        f"{has}): python -m lab.host.qemu_prefix --refresh fetches that QEMU, then make setup-qemu-charge builds it"
    )


def private_apt(root: Path) -> tuple[PrivateApt, str]:
    """apt with a ``deb-src`` line for this Debian's backports only, and the release's name."""
    codename = _codename()
    return PrivateApt(root, debian_archive(codename), codename, suites=("-backports",), kind="deb-src", who=WHO), (
        f"{codename}-backports"
    )


def find(installed: str, apt_root: Path, timeout: int = 300) -> DebianSource:
    """The backports archive's source for the QEMU ``installed`` (network: apt-get update, then showsrc)."""
    apt, release = private_apt(apt_root)
    apt.update(timeout=timeout, strict=True)
    out = apt.run("apt-cache", ["showsrc", "--only-source", SOURCE], f"apt-cache showsrc {SOURCE}", timeout=timeout)
    return choose([s for s in parse_sources(out) if s.package == SOURCE], installed, release)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def orig_tarball(source: DebianSource, into: Path, apt_root: Path, say, timeout: int = 900) -> Path:
    """The orig tarball in ``into``: the copy kept there when its SHA-256 is the index's, else downloaded by
    ``apt-get source --download-only`` (apt checks it) and checked again."""
    name, digest, _size = source.orig
    path = into / name
    if path.is_file() and sha256(path) == digest:
        return path
    apt, _release = private_apt(apt_root)
    say(f"numalab: downloading Debian's {source.package} {source.version} source ({name}) with apt")
    work = Path(tempfile.mkdtemp(dir=into, prefix=".apt-source."))
    try:
        apt.run("apt-get", ["-q", "source", "--download-only", "--tar-only", f"{source.package}={source.version}"],
                f"apt-get source --download-only {source.package}={source.version}", cwd=work,
                timeout=timeout)  # fmt: skip
        got = work / name
        if not got.is_file():
            raise LabError(f"{WHO}: apt-get source downloaded no {name}")
        if (h := sha256(got)) != digest:
            raise LabError(f"{WHO}: {name}: SHA-256 {h}, the archive's index says {digest}")
        got.rename(path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return path


def unpack(orig: Path, into: Path, timeout: int = 600) -> Path:
    """The orig tarball unpacked in ``into``: its one top directory."""
    into.mkdir(parents=True, exist_ok=True)
    setup_run(["tar", "-xf", str(orig), "-C", str(into)], f"tar -xf {orig.name}", WHO, "tar is missing", None, timeout)
    tops = [p for p in into.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise LabError(f"{WHO}: {orig.name} unpacks into {len(tops)} directories, expected one")
    return tops[0]


def patched_files(patches: list[Path]) -> set[str]:
    """The source files ``patches`` change (``--- a/…`` of each diff, ``-p1``): what a dry run needs."""
    found = set()
    for p in patches:
        for line in p.read_text(errors="replace").splitlines():
            if line.startswith("--- ") and (name := line[4:].split("\t")[0].strip()) != "/dev/null":
                found.add(name.split("/", 1)[-1])
    return found


def extract(orig: Path, into: Path, wanted: set[str]) -> Path:
    """Only the ``wanted`` files (paths below the tarball's top directory) of ``orig``, into ``into``; the
    top directory's path (there even when none of them is in the tarball)."""
    top = None
    try:
        with tarfile.open(orig) as tf:
            for m in tf:
                first, _, rest = m.name.removeprefix("./").partition("/")
                top = top or first
                if rest in wanted and m.isfile():
                    tf.extract(m, into, filter="data")
    except (OSError, tarfile.TarError, EOFError) as err:
        raise LabError(f"{WHO}: {orig.name}: {err}") from None
    (into / (top or "src")).mkdir(parents=True, exist_ok=True)
    return into / (top or "src")


def check(orig: Path, source: DebianSource, patches: list[Path], wheels: tuple[str, ...], into: Path) -> Path:
    """Before a build, and without unpacking it all: the series tried and applied on the files it patches
    (extracted alone into ``into``), and the wheels QEMU asks for compared with ``wheels``; the tree."""
    src = extract(orig, into, patched_files(patches) | {"pythondeps.toml"})
    apply_series(src, patches, source)
    check_wheels(src, wheels, source)
    return src


def _failure(output: str) -> str:
    """What a failed ``patch --dry-run`` says, short: which files' hunks fail, which are already patched."""
    current, failed, applied, missing = "?", [], [], False
    for line in output.splitlines():
        if m := re.match(r"checking file (.+)$", line):
            current = m.group(1).strip()
        elif m := re.match(r"(\d+) out of (\d+) hunks? FAILED", line):
            failed.append(f"{current} ({m.group(1)} of {m.group(2)})")
        elif "Reversed (or previously applied) patch detected" in line:
            applied.append(current)
        elif "can't find file to patch" in line:
            missing = True
    said = [f"hunks fail in {', '.join(failed)}"] if failed else []
    said += [f"already applied to {', '.join(applied)} (is it upstream now?)"] if applied else []
    said += ["a file it patches is not there"] if missing else []
    return "; ".join(said) or (output.strip().splitlines() or ["(no output)"])[-1]


def apply_series(src: Path, patches: list[Path], source: DebianSource, timeout: int = 300) -> None:
    """Each patch tried on ``src`` (``patch --dry-run``), then applied, in order; the first that does not
    apply is a one-line error naming it and the version."""
    for p in patches:
        for dry in (True, False):
            cmd = ["patch", "-p1", "--forward", "--batch", *(["--dry-run"] if dry else ["--quiet"]), "-i", str(p)]
            try:
                res = subprocess.run(cmd, cwd=src, capture_output=True, **TOOL_TEXT, stdin=subprocess.DEVNULL,
                                     timeout=timeout)  # fmt: skip
            except FileNotFoundError:
                raise LabError(f"{WHO}: patch: not found (make setup-qemu-charge installs it)") from None
            if res.returncode != 0:
                raise LabError(
                    f"{WHO}: {_shown(p)} does not apply to QEMU {source.upstream} (Debian's {source.version}); "
                    f"{_failure(res.stdout + res.stderr)}: port it to {source.upstream} (images/qemu/README.md)"
                )


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def check_wheels(src: Path, wheels: tuple[str, ...], source: DebianSource) -> None:
    """QEMU's ``pythondeps.toml`` installs (group ``meson``) exactly the ``name==version`` wheels numalab
    downloads for it; otherwise a one-line error naming both, since another QEMU may need other wheels."""
    toml = src / "pythondeps.toml"
    where = f"QEMU {source.upstream} (Debian's {source.version})"
    try:
        group = tomllib.loads(toml.read_text()).get("meson", {})
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise LabError(f"{WHO}: {where}: cannot read pythondeps.toml ({err}), so which meson it needs is not "
                       "known: check WHEELS in lab/host/qemu_charge.py by hand") from None  # fmt: skip
    asks = {name: str(spec.get("installed", "")) for name, spec in group.items() if isinstance(spec, dict)}
    have = dict(w.split("==", 1) for w in wheels)
    if asks != have:
        fmt = lambda d: ", ".join(f"{n} {v or '(any)'}" for n, v in sorted(d.items()))  # noqa: E731
        raise LabError(f"{WHO}: {where} installs {fmt(asks)} (pythondeps.toml [meson]); numalab downloads "
                       f"{fmt(have)}: update WHEELS in lab/host/qemu_charge.py for it")  # fmt: skip
