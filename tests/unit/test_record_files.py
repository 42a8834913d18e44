"""The run record's files are named once (lab.record_files), and the guest init writes exactly the guest's.

The init is a shell script the host never runs, so nothing but this test ties its file names to the
host's: a file the init starts writing, or stops writing, without lab/record_files.py knowing fails here.
"""

from __future__ import annotations

import json
import re

import pytest
from common import REPO

from lab import record_files as rf

INIT = REPO / "images" / "guest" / "init"
DATA_RUNS = REPO / "tests" / "data" / "runs"
# Modules that still spell record files out, with the reason (each is owned by another change).
LITERALS_ALLOWED: dict[str, str] = {}  # module -> why it may spell a record file out (none today)


def _guest_writes(init: str) -> tuple[set[str], set[str], set[str]]:
    """The files the init puts in its readback and results directories, and on the results share."""
    assert re.search(r"^R=/tmp/readback O=/tmp/out$", init, re.M), "the init's $R/$O directories moved"
    init = re.sub(r"^\s*#.*$", "", init, flags=re.M)  # comments name no file the init writes
    name = r"([\w][\w.-]*)"
    readback = set(re.findall(rf"\$R/{name}", init)) | set(re.findall(rf"/tmp/readback/{name}", init))
    results = set(re.findall(rf"\$O/{name}", init)) | set(re.findall(rf"/tmp/out/{name}", init))
    # The hostile test fault plants its own names on the share: not the init's protocol.
    plain = re.sub(r"^\s*hostile\)(.*?);;", "", init, flags=re.M | re.S)
    share = set(re.findall(rf"/results/{name}", plain)) | set(re.findall(rf"send {name} ", plain))
    return readback, results, share


def test_the_init_writes_exactly_the_guest_files_named() -> None:
    readback, results, share = _guest_writes(INIT.read_text())
    assert sorted(readback) == sorted(rf.GUEST_READBACK)
    assert sorted(results) == sorted(rf.GUEST_RESULTS)
    assert sorted(share) == sorted(rf.SHARE_FILES)


def test_a_file_on_one_side_only_is_seen() -> None:
    """The comparison above can fail: a file the init gains, or loses, shows up in what is parsed."""
    init = INIT.read_text()
    readback, results, _ = _guest_writes(init.replace("stage topology\n", "cat /proc/zoneinfo > $R/zoneinfo.txt\n"))
    assert readback - set(rf.GUEST_READBACK) == {"zoneinfo.txt"}
    _, results, _ = _guest_writes(init.replace("$O/stat.end", "/dev/null"))
    assert set(rf.GUEST_RESULTS) - results == {"stat.end"}


def test_every_file_is_named_once_and_described() -> None:
    names = [f.name for f in rf.ALL]
    assert len(names) == len(set(names)) and not set(names) & set(rf.SHARE_FILES)
    assert all(f.side in ("host", "readback", "results") and f.about for f in rf.ALL)
    assert set(rf.HOST) | set(rf.GUEST) == set(names)
    assert rf.MANIFEST in rf.HOST and rf.WORKLOAD_OUT in rf.GUEST_RESULTS and rf.TOPOLOGY in rf.GUEST_READBACK


@pytest.mark.parametrize("run", sorted(p.name for p in DATA_RUNS.iterdir() if p.is_dir()))
def test_the_recorded_runs_hold_only_named_files(run: str) -> None:
    """What real runs listed in their manifests. Records made before the results share (lab.vm.share)
    also list guest-done, which the guest then wrote into the record directly."""
    listed = json.loads((DATA_RUNS / run / rf.MANIFEST).read_text())["files"]
    assert listed and set(listed) - set(rf.BY_NAME) <= {rf.GUEST_DONE}


def test_the_code_uses_the_names_not_literals() -> None:
    """No module of lab/ spells a record file out (but lab/record_files.py and those allowed, for a reason)."""
    names = {f.name for f in rf.ALL} | set(rf.SHARE_FILES)
    alternatives = "|".join(map(re.escape, names))
    literal = re.compile(rf"""["']({alternatives})["']""")
    found = []
    for path in sorted((REPO / "lab").rglob("*.py")):
        rel = str(path.relative_to(REPO))
        if rel == "lab/record_files.py" or rel in LITERALS_ALLOWED:
            continue
        found += [
            f"{rel}:{i}: {m.group(1)}"
            for i, line in enumerate(path.read_text().splitlines(), 1)
            for m in literal.finditer(line)
        ]
    assert found == []
