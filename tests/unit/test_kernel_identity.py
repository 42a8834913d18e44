"""A kernel is what it says it is: build-ids read from ELF files, bzImage payloads and the guest's notes; a run
whose guest shows another build-id is kernel-mismatch; an A/B of one binary says so; --repeat auto refuses it."""

from __future__ import annotations

import json
import lzma
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from common import assert_one_line_error, numalab

from lab.analysis import compare as cmp
from lab.analysis.record import RunRecord
from lab.errors import LabError
from lab.kernel.bootable import Kernel
from lab.kernel.build import CC_WRAPPER
from lab.kernel.identity import elf_build_id, image_identity, notes_build_id
from lab.report import ab_table
from lab.run.auto_pairs import refuse_same_binary
from lab.run.collect import kernel_problem
from lab.run.status import Evidence, classify

DATA = Path(__file__).resolve().parents[1] / "data" / "runs"
ON = sorted(DATA.glob("ring4-numa01-on-*"))
OFF = sorted(DATA.glob("ring4-numa01-off-*"))
TRUE = Path(shutil.which("true") or "/bin/true")


def _readelf_build_id(path: Path) -> str:
    out = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True, check=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    assert m, out
    return m.group(1)


def _fake_bzimage(payload: bytes, setup_sects: int = 4) -> bytes:
    """The boot-protocol fields numalab reads: HdrS, setup_sects, payload_offset and payload_length."""
    head = bytearray((setup_sects + 1) * 512)
    head[0x1F1] = setup_sects
    head[0x202:0x206] = b"HdrS"
    head[0x248:0x24C] = (16).to_bytes(4, "little")
    head[0x24C:0x250] = len(payload).to_bytes(4, "little")
    return bytes(head) + b"\0" * 16 + payload


def test_elf_build_id_is_readelfs() -> None:
    assert elf_build_id(TRUE.read_bytes()) == _readelf_build_id(TRUE)
    assert elf_build_id(b"not an elf") is None
    assert elf_build_id(b"\x7fELF" + b"\2" * 60) is None  # a header that points nowhere


def test_notes_build_id_as_sys_kernel_notes_lists_them() -> None:
    xen = (4).to_bytes(4, "little") + (4).to_bytes(4, "little") + (18).to_bytes(4, "little") + b"Xen\0" + b"\1\2\3\4"
    gnu = (
        (4).to_bytes(4, "little") + (20).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"GNU\0" + bytes(range(20))
    )
    assert notes_build_id(xen + gnu) == bytes(range(20)).hex()
    assert notes_build_id(xen) is None
    assert notes_build_id(gnu[:-4]) is None  # cut short: no id rather than a partial one
    assert notes_build_id(b"\xff" * 12) is None


