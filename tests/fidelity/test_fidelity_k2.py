"""Issue 66's K2 on real VMs (make test-fidelity; not in make test since 2026-11-29: its four runs of 30 guest s took
300 s of a worker on a quiet host, and the suite was over its 40 minutes): the modelled machine m1 (--model m1) gives
a throughput figure the arithmetic of the case predicts (K1, CPU capacity, is in make test: test_vm_sched_groups.py).

The predictions are in tests/known_answers.py; the figures measured here are in docs/throughput.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import numalab
from known_answers import locality_prediction

pytestmark = [pytest.mark.fidelity, pytest.mark.vm]

# seed 000's 4-node machine (2 CPUs a node: the task has a spare CPU wherever it goes), memory on node 0, the
# task on node 2 (SLIT 40), the kernel's own scan knobs (first scan after 1 s), 30 guest seconds.
K2 = ("--topology", "seed000-4node", "--duration", "30", "--kernel-default-knobs", "--model", "m1")


def _run(out: Path, workload: str, *extra: str) -> dict:
    proc = numalab("run", *K2, "--workload", workload, "--out", str(out), "--json", *extra, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "ok", m["reason"]
    assert m["model"] == {"name": "m1", "differs": [], "known_answers": m["model"]["known_answers"]}
    return m


def test_known_answer_k2_locality_pays_by_the_right_amount(tmp_path) -> None:
    """K2: a task that balancing brings to its memory (``misplaced``: the task moves) or whose memory balancing
    brings to it (``misplaced-movable``: the memory moves) works at the remote rate until they meet and at the
    local rate after. Each balancing-on run's throughput is within 10% of that prediction from the off run's rate,
    the local control's (``misplaced-local``) and the moment they met (the workload's own, or half the pages
    migrated in the trace), and "on" never loses. A model whose remote charge did not follow the SLIT, or whose
    clock ran on while the kernel moved pages, misses it. Measured here (2026-11-28, 6.1 stock): off 2.30 GB/s,
    local 7.67; misplaced met after 4.01 s, 6.960 GB/s against 6.955 predicted (+0.1%); movable's memory moved
    after 2.01 s (16,393 pages), 7.228 against 7.307 (-1.1%)."""
    off = _run(tmp_path / "off", "misplaced", "--numa-balancing", "off")
    local = _run(tmp_path / "local", "misplaced-local")
    assert off["workload"]["result"]["local_pct"] == 0  # balancing off: the task stayed remote
    assert local["workload"]["result"]["task_node_end"] == local["workload"]["result"]["mem_node"]
    # the model prices the SLIT: 40 against 10 makes a remote stream cost (m1 measured 3.3x)
    assert local["workload"]["result"]["gbps"] > 2 * off["workload"]["result"]["gbps"]
    for workload, how in (("misplaced", "the task moved"), ("misplaced-movable", "the memory moved")):
        on = _run(tmp_path / workload, workload)
        predicted = locality_prediction(off, local, tmp_path / workload)
        measured = on["workload"]["result"]["gbps"]
        print(
            f"K2 {workload}: off {off['workload']['result']['gbps']:.3f} GB/s, local "
            f"{local['workload']['result']['gbps']:.3f}; met after {predicted.met_after_s:.2f} s ({how}); "
            f"{measured:.3f} against {predicted.gbps:.3f} predicted ({100 * (measured / predicted.gbps - 1):+.1f}%)"
        )
        assert predicted.how == how, (workload, predicted)
        assert 0.3 < predicted.met_after_s < 15, predicted  # balancing acted, and early enough to pay
        assert abs(measured / predicted.gbps - 1) <= 0.10, (workload, measured, predicted, predicted.gbps)
        assert measured > off["workload"]["result"]["gbps"], (workload, measured)
