"""The sched-ext/scx project's schedulers from their releases on crates.io (``--scheduler scx_bpfland@1.1.4``,
``numalab scheduler build``): built with cargo into numalab's cache, once per crate, version, patches and
toolchain.

scx_bpfland, scx_lavd, scx_rusty, scx_layered and scx_p2dq are binary crates of those names; since 1.1.0 all
share one version number (before it each had its own: scx_layered 1.0.23 is the release of scx_bpfland 1.0.20).
A build asks the crates.io sparse index (``index.crates.io``: one JSON line per version, with its ``rust_version``,
its ``cksum`` and its ``pubtime``) whether the version exists and whether the local rustc is new enough, downloads
the ``.crate`` from ``static.crates.io`` (its SHA-256 checked against the index's), unpacks it, applies the user's
patches in order (``patch -p1``: paths relative to the crate's root), and runs ``cargo build --release`` with
``--locked`` when the crate ships its Cargo.lock. The BPF side is compiled by clang 18 or later (``BPF_CLANG``:
Debian has no plain ``clang``; 1.1.4's build refuses an older one), the Rust side by the local rustc. CARGO_HOME
is numalab's (``<cache>/scx/cargo-home``) and the target directory is shared by every build of one crate
(``<cache>/scx/target/<crate>``), so a patched variant recompiles only the crate itself (3 minutes here
where a cold build took 8 to 20 on two busy cores). The BPF objects are CO-RE, relocated against the running
kernel's BTF at load: one binary serves every kernel, and the kernel is not in the key.

A finished build is ``<cache>/scx/bin/<crate>-<version>-<key>/`` (the binary, ``meta.json``, ``build.log``):
the key hashes the crate, the version, the patches' contents, ``rustc -V`` and the BPF clang's version, all
known without the network, so a cached build is found offline in a fraction of a second. A lock per crate makes
two processes that ask for the same build build it once (and never share the target directory at once).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from lab.errors import LabError
from lab.paths import COMPLETE, TOOL_TEXT, cache_dir, file_lock, write_json_atomic

# crate -> the ops name its BPF source gives (``.name`` of its sched_ext_ops); scx_utils appends
# ``_<version>_<target triple>`` at load (build_id::ops_version_suffix), which is what /sys/kernel/sched_ext shows.
CRATES = {"scx_bpfland": "bpfland", "scx_lavd": "lavd", "scx_rusty": "rusty", "scx_layered": "layered",
          "scx_p2dq": "p2dq"}  # fmt: skip
PINNED = "1.1.4"  # numalab's default version (the latest release when this was written: 2026-10-15)
MIN_CLANG = 18  # 1.1.4's scx_cargo: "clang < 18 does not support -mcpu=v4 for BPF"
INDEX_URL = "https://index.crates.io/sc/x_/{name}"
CRATE_URL = "https://static.crates.io/crates/{name}/{name}-{version}.crate"
SETUP_HINT = "make setup-scx installs clang-19 and checks for cargo"
_VERSION = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?")
_NET_TIMEOUT = 60

Say = Callable[[str], None]


def _quiet(_msg: str) -> None:
    pass


@dataclass(frozen=True)
class Release:
    """One version of a crate, as the sparse index has it."""

    version: str
    cksum: str  # the .crate's SHA-256
    rust_version: str | None
    pubtime: str | None
    yanked: bool


@dataclass(frozen=True)
class Toolchain:
    cargo: str
    rustc: str  # ``rustc -V``
    rust_release: tuple[int, ...]
    target: str  # the host triple (x86_64-unknown-linux-gnu)
    clang: str  # the BPF compiler's path
    clang_version: str  # its ``--version`` first line
    clang_major: int


@dataclass(frozen=True)
class Built:
    binary: Path
    meta: dict
    cached: bool
    seconds: float  # this call's time (a cache hit's lookup, or the build)


def parse(spec: str, label: str = "--scheduler") -> tuple[str, str | None]:
    """``NAME`` or ``NAME@VERSION`` -> (crate, version or None for numalab's pinned one), or a one-line error."""
    name, at, version = spec.partition("@")
    if name not in CRATES:
        raise LabError(f"{label} {spec}: not a scx scheduler numalab builds from crates.io ({', '.join(CRATES)})")
    if at and not _VERSION.fullmatch(version):
        raise LabError(f"{label} {spec}: the version must be MAJOR.MINOR.PATCH (e.g. {name}@{PINNED}), "
                       f"or none for numalab's pinned {PINNED}")  # fmt: skip
    return name, version or None


def ops_name(crate: str, version: str, target: str) -> str:
    """What /sys/kernel/sched_ext/root/ops shows for a release build (no git SHA in a crate's build)."""
    suffix = re.sub(r"[^A-Za-z0-9._]", "_", f"_{version}_{target}")
    return CRATES[crate] + suffix


def _vkey(v: str) -> tuple:
    nums, _, pre = v.partition("-")
    return (*(int(x) for x in nums.split(".")), pre == "", pre)


def version_key(version: str) -> tuple:
    """A release's version as a sort key (1.0.23 < 1.1.0-rc1 < 1.1.0 < 1.1.4)."""
    return _vkey(version)


def _get(url: str, what: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=_NET_TIMEOUT) as resp:  # noqa: S310 (a fixed https URL)
            return resp.read()
    except urllib.error.HTTPError as err:
        raise LabError(f"{what}: {url}: HTTP {err.code}") from None
    except (urllib.error.URLError, OSError) as err:
        why = getattr(err, "reason", err)
        raise LabError(f"{what}: cannot reach {url.split('/')[2]} ({why}); a cached build needs no network") from None


def parse_index(text: str) -> list[Release]:
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        out.append(Release(d["vers"], d["cksum"], d.get("rust_version"), d.get("pubtime"), bool(d.get("yanked"))))
    return sorted(out, key=lambda r: _vkey(r.version))


def releases(crate: str, fetch: Callable[[str, str], bytes] = _get) -> list[Release]:
    """Every version of ``crate`` on crates.io, oldest first."""
    raw = fetch(INDEX_URL.format(name=crate), f"{crate}: the crates.io index")
    try:
        return parse_index(raw.decode())
    except (ValueError, KeyError, UnicodeDecodeError) as err:
        raise LabError(f"{crate}: the crates.io index's answer is not its JSON lines ({err})") from None


def pick(crate: str, version: str, known: list[Release]) -> Release:
    """``version`` among ``known``, or a one-line error naming the nearest versions."""
    for r in known:
        if r.version == version:
            return r
    below = [r.version for r in known if _vkey(r.version) < _vkey(version)][-2:]
    above = [r.version for r in known if _vkey(r.version) > _vkey(version)][:2]
    near = ", ".join(below + above) or "none"
    raise LabError(f"{crate}@{version}: no such version on crates.io (nearest: {near}; "
                   f"numalab scheduler versions {crate} lists them)")  # fmt: skip


def _tool_out(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, check=True, timeout=60, **TOOL_TEXT).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _find_clang() -> tuple[str, str, int] | None:
    """The BPF compiler: $BPF_CLANG if set, else the newest clang-NN (or clang) on the PATH: (path, version
    line, major). The first clang-NN found from the top is the newest: one ``--version`` (a cache hit's time)."""
    names = [os.environ["BPF_CLANG"]] if os.environ.get("BPF_CLANG") else [
        *(f"clang-{n}" for n in range(30, 13, -1)), "clang"]  # fmt: skip
    best = None
    for name in names:
        path = shutil.which(name)
        if not path:
            continue
        line = _tool_out([path, "--version"]).partition("\n")[0].strip()
        m = re.search(r"version (\d+)\.", line)
        if m and (best is None or int(m.group(1)) > best[2]):
            best = (path, line, int(m.group(1)))
        if best and best[2] >= MIN_CLANG:
            break
    return best


def toolchain() -> Toolchain:
    """cargo, rustc and the newest clang, or a one-line error naming what is missing."""
    cargo_bin = Path.home() / ".cargo" / "bin"
    cargo = shutil.which("cargo") or shutil.which("cargo", path=str(cargo_bin))
    rustc = shutil.which("rustc") or shutil.which("rustc", path=str(cargo_bin))
    if not cargo or not rustc:
        raise LabError(f"scx schedulers: {'cargo' if not cargo else 'rustc'} not found (install Rust with rustup, "
                       f"https://rustup.rs; {SETUP_HINT})")  # fmt: skip
    vv = _tool_out([rustc, "-vV"])
    release = re.search(r"^release: (\d+)\.(\d+)\.(\d+)", vv, re.M)
    host = re.search(r"^host: (\S+)", vv, re.M)
    if not release or not host:
        raise LabError(f"scx schedulers: {rustc} -vV did not say its release and host")
    clang = _find_clang()
    if clang is None or clang[2] < MIN_CLANG:
        have = f"the newest found is {clang[1]}" if clang else "none found"
        raise LabError(f"scx schedulers: clang >= {MIN_CLANG} missing for the BPF code ({have}; {SETUP_HINT})")
    return Toolchain(cargo, vv.partition("\n")[0].strip(), tuple(int(x) for x in release.groups()), host.group(1),
                     clang[0], clang[1], clang[2])  # fmt: skip


def check_rust(crate: str, release: Release, tools: Toolchain) -> None:
    if not release.rust_version:
        return
    need = tuple(int(x) for x in re.findall(r"\d+", release.rust_version))
    if tools.rust_release[: len(need)] < need:
        raise LabError(f"{crate}@{release.version}: needs rustc >= {release.rust_version}, this is "
                       f"{tools.rustc} (rustup update)")  # fmt: skip


def build_key(crate: str, version: str, patches: list[tuple[str, bytes]], tools: Toolchain) -> str:
    ident = {"crate": crate, "version": version, "patches": [hashlib.sha256(b).hexdigest() for _, b in patches],
             "rustc": tools.rustc, "clang": tools.clang_version, "target": tools.target, "schema": 1}  # fmt: skip
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def _read_patches(paths: list[str | Path]) -> list[tuple[str, bytes]]:
    out = []
    for p in paths:
        try:
            out.append((str(p), Path(p).read_bytes()))
        except OSError as err:
            raise LabError(f"--patch {p}: {err.strerror or err}") from None
    return out


def _bin_dir(crate: str, version: str, key: str) -> Path:
    return cache_dir("scx", "bin") / f"{crate}-{version}-{key}"


def _hit(d: Path, crate: str, t0: float) -> Built | None:
    if not (d / COMPLETE).exists() or not (d / crate).is_file():
        return None
    meta = json.loads((d / "meta.json").read_text())
    return Built(d / crate, meta, True, time.monotonic() - t0)


def build(crate: str, version: str | None = None, patches: list[str | Path] | None = None, say: Say = _quiet,
          fetch: Callable[[str, str], bytes] = _get) -> Built:  # fmt: skip
    """The binary of ``crate`` at ``version`` (numalab's pinned one if None) with ``patches``: from the cache, or
    built now (minutes; progress through ``say``)."""
    t0 = time.monotonic()
    version = version or PINNED
    if crate not in CRATES:
        raise LabError(f"{crate}: not a scx scheduler numalab builds from crates.io ({', '.join(CRATES)})")
    tools = toolchain()
    pdata = _read_patches(patches or [])
    key = build_key(crate, version, pdata, tools)
    out = _bin_dir(crate, version, key)
    hit = _hit(out, crate, t0)
    if hit:
        return hit
    release = pick(crate, version, releases(crate, fetch))  # (before the lock: a bad version does not wait)
    check_rust(crate, release, tools)
    if release.yanked:
        say(f"warning: {crate}@{version} is yanked on crates.io; building it anyway")
    with file_lock(cache_dir("scx") / f".{crate}.lock"):
        hit = _hit(out, crate, t0)  # (another process built it while this one waited)
        if hit:
            return hit
        meta = _build_locked(crate, release, pdata, tools, key, out, say, fetch)
    meta["cached"] = False
    return Built(out / crate, meta, False, time.monotonic() - t0)


def _crate_file(crate: str, release: Release, say: Say, fetch: Callable[[str, str], bytes]) -> bytes:
    path = cache_dir("scx", "crates") / f"{crate}-{release.version}.crate"
    if path.is_file():
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() == release.cksum:
            return data
    say(f"downloading {crate} {release.version} from static.crates.io")
    data = fetch(CRATE_URL.format(name=crate, version=release.version), f"{crate}@{release.version}")
    got = hashlib.sha256(data).hexdigest()
    if got != release.cksum:
        raise LabError(f"{crate}@{release.version}: the .crate's SHA-256 is {got}, the index says {release.cksum}")
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return data


def _unpack(data: bytes, crate: str, version: str, into: Path) -> Path:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(into, filter="data")
    src = into / f"{crate}-{version}"
    if not (src / "Cargo.toml").is_file():
        raise LabError(f"{crate}@{version}: the .crate has no {crate}-{version}/Cargo.toml")
    return src


def _apply(src: Path, patches: list[tuple[str, bytes]], label: str) -> None:
    for name, body in patches:
        for dry in (True, False):
            cmd = ["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", *(["--dry-run"] if dry else [])]
            try:
                r = subprocess.run(cmd, cwd=src, input=body, capture_output=True, timeout=120)
            except FileNotFoundError:
                raise LabError("--patch: the patch program is not installed (apt-get install patch)") from None
            if r.returncode != 0:
                text = (r.stdout + r.stderr).decode(errors="replace").splitlines()
                why = next((ln for ln in text if "FAILED" in ln or "can't find" in ln or "malformed" in ln.lower()),
                           text[-1] if text else "patch failed")  # fmt: skip
                raise LabError(f"--patch {name}: does not apply to {label} (patch -p1 from the crate's root): "
                               f"{why.strip()}")  # fmt: skip


def _cargo(cmd: list[str], cwd: Path, env: dict, log: Path, label: str, say: Say) -> None:
    """cargo with its output in ``log`` and a progress line at most every 30 s."""
    t0 = last = time.monotonic()
    n = 0
    with open(log, "a", encoding="utf-8", errors="replace") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, **TOOL_TEXT)  # fmt: skip
        except OSError as err:
            raise LabError(f"{label}: cannot run cargo: {err}") from None
        tail: list[str] = []
        with proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                f.write(line)
                tail = [*tail[-40:], line.rstrip()]
                if line.lstrip().startswith("Compiling "):
                    n += 1
                    if time.monotonic() - last >= 30:
                        last = time.monotonic()
                        say(f"building {label}: {n} crates compiled, {time.monotonic() - t0:.0f}s "
                            f"(now {line.split()[1]})")  # fmt: skip
        rc = proc.returncode
    if rc != 0:
        errors = [t for t in tail if t.lstrip().startswith("error") or "Error:" in t or "error:" in t]
        why = errors[0] if errors else (tail[-1] if tail else "no output")
        raise LabError(f"{label}: cargo build failed: {why.strip()[:300]} (log: {log})")