def test_image_identity_reads_a_bzimage_payload(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    image = tmp_path / "bzImage"
    image.write_bytes(_fake_bzimage(lzma.compress(TRUE.read_bytes(), format=lzma.FORMAT_XZ)))
    ident = image_identity(image)
    assert ident["build_id"] == _readelf_build_id(TRUE)
    assert image_identity(image) == ident  # remembered by the image's hash
    junk = tmp_path / "junk"
    junk.write_bytes(_fake_bzimage(b"\x02\x21\x4c\x18 not lz4"))
    assert image_identity(junk)["build_id"] is None


def test_a_guest_that_runs_another_kernel_is_kernel_mismatch(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    k = Kernel("my-fix", TRUE, build_id="aa" * 20)
    assert kernel_problem(k, "aa" * 20, True) is None
    problem = kernel_problem(k, "bb" * 20, True)
    assert problem and "bbbbbbbbbbbbbbbb" in problem and "my-fix is aaaaaaaaaaaaaaaa (its vmlinux)" in problem
    assert kernel_problem(k, None, True) is None  # none sent: unverified, and a data problem (lab.run.collect)
    assert kernel_problem(k, None, False) is None  # a guest that never booted is boot-failed, not this
    ev = Evidence("", False, True, True, 0, 0, ("a topology problem too",), kernel_problem=problem)
    assert classify(ev) == ("kernel-mismatch", problem)  # before any topology or workload verdict
    # A kernel given as a file is checked against the build-id its own image carries.
    assert Kernel("given", TRUE).expected_build_id() == (_readelf_build_id(TRUE), "image")


def test_cc_wrapper_sends_incbin_sources_past_ccache(tmp_path) -> None:
    """The compiler numalab gives make: a source that .incbin's another file is compiled by gcc itself."""
    wrapper = tmp_path / "cc"
    wrapper.write_text(CC_WRAPPER)
    wrapper.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("gcc", "ccache"):
        (bin_dir / tool).write_text(f'#!/bin/sh\necho {tool} "$@"\n')
        (bin_dir / tool).chmod(0o755)
    (tmp_path / "piggy.S").write_text('.incbin "vmlinux.bin.lz4"\n')
    (tmp_path / "fair.c").write_text("int x;\n")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}

    def cc(*args: str) -> str:
        return subprocess.run([str(wrapper), *args], cwd=tmp_path, env=env, capture_output=True, text=True).stdout

    assert cc("-c", "-o", "piggy.o", "piggy.S").split()[:1] == ["gcc"]
    assert cc("-c", "-o", "fair.o", "fair.c").split()[:2] == ["ccache", "gcc"]
    assert cc("--version").split()[:2] == ["ccache", "gcc"]


def _copy(src: Path, dest: Path, **kernel) -> Path:
    shutil.copytree(src, dest)
    m = json.loads((dest / "manifest.json").read_text())
    m["kernel"].update(kernel)
    m["run_id"] += f"-{dest.name}"  # another run (compare refuses one run on both sides)
    (dest / "manifest.json").write_text(json.dumps(m))
    return dest


def _lean_copy(src: Path, dest: Path) -> Path:
    """A copy of ``src`` as if run with --lean: NUMA balancing's own events only, no node samples."""
    _copy(src, dest)
    m = json.loads((dest / "manifest.json").read_text())
    m["settings"]["trace_events"] = [e for e in m["settings"]["trace_events"] if "numa" in e or "migrate_pages" in e]
    m["settings"]["node_samples"] = False
    (dest / "manifest.json").write_text(json.dumps(m))
    return dest


def test_an_ab_of_one_binary_warns_everywhere(tmp_path) -> None:
    base = [RunRecord.load(p) for p in ON]
    new = [RunRecord.load(_copy(p, tmp_path / f"b-{p.name}", name="my-patch")) for p in ON]
    c = cmp.compare_runs(base, new)
    assert c.same_kernel and "compares a kernel with itself" in c.warnings[0]
    assert "WARNING: both sides ran the same kernel binary" in ab_table.to_text(c)
    assert "WARNING: both sides" in ab_table.to_markdown(c) and "WARNING: both sides" in ab_table.to_html(c)
    assert json.loads(ab_table.to_json(c))["same_kernel"] is True
    # One kernel under two settings (balancing off against on) is an A/B of the settings: no warning.
    assert not cmp.compare_runs([RunRecord.load(p) for p in OFF], base).same_kernel
    # One kernel traced two ways (--lean against the default events and samples): an A/B of what the run costs.
    lean = [_lean_copy(p, tmp_path / f"l-{p.name}") for p in ON]
    assert not cmp.compare_runs(base, [RunRecord.load(e) for e in lean]).same_kernel
    # Another binary on one side: no warning.
    other = [RunRecord.load(_copy(p, tmp_path / f"c-{p.name}", build_id="cc" * 20)) for p in ON]
    assert not cmp.compare_runs(base, other).same_kernel
    proc = numalab("compare", *[a for p in ON for a in ("--baseline", str(p))],
                   *[a for r in new for a in ("--new", str(r.path))])  # fmt: skip
    assert "WARNING: both sides ran the same kernel binary" in proc.stdout, proc.stdout + proc.stderr


def test_report_of_one_binary_has_a_banner(tmp_path) -> None:
    new = [_copy(p, tmp_path / f"b-{p.name}", name="my-patch") for p in ON]
    out = tmp_path / "r" / "report.html"
    proc = numalab("report", *map(str, ON), *map(str, new), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "SAME KERNEL" in out.read_text() and "compares a kernel with itself" in out.read_text()
    assert "WARNING" in out.with_suffix(".md").read_text()
    assert json.loads(out.with_suffix(".json").read_text())["warnings"]


def test_repeat_auto_refuses_two_names_of_one_binary(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(LabError, match="are the same binary .* nothing to decide"):
        refuse_same_binary(Kernel("a", TRUE, build_id="aa" * 20), Kernel("b", TRUE, build_id="aa" * 20))
    refuse_same_binary(Kernel("a", TRUE, build_id="aa" * 20), Kernel("b", TRUE, build_id="bb" * 20))
    a, b = tmp_path / "a.bzImage", tmp_path / "b.bzImage"  # two files, one binary
    for f in (a, b):
        f.write_bytes(_fake_bzimage(lzma.compress(TRUE.read_bytes(), format=lzma.FORMAT_XZ)))
    proc = numalab("run", "--kernel", str(a), "--kernel", str(b), "--repeat", "auto", "--out", str(tmp_path / "o"),
                   env={"NUMALAB_CACHE": str(tmp_path / "cache")})  # fmt: skip
    assert_one_line_error(proc, "--repeat auto: --kernel a.bzImage and --kernel b.bzImage are the same binary")
    assert not (tmp_path / "o").exists()
