"""The QEMU source make setup-qemu-charge builds (lab.host.qemu_source): the archive's answer read, the
version followed, the patches tried first (no network here; tests/vm/test_qemu_source_archive.py asks the
real archive)."""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from pathlib import Path

import pytest

from lab.errors import LabError
from lab.host import qemu_charge, qemu_source
from lab.host.qemu_source import DebianSource

# apt-cache showsrc --only-source qemu with a deb-src line for bookworm-backports (2026-11-25), the long
# fields cut, and a second, made-up paragraph of a newer upload with an .asc beside its orig tarball.
SHOWSRC = """Package: qemu
Binary: qemu-system, qemu-block-extra, qemu-system-data, qemu-system-x86, qemu-utils
Version: 1:10.0.2+ds-2+deb13u1~bpo12+1
Maintainer: Debian QEMU Team <pkg-qemu-devel@lists.alioth.debian.org>
Build-Depends: debhelper-compat (= 13), python3:any (>> 3.11), python3-venv:any, meson (>> 1.5.0~), ninja-build
Format: 3.0 (quilt)
Files:
 4a1f4d0a0e1e3b2b7c1e1e9a6c1b2e77 11887 qemu_10.0.2+ds-2+deb13u1~bpo12+1.dsc
 6c1e0b5b1f0fa3d2d8b8f1dd9b6a1e11 39449628 qemu_10.0.2+ds.orig.tar.xz
Checksums-Sha256:
 a9eec32b6ddeda8f7e3472b3e9662358a0a764fb2ba9551a8c158c012072bc96 11887 qemu_10.0.2+ds-2+deb13u1~bpo12+1.dsc
 0901da33844a331bf8b3602b9c1fbd178e60b737c8e3ade678255bd090c9b9f1 39449628 qemu_10.0.2+ds.orig.tar.xz
 dd04c78b36212c1b463595028c234e8c18241ef25923e7a135671f76d8ec5547 139220 qemu_10.0.2+ds-2+deb13u1~bpo12+1.debian.tar.xz
Homepage: http://www.qemu.org/
Package-List:
 qemu-system-x86 deb misc optional arch=amd64,i386,x32
Directory: pool/main/q/qemu
Priority: optional
Section: misc

Package: qemu
Version: 1:10.1.2+ds-1~bpo12+1
Checksums-Sha256:
 1111111111111111111111111111111111111111111111111111111111111111 9000 qemu_10.1.2+ds-1~bpo12+1.dsc
 2222222222222222222222222222222222222222222222222222222222222222 41000000 qemu_10.1.2+ds.orig.tar.xz
 3333333333333333333333333333333333333333333333333333333333333333 833 qemu_10.1.2+ds.orig.tar.xz.asc
Directory: pool/main/q/qemu

Package: qemu-web
Version: 1.0-1
Directory: pool/main/q/qemu-web
"""  # noqa: E501


def test_the_sources_index_gives_versions_files_and_checksums() -> None:
    found = qemu_source.parse_sources(SHOWSRC)
    assert [(s.package, s.version, s.directory) for s in found] == [
        ("qemu", "1:10.0.2+ds-2+deb13u1~bpo12+1", "pool/main/q/qemu"),
        ("qemu", "1:10.1.2+ds-1~bpo12+1", "pool/main/q/qemu"),
    ]  # qemu-web has no Checksums-Sha256: left out
    first, second = found
    assert first.files["qemu_10.0.2+ds-2+deb13u1~bpo12+1.debian.tar.xz"] == (
        "dd04c78b36212c1b463595028c234e8c18241ef25923e7a135671f76d8ec5547",
        139220,
    )
    assert first.orig == (
        "qemu_10.0.2+ds.orig.tar.xz",
        "0901da33844a331bf8b3602b9c1fbd178e60b737c8e3ade678255bd090c9b9f1",
        39449628,
    )
    assert first.upstream == "10.0.2" and second.upstream == "10.1.2"
    assert second.orig[0] == "qemu_10.1.2+ds.orig.tar.xz"  # not its .asc
    no_orig = DebianSource("qemu", "1:1.0-1", "pool/main/q/qemu", {"qemu_1.0-1.dsc": ("0" * 64, 1)})
    with pytest.raises(LabError, match=r"^setup-qemu-charge: Debian's qemu 1:1\.0-1 lists 0 orig tarballs"):
        no_orig.orig  # noqa: B018


