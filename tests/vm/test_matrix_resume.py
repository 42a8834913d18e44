"""A resumed matrix refuses inputs whose content changed since its runs (a real VM run)."""

from __future__ import annotations

import pytest
from common import numalab

pytestmark = pytest.mark.vm

TOPO = "name: tiny\nnodes: 2\ncpus_per_node: 1\nmemory_per_node: 256M\nlinks: [[0, 1]]\ndistance: {per_hop: 10}\n"


def test_changed_topology_file_is_refused_on_resume(tmp_path) -> None:
    topo = tmp_path / "tiny.yaml"
    topo.write_text(TOPO)
    spec = tmp_path / "m.yaml"
    spec.write_text(f"name: resume\ntopologies: [{topo}]\nkernels: [stock]\nworkloads: [{{name: idle, duration: 1}}]\n")
    out = tmp_path / "out"
    first = numalab("matrix", "run", str(spec), "--out", str(out), "--no-reports", timeout=600)
    assert first.returncode == 0, first.stdout + first.stderr[-2000:]
    again = numalab("matrix", "run", str(spec), "--out", str(out), "--no-reports", timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]  # unchanged inputs: resumes (nothing to redo)
    topo.write_text(TOPO.replace("per_hop: 10", "per_hop: 20"))
    proc = numalab("matrix", "run", str(spec), "--out", str(out), "--no-reports", timeout=600)
    # (progress lines first; the refusal is the last line)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert last.startswith(f"numalab: error: --out {out}: topology {topo} changed since its runs were made"), last
