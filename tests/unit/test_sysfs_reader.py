"""The one reader of sysfs's CPU and node files (lab.topology.model.sysfs, issue 69) under each of its trusts: a bad
file is a LabError naming it (STRICT, topo import), left out (BEST_EFFORT, this host), or named in problems and
never believed beyond its bounds (UNTRUSTED, a guest's grep dump)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from lab.errors import LabError
from lab.topology.model.sysfs import (
    MAX_TEXT,
    CacheFacts,
    SysfsFiles,
    SysfsReader,
    Trust,
    grep_files,
    read_caches,
    read_cpu,
    read_node,
)

CPU0 = {
    "cpu0/topology/physical_package_id": "0",
    "cpu0/topology/die_id": "0",
    "cpu0/topology/cluster_id": "-1",
    "cpu0/topology/core_id": "0",
    "cpu0/topology/thread_siblings_list": "0-1",
    "cpu0/cache/index0/level": "1",
    "cpu0/cache/index0/type": "Data",
    "cpu0/cache/index0/shared_cpu_list": "0-1",
    "cpu0/cache/index3/level": "3",
    "cpu0/cache/index3/type": "Unified",
    "cpu0/cache/index3/shared_cpu_list": "0-7",
    "cpu0/cache/index3/id": "0",
    "cpu0/cache/index3/size": "32768K",
}


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text + "\n")
    return tmp_path


def _dump(files: dict[str, str]) -> str:
    return "".join(f"/sys/devices/system/cpu/{rel}:{text}\n" for rel, text in files.items())


def _from_dump(text: str, problems: list[str]) -> SysfsFiles:
    return grep_files(enumerate(text.splitlines(), 1), "cpus.txt", problems)


def test_a_directory_and_a_grep_dump_read_alike(tmp_path: Path) -> None:
    want = read_cpu(SysfsReader(SysfsFiles(_tree(tmp_path, CPU0)), Trust.STRICT), 0)
    assert (want.package, want.die, want.cluster, want.core, want.thread_siblings) == (0, 0, -1, 0, (0, 1))
    assert want.caches == (
        CacheFacts(0, 1, "Data", (0, 1)),
        CacheFacts(3, 3, "Unified", tuple(range(8)), 0, "32768K"),
    )
    assert [c.name for c in want.caches] == ["L1d", "L3"]
    problems: list[str] = []
    files = _from_dump(_dump(CPU0), problems)
    assert files.numbered("", "cpu") == [0] and files.numbered("cpu0/cache", "index") == [0, 3]
    for trust in Trust:
        assert read_cpu(SysfsReader(files, trust, problems), 0) == want
    assert problems == []


@pytest.mark.parametrize(
    ("rel", "text", "needle"),
    [
        ("cpu0/topology/physical_package_id", "one", "physical_package_id: not a whole number: 'one'"),
        ("cpu0/topology/thread_siblings_list", "", "thread_siblings_list: cannot read the CPU list ''"),
        ("cpu0/cache/index3/shared_cpu_list", "0-99999", "index3/shared_cpu_list: cannot read the CPU list '0-99999'"),
        ("cpu0/cache/index0/type", "Trace", "index0/type: not a cache type (Data, Instruction, Unified): 'Trace'"),
        ("cpu0/cache/index3/size", "32 MB", "index3/size: not a cache size (NK): '32 MB'"),
    ],
)
def test_strict_refuses_a_bad_file_and_names_it(tmp_path: Path, rel: str, text: str, needle: str) -> None:
    root = _tree(tmp_path, CPU0 | {rel: text})
    with pytest.raises(LabError) as err:
        read_cpu(SysfsReader(SysfsFiles(root), Trust.STRICT), 0)
    assert str(err.value) == f"{root / rel.rpartition('/')[0]}/{needle.rpartition('/')[2]}"


def test_strict_wants_the_files_it_needs_and_not_the_others(tmp_path: Path) -> None:
    root = _tree(tmp_path, {k: v for k, v in CPU0.items() if not k.endswith(("die_id", "cluster_id", "/id", "size"))})
    facts = read_cpu(SysfsReader(SysfsFiles(root), Trust.STRICT), 0)
    assert (facts.die, facts.cluster, facts.caches[1].id, facts.caches[1].size) == (None, None, None, None)
    (root / "cpu0/topology/thread_siblings_list").unlink()
    (root / "cpu0/topology/core_id").unlink()  # (a core known by neither file)
    with pytest.raises(LabError, match=r"cpu0/topology/core_id: cannot read \(No such file or directory\)$"):
        read_cpu(SysfsReader(SysfsFiles(root), Trust.STRICT), 0)
    (root / "cpu0/cache/index3/level").unlink()
    with pytest.raises(LabError, match=r"index3/level: cannot read \(No such file or directory\)$"):
        read_caches(SysfsReader(SysfsFiles(root), Trust.STRICT), 0)
    (root / "node0").mkdir()
    (root / "node0/cpulist").write_bytes(b"0-1\xff\n")
    with pytest.raises(LabError, match=r"node0/cpulist: not text$"):
        read_node(SysfsReader(SysfsFiles(root), Trust.STRICT), 0)


def test_best_effort_leaves_out_what_it_cannot_read(tmp_path: Path) -> None:
    root = _tree(tmp_path, CPU0 | {"cpu0/topology/core_id": "x", "cpu0/cache/index3/shared_cpu_list": "garbage"})
    (root / "cpu0/topology/physical_package_id").unlink()
    (root / "cpu0/topology/physical_package_id").mkdir()  # (cannot be read as a file)
    (root / "cpu0/cache/index0/type").write_bytes(b"\xff\xfe\n")
    problems: list[str] = []
    facts = read_cpu(SysfsReader(SysfsFiles(root), Trust.BEST_EFFORT, problems), 0)
    assert (facts.package, facts.core, facts.thread_siblings) == (None, None, (0, 1))
    assert facts.caches == (CacheFacts(0, 1, None, (0, 1)), CacheFacts(3, 3, "Unified", None, 0, "32768K"))
    assert problems == []  # (silent: this host's placement does with what it has)
    assert read_caches(SysfsReader(SysfsFiles(root), Trust.BEST_EFFORT), 5) is None  # no such CPU


def test_untrusted_names_each_bad_line_and_believes_nothing_beyond_its_bounds() -> None:
    text = _dump(
        CPU0
        | {
            "cpu0/topology/core_id": "99999999999999999999999999999999999999999999",
            "cpu0/cache/index0/shared_cpu_list": "0-8191," * 10,  # (ranges that overlap: 80,000 CPUs)
            "cpu0/cache/index3/size": "\x1b]0;owned\x07",
        }
    )
    text += "/sys/devices/system/cpu/cpu9000/topology/core_id:1\n"
    text += "/sys/devices/system/cpu/cpu1/topology/thread_siblings_list:" + "0," * MAX_TEXT + "\n"
    problems: list[str] = []
    files = _from_dump(text, problems)
    reader = SysfsReader(files, Trust.UNTRUSTED, problems)
    facts = read_cpu(reader, 0)
    assert (facts.core, facts.caches[0].shared_cpus, facts.caches[1].size) == (None, None, None)
    assert read_cpu(reader, 1).thread_siblings is None
    assert problems == [
        "cpus.txt line 14: cpu 9000 is not a CPU",
        "cpus.txt line 4: '99999999999999999999999999999999999999999999' is not a core_id",
        "cpus.txt line 8: '0-8191,0-8191,0-8191,0-8191,0-8191,0-8191,0-8191,0-8191,0-8191,0-8191,' is not a "
        "shared_cpu_list",
        "cpus.txt line 13: '\\\\x1b]0;owned\\\\x07' is not a size",
        f"cpus.txt line 15: more than {MAX_TEXT} characters",
    ]


def test_untrusted_never_raises() -> None:
    """Lines of a guest's dump cut, swapped and spliced at random: values and problems, never a traceback."""
    rng = random.Random(69)
    lines = _dump(CPU0).splitlines()
    pieces = ["", "-", ",", "0-", "-1", "x", "\xff", "99999", "index", "cpu", "/", ":", "\n", "Unified", "9" * 50]
    for _ in range(300):
        text = "\n".join(
            rng.choice(lines)[: rng.randrange(80)] + "".join(rng.choice(pieces) for _ in range(rng.randrange(4)))
            for _ in range(rng.randrange(20))
        )
        problems: list[str] = []
        files = _from_dump(text, problems)
        reader = SysfsReader(files, Trust.UNTRUSTED, problems)
        for cpu in files.numbered("", "cpu"):
            read_cpu(reader, cpu)
        assert all(isinstance(p, str) and "\n" not in p for p in problems)


def test_nodes_read_alike_under_each_trust(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"node1/cpulist": "", "node1/meminfo": "Node 1 MemTotal: 1048576 kB\nNode 1 MemFree: 12 kB",
                            "node1/distance": "20 10"})  # fmt: skip
    for trust in Trust:
        facts = read_node(SysfsReader(SysfsFiles(root), trust), 1)
        assert (facts.cpus, facts.meminfo_kb, facts.distances) == ((), {"MemTotal": 1048576, "MemFree": 12}, (20, 10))
    (root / "node1/distance").write_text("20 ten\n")
    with pytest.raises(LabError, match=r"node1/distance: not a row of numbers: '20 ten'$"):
        read_node(SysfsReader(SysfsFiles(root), Trust.STRICT), 1)
    assert read_node(SysfsReader(SysfsFiles(root), Trust.BEST_EFFORT), 1).distances is None
    problems: list[str] = []
    assert read_node(SysfsReader(SysfsFiles(root), Trust.UNTRUSTED, problems), 1).distances is None
    assert problems == [f"{root / 'node1/distance'}: '20 ten' is not a distance"]