@pytest.mark.parametrize(
    ("debian", "upstream", "source"),
    [
        ("1:10.0.2+ds-2+deb13u1~bpo12+1", "10.0.2", "1:10.0.2+ds-2+deb13u1~bpo12+1"),
        ("1:7.2+dfsg-7+deb12u18+b3", "7.2", "1:7.2+dfsg-7+deb12u18"),  # a binNMU's binary version
        ("10.1.0~rc1+ds-1", "10.1.0~rc1", "10.1.0~rc1+ds-1"),
        ("9.2.0", "9.2.0", "9.2.0"),
    ],
)
def test_the_upstream_and_source_versions_of_a_debian_version(debian: str, upstream: str, source: str) -> None:
    assert qemu_source.upstream_version(debian) == upstream
    assert qemu_source.source_version(debian) == source


def test_the_source_followed_is_the_installed_backports_version_or_a_one_line_error() -> None:
    offered = qemu_source.parse_sources(SHOWSRC)
    assert qemu_source.choose(offered, "1:10.1.2+ds-1~bpo12+1", "bookworm-backports") is offered[1]
    assert qemu_source.choose(offered, "1:10.0.2+ds-2+deb13u1~bpo12+1", "bookworm-backports") is offered[0]
    # Another Debian revision of the same upstream: the same orig tarball.
    assert qemu_source.choose(offered, "1:10.1.2+ds-3~bpo12+1+b1", "bookworm-backports") is offered[1]
    with pytest.raises(LabError) as err:
        qemu_source.choose(offered, "1:9.2.0+ds-5~bpo12+1", "bookworm-backports")
    assert str(err.value) == (
        "setup-qemu-charge: bookworm-backports no longer has the source of the backports QEMU unpacked here "
        "(1:9.2.0+ds-5~bpo12+1; it has 1:10.0.2+ds-2+deb13u1~bpo12+1, 1:10.1.2+ds-1~bpo12+1): "
        "python -m lab.host.qemu_prefix --refresh fetches that QEMU, then make setup-qemu-charge builds it"
    )


def test_the_prefix_name_carries_the_version() -> None:
    assert re.fullmatch(r"10\.1\.2\+numalab\.[0-9a-f]{10}", qemu_charge.prefix_name("10.1.2"))
    assert qemu_charge.prefix_name("10.1.2").split("+")[1] == qemu_charge.prefix_name("10.0.2").split("+")[1]


PYTHONDEPS = """[meson]
meson = {{ accepted = ">=1.5.0", installed = "{meson}", canary = "meson" }}
pycotap = {{ accepted = ">=1.1.0", installed = "1.3.1" }}

[docs]
sphinx = {{ accepted = ">=3.4.3", installed = "5.3.0", canary = "sphinx-build" }}
"""


