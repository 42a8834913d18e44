"""``numalab compare`` warns, in one line, when the two sides' guests were shown different CPUs (issue 48): another
``cpu_vendor``, another ``cpu_model`` (family/model), or a model on one side's records and none on the other's (a
record made before the field). The line is among the comparison's warnings, so it is wherever they are: text,
markdown, HTML, JSON and the report. On copies of the checked-in ring-4 numa01 records (balancing on), one
kernel, their manifests' topology given a CPU grid."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from common import numalab
from test_analysis import ON

from lab.analysis import compare as cmp
from lab.analysis.cpu_readback import read_cpus
from lab.analysis.record import RunRecord
from lab.report import ab_table

WARNING = "the sides' guests were shown different CPUs"
GRID = {"packages": 4, "dies_per_package": 1, "clusters_per_die": 1, "cores_per_cluster": 2, "threads": 1,
        "llcs_per_node": 1}  # fmt: skip
GNR = GRID | {"vendor": "intel", "cpu_model": {"family": 6, "model": 173}}


def _copies(tmp_path: Path, tag: str, grid: dict | None) -> list[Path]:
    """Copies of the ON records with their own run ids and, unless ``grid`` is None, that CPU grid."""
    out = []
    for src in ON:
        dest = tmp_path / f"{tag}-{src.name}"
        shutil.copytree(src, dest)
        m = json.loads((dest / "manifest.json").read_text())
        m["run_id"] += f"-{tag}"
        if grid is not None:
            m["topology"]["cpu_grid"] = grid
        (dest / "manifest.json").write_text(json.dumps(m))
        out.append(dest)
    return out


def _compare(tmp_path: Path, base: dict | None, new: dict | None) -> cmp.Comparison:
    return cmp.compare_runs(
        [RunRecord.load(p) for p in _copies(tmp_path, "a", base)],
        [RunRecord.load(p) for p in _copies(tmp_path, "b", new)],
    )


def _cpu_warnings(c: cmp.Comparison) -> list[str]:
    return [w for w in c.warnings if WARNING in w]


def test_a_model_on_one_side_only_warns_everywhere(tmp_path: Path) -> None:
    c = _compare(tmp_path, None, GNR)
    [w] = _cpu_warnings(c)
    assert "baseline no cpu_vendor, no cpu_model; new cpu_vendor intel, cpu_model 6/173" in w and "\n" not in w
    # one kernel shown two CPUs is not a kernel compared with itself
    assert not c.same_kernel and c.warnings == [w]
    assert f"  WARNING: {w}" in ab_table.to_text(c).splitlines()
    assert f"WARNING: {w}" in ab_table.to_markdown(c) and "WARNING: the sides&#x27; guests" in ab_table.to_html(c)
    assert json.loads(ab_table.to_json(c))["warnings"] == [w]


def test_another_vendor_warns(tmp_path: Path) -> None:
    [w] = _cpu_warnings(_compare(tmp_path, GRID | {"vendor": "intel"}, GRID | {"vendor": "amd"}))
    assert "baseline cpu_vendor intel, no cpu_model; new cpu_vendor amd, no cpu_model" in w


def test_another_family_or_model_warns(tmp_path: Path) -> None:
    spr = GNR | {"cpu_model": {"family": 6, "model": 143}}
    [w] = _cpu_warnings(_compare(tmp_path / "m", GNR, spr))
    assert "baseline cpu_vendor intel, cpu_model 6/173; new cpu_vendor intel, cpu_model 6/143" in w
    other_family = GNR | {"cpu_model": {"family": 25, "model": 173}}
    [w] = _cpu_warnings(_compare(tmp_path / "f", GNR, other_family))
    assert "new cpu_vendor intel, cpu_model 25/173" in w


def test_the_same_cpu_on_both_sides_says_nothing(tmp_path: Path) -> None:
    for tag, grid in (("none", None), ("gnr", GNR)):
        c = _compare(tmp_path / tag, grid, grid)
        assert not _cpu_warnings(c)
        assert c.same_kernel and len(c.warnings) == 1  # one kernel, one CPU: the same-kernel warning, as before


def test_the_command_prints_the_line_in_text_and_json(tmp_path: Path) -> None:
    base, new = _copies(tmp_path, "a", None), _copies(tmp_path, "b", GNR)
    sides = [a for p in base for a in ("--baseline", str(p))] + [a for p in new for a in ("--new", str(p))]
    proc = numalab("compare", *sides)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if WARNING in ln]
    assert len(lines) == 1 and lines[0].startswith("  WARNING: ") and "cpu_model 6/173" in lines[0]
    proc = numalab("compare", *sides, "--json")
    assert proc.returncode == 0, proc.stderr
    assert [w for w in json.loads(proc.stdout)["warnings"] if WARNING in w] == [lines[0].removeprefix("  WARNING: ")]


# --- what the guests read back (issue 71): one preset, one spec grid, two machines seen ---

VIEWS = Path(__file__).resolve().parent.parent / "data" / "cpu_views"


def _with_readback(paths: list[Path], seen: dict) -> list[Path]:
    for p in paths:
        m = json.loads((p / "manifest.json").read_text())
        m.setdefault("guest_topology", {}).setdefault("readback", {})["cpus"] = seen
        (p / "manifest.json").write_text(json.dumps(m))
    return paths


def _genoa_seen() -> dict:
    return read_cpus(VIEWS / "genoa-nps2@7.3")


def _one_llc_a_package(seen: dict) -> dict:
    """The same guest with every CPU on one L3 (another grid under the same preset name)."""
    cpus = {c: v | {"caches": v["caches"] | {"L3": f"0-{len(seen['cpus']) - 1}"}} for c, v in seen["cpus"].items()}
    return seen | {"cpus": cpus}


def _compare_seen(tmp_path: Path, base: dict, new: dict) -> cmp.Comparison:
    return cmp.compare_runs(
        [RunRecord.load(p) for p in _with_readback(_copies(tmp_path, "a", GRID), base)],
        [RunRecord.load(p) for p in _with_readback(_copies(tmp_path, "b", GRID), new)],
    )


def test_another_llc_count_read_back_warns_though_the_specs_agree(tmp_path: Path) -> None:
    seen = _genoa_seen()
    [w] = _cpu_warnings(_compare_seen(tmp_path, seen, _one_llc_a_package(seen)))
    assert "as they read them back" in w and "\n" not in w
    assert "baseline GenuineIntel 15/107: 8 CPUs, 1 package(s), 4 die(s), 4 LLC(s)" in w
    assert "new GenuineIntel 15/107: 8 CPUs, 1 package(s), 4 die(s), 1 LLC(s)" in w


def test_another_cpuid_read_back_warns_though_the_specs_agree(tmp_path: Path) -> None:
    seen = _genoa_seen()
    [w] = _cpu_warnings(_compare_seen(tmp_path, seen, seen | {"vendor": "AuthenticAMD", "family": 25}))
    assert "new AuthenticAMD 25/107: 8 CPUs" in w


def test_the_same_read_back_says_nothing_though_the_specs_differ(tmp_path: Path) -> None:
    """What the guests saw wins over what the specs asked (under KVM both are shown the host's CPU)."""
    seen = _genoa_seen()
    base = _with_readback(_copies(tmp_path, "a", GRID | {"vendor": "intel"}), seen)
    new = _with_readback(_copies(tmp_path, "b", GRID | {"vendor": "amd"}), seen)
    c = cmp.compare_runs([RunRecord.load(p) for p in base], [RunRecord.load(p) for p in new])
    assert not _cpu_warnings(c)


def test_a_side_without_read_back_falls_back_to_the_specs(tmp_path: Path) -> None:
    base = _with_readback(_copies(tmp_path, "a", GRID | {"vendor": "intel"}), _genoa_seen())
    new = _copies(tmp_path, "b", GRID | {"vendor": "amd"})
    c = cmp.compare_runs([RunRecord.load(p) for p in base], [RunRecord.load(p) for p in new])
    [w] = _cpu_warnings(c)
    assert "baseline cpu_vendor intel, no cpu_model; new cpu_vendor amd, no cpu_model" in w