def _build_locked(crate: str, release: Release, pdata: list[tuple[str, bytes]], tools: Toolchain, key: str,
                  out: Path, say: Say, fetch: Callable[[str, str], bytes]) -> dict:  # fmt: skip
    version = release.version
    label = f"{crate} {version}" + (f" with {len(pdata)} patch(es)" if pdata else "")
    data = _crate_file(crate, release, say, fetch)
    logs = cache_dir("scx", "logs")
    log = logs / f"{crate}-{version}-{key}.log"
    log.write_text(f"# numalab: {label}, key {key}, {datetime.now(UTC).isoformat(timespec='seconds')}\n")
    work = Path(tempfile.mkdtemp(dir=cache_dir("scx", "src"), prefix=f"{crate}-{version}-"))
    tmp = None
    try:
        src = _unpack(data, crate, version, work)
        _apply(src, pdata, f"{crate} {version}")
        vcs = {}
        if (src / ".cargo_vcs_info.json").is_file():
            vcs = json.loads((src / ".cargo_vcs_info.json").read_text())
        locked = (src / "Cargo.lock").is_file()
        target = cache_dir("scx", "target", crate)
        env = dict(os.environ, CARGO_HOME=str(cache_dir("scx", "cargo-home")), CARGO_TARGET_DIR=str(target),
                   BPF_CLANG=tools.clang, CARGO_TERM_COLOR="never")  # fmt: skip
        env["PATH"] = f"{Path(tools.cargo).parent}:{env.get('PATH', os.defpath)}"
        libclang = Path(f"/usr/lib/llvm-{tools.clang_major}/lib")
        if libclang.is_dir():
            env.setdefault("LIBCLANG_PATH", str(libclang))  # (bindgen's libclang: the same LLVM)
        cold = not (target / "release" / crate).exists()
        say(f"building {label} with cargo ({'cold: 8 to 20 min on 2 busy cores' if cold else 'warm target directory'}, "
            f"BPF_CLANG={Path(tools.clang).name}; log {log})")  # fmt: skip
        t0 = time.monotonic()
        cmd = [tools.cargo, "build", "--release", *(["--locked"] if locked else []), "--bin", crate]
        _cargo(cmd, src, env, log, label, say)
        seconds = round(time.monotonic() - t0, 1)
        binary = target / "release" / crate
        if not binary.is_file():
            raise LabError(f"{label}: cargo finished but left no {binary} (log: {log})")
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
        shutil.copy2(binary, tmp / crate)
        shutil.copy2(log, tmp / "build.log")
        meta = {
            "crate": crate, "version": version, "key": key,
            "source": source_of(crate, version, [hashlib.sha256(b).hexdigest() for _, b in pdata]),
            "patches": [{"name": Path(n).name, "sha256": hashlib.sha256(b).hexdigest()} for n, b in pdata],
            "crate_sha256": release.cksum, "vcs_commit": (vcs.get("git") or {}).get("sha1"),
            "published": release.pubtime, "rust_version": release.rust_version,
            "locked": locked,
            "lockfile": "the crate's Cargo.lock (--locked)" if locked else "none shipped: resolved at build time",
            "rustc": tools.rustc, "clang": tools.clang_version, "bpf_clang": Path(tools.clang).name,
            "target": tools.target, "ops": ops_name(crate, version, tools.target),
            "build_s": seconds, "cold": cold, "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "binary_sha256": hashlib.sha256((tmp / crate).read_bytes()).hexdigest(),
            "binary_bytes": (tmp / crate).stat().st_size,
        }  # fmt: skip
        write_json_atomic(tmp / "meta.json", meta)
        (tmp / COMPLETE).touch()
        shutil.rmtree(out, ignore_errors=True)  # (a half-made one: the lock is held)
        tmp.rename(out)
        tmp = None
        say(f"built {label} in {seconds:.0f}s: {out / crate}")
        return meta
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def source_of(crate: str, version: str, patch_shas: list[str]) -> str:
    """The manifest's scheduler ``source``: ``crate:NAME@VERSION``, with ``+patch:<sha12>`` per patch."""
    return f"crate:{crate}@{version}" + "".join(f"+patch:{s[:12]}" for s in patch_shas)


def meta_of_binary(path: Path) -> dict | None:
    """The meta.json of a binary numalab built into its scx cache (a ``--scheduler PATH`` to one), else None."""
    try:
        real = path.resolve()
        root = (cache_dir("scx", "bin")).resolve()
    except OSError:
        return None
    if real.parent.parent != root or not (real.parent / COMPLETE).exists():
        return None
    try:
        meta = json.loads((real.parent / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.get("crate") == real.name else None