def _orig(path: Path, top: str, files: dict[str, str]) -> Path:
    """A small orig tarball: ``top/`` with ``files``."""
    with tarfile.open(path, "w:xz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _source(version: str, orig: Path) -> DebianSource:
    digest = hashlib.sha256(orig.read_bytes()).hexdigest()
    return DebianSource("qemu", version, "pool/main/q/qemu", {orig.name: (digest, orig.stat().st_size)})


def test_a_series_that_applies_is_tried_then_applied_in_order(tmp_path) -> None:
    """The second patch changes what the first made: each is applied before the next is tried."""
    one = tmp_path / "0001-one.patch"
    one.write_text("--- a/plugins/api.c\n+++ b/plugins/api.c\n@@ -1,2 +1,2 @@\n int a;\n-int b;\n+int charged;\n")
    two = tmp_path / "0002-two.patch"
    two.write_text("--- a/plugins/api.c\n+++ b/plugins/api.c\n@@ -1,2 +1,2 @@\n int a;\n-int charged;\n+int ns;\n")
    assert qemu_source.patched_files([one, two]) == {"plugins/api.c"}
    orig = _orig(tmp_path / "qemu_10.1.2+ds.orig.tar.xz", "qemu-10.1.2",
                 {"plugins/api.c": "int a;\nint b;\n", "pythondeps.toml": PYTHONDEPS.format(meson="1.5.0"),
                  "hw/big.c": "not needed for a dry run\n"})  # fmt: skip
    src = qemu_source.check(orig, _source("1:10.1.2+ds-1~bpo12+1", orig), [one, two], qemu_charge.WHEELS,
                            tmp_path / "check")  # fmt: skip
    assert src == tmp_path / "check" / "qemu-10.1.2"
    assert (src / "plugins/api.c").read_text() == "int a;\nint ns;\n"
    assert not (src / "hw/big.c").exists()  # only what the patches and pythondeps.toml need


def test_a_patch_that_does_not_apply_is_one_line_naming_the_version(tmp_path) -> None:
    patches = qemu_charge.series()
    files = {f: "/* QEMU 10.9 rewrote this file */\n" for f in qemu_source.patched_files(patches)}
    orig = _orig(tmp_path / "qemu_10.9.0+ds.orig.tar.xz", "qemu-10.9.0",
                 {**files, "pythondeps.toml": PYTHONDEPS.format(meson="1.5.0")})  # fmt: skip
    source = _source("1:10.9.0+ds-1~bpo12+1", orig)
    with pytest.raises(LabError) as err:
        qemu_source.check(orig, source, patches, qemu_charge.WHEELS, tmp_path / "check")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(
        "setup-qemu-charge: images/qemu/0001-plugins-charge-ns-to-the-icount-clock.patch does not apply to "
        "QEMU 10.9.0 (Debian's 1:10.9.0+ds-1~bpo12+1); "
    )
    assert "; hunks fail in include/system/cpu-timers.h (1 of 1), accel/tcg/icount-common.c (1 of 1), " in msg
    assert "plugins/api-system.c (2 of 2)" in msg and msg.endswith(": port it to 10.9.0 (images/qemu/README.md)")
    # A file the patch changes is gone: said so.
    orig = _orig(tmp_path / "qemu_11.0.0+ds.orig.tar.xz", "qemu-11.0.0", {"pythondeps.toml": ""})
    with pytest.raises(LabError, match=r"0001-plugins-charge-ns-to-the-icount-clock\.patch does not apply to QEMU "
                       r"11\.0\.0 \(Debian's 11\.0\.0\+ds-1\); a file it patches is not there: port it"):  # fmt: skip
        qemu_source.check(orig, _source("11.0.0+ds-1", orig), patches, qemu_charge.WHEELS, tmp_path / "c2")


def test_a_patch_already_upstream_is_named_as_such(tmp_path) -> None:
    patch = tmp_path / "0001-fix.patch"
    patch.write_text("--- a/a.c\n+++ b/a.c\n@@ -1 +1 @@\n-old\n+new\n")
    orig = _orig(tmp_path / "qemu_10.2.0.orig.tar.xz", "qemu-10.2.0", {"a.c": "new\n"})
    with pytest.raises(LabError, match=r"0001-fix\.patch does not apply to QEMU 10\.2\.0 \(Debian's 10\.2\.0-1\); "
                       r"already applied to a\.c \(is it upstream now\?\): port it to 10\.2\.0"):  # fmt: skip
        qemu_source.apply_series(qemu_source.extract(orig, tmp_path / "x", {"a.c"}), [patch],
                                 _source("10.2.0-1", orig))  # fmt: skip


def test_other_wheels_asked_for_are_an_error_not_a_guess(tmp_path) -> None:
    src = tmp_path / "qemu-10.3.0"
    src.mkdir()
    source = DebianSource("qemu", "1:10.3.0+ds-1", "pool/main/q/qemu", {})
    (src / "pythondeps.toml").write_text(PYTHONDEPS.format(meson="1.5.0"))
    qemu_source.check_wheels(src, qemu_charge.WHEELS, source)
    (src / "pythondeps.toml").write_text(PYTHONDEPS.format(meson="1.8.1"))
    with pytest.raises(LabError) as err:
        qemu_source.check_wheels(src, qemu_charge.WHEELS, source)
    assert str(err.value) == (
        "setup-qemu-charge: QEMU 10.3.0 (Debian's 1:10.3.0+ds-1) installs meson 1.8.1, pycotap 1.3.1 "
        "(pythondeps.toml [meson]); numalab downloads meson 1.5.0, pycotap 1.3.1: update WHEELS in "
        "lab/host/qemu_charge.py for it"
    )
    (src / "pythondeps.toml").unlink()
    with pytest.raises(LabError, match=r"QEMU 10\.3\.0 \(Debian's 1:10\.3\.0\+ds-1\): cannot read pythondeps\.toml"):
        qemu_source.check_wheels(src, qemu_charge.WHEELS, source)


def _backports(cache: Path, version: str) -> Path:
    """A backports prefix as make setup-qemu10 leaves it."""
    prefix = cache / "qemu" / version.split(":", 1)[-1].replace("~", "_")
    (prefix / "usr" / "bin").mkdir(parents=True)
    (prefix / "usr" / "bin" / "qemu-system-x86_64").write_text("")
    (prefix / "VERSION").write_text(f"{version}\nbookworm-backports\n")
    (prefix / ".complete").touch()
    return prefix


def test_the_build_follows_the_backports_version_and_stops_at_a_patch_in_one_line(tmp_path, monkeypatch,
                                                                                    capsys) -> None:  # fmt: skip
    """python -m lab.host.qemu_charge on a newer backports QEMU whose source the patches do not fit: one
    line naming the version, nothing built (the archive is stood in for)."""
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    _backports(tmp_path / "cache", "1:10.9.0+ds-1~bpo12+1")
    files = {f: "/* rewritten */\n" for f in qemu_source.patched_files(qemu_charge.series())}
    orig = _orig(tmp_path / "qemu_10.9.0+ds.orig.tar.xz", "qemu-10.9.0", files)
    asked = []

    def find(installed: str, apt_root: Path) -> DebianSource:
        asked.append(installed)
        return _source(installed, orig)

    monkeypatch.setattr(qemu_source, "find", find)
    monkeypatch.setattr(qemu_source, "orig_tarball", lambda source, into, apt_root, say: orig)
    assert qemu_charge.main(["--print-binary"]) == 2
    out, err = capsys.readouterr()
    assert asked == ["1:10.9.0+ds-1~bpo12+1"] and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith(
        "numalab: error: setup-qemu-charge: images/qemu/0001-plugins-charge-ns-to-the-icount-clock.patch does not "
        "apply to QEMU 10.9.0 (Debian's 1:10.9.0+ds-1~bpo12+1); hunks fail in include/system/cpu-timers.h (1 of 1), "
    )
    assert not [p for p in (tmp_path / "cache" / "qemu-charge").iterdir() if not p.name.startswith(".")]


def test_a_build_of_the_installed_version_is_used_without_the_archive(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    _backports(tmp_path / "cache", "1:10.9.0+ds-1~bpo12+1")
    built = tmp_path / "cache" / "qemu-charge" / qemu_charge.prefix_name("10.9.0")
    (built / "usr" / "bin").mkdir(parents=True)
    (built / "usr" / "bin" / "qemu-system-x86_64").write_text("")
    (built / ".complete").touch()

    def offline(*_a, **_k):
        raise LabError("setup-qemu-charge: apt-get update (private lists) failed: could not resolve the archive")

    monkeypatch.setattr(qemu_source, "find", offline)
    assert qemu_charge.build(say=lambda _m: None) == built / "usr" / "bin" / "qemu-system-x86_64"
    with pytest.raises(LabError, match="could not resolve"):  # --refresh asks the archive
        qemu_charge.build(refresh=True, say=lambda _m: None)
    (built / ".complete").unlink()  # a half-made one is not used
    with pytest.raises(LabError, match="could not resolve"):
        qemu_charge.build(say=lambda _m: None)
