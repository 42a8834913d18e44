"""Issue #23, bring your own workload, end to end on ring-2: a workload file carrying a small static program
(built here with gcc -static) and a host tool (coreutils' nproc, dynamically linked: copied with its library
closure) and a Debian package (rt-tests: its programs; hackbench runs after the program), its metrics in the
run record and in ``numalab compare --json`` with their declared direction and mean; the one-off
``--workload-cmd`` form too."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from common import numalab, static_workload

pytestmark = pytest.mark.vm

# Counts loops of a busy sum for the given seconds; prints what it did and the CPU count it was handed.
REPRO_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 1.0;
    int cpus = argc > 2 ? atoi(argv[2]) : -1;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    unsigned long n = 0;
    volatile unsigned long x = 0;
    double el;
    do {
        for (int i = 0; i < 100000; i++) x += i;
        n++;
        clock_gettime(CLOCK_MONOTONIC, &b);
        el = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
    } while (el < secs);
    printf("REPRO {\"loops_per_s\": %.3f, \"wall_s\": %.3f, \"cpus_seen\": %d}\n", n / el, el, cpus);
    return 0;
}
"""
NPROC = "/usr/bin/nproc"  # in the guest only if the workload file carries it (the base has busybox's in /bin)

WORKLOAD = f"""\
name: repro
command: ./repro {{duration}} $({NPROC}) && hackbench -p -g 1 -f 2 -l 5 > /dev/null
files: [repro]
tools: [{NPROC}]
packages: [rt-tests]
results:
  json-line: "REPRO "
metrics:
  - {{name: loops_per_s, unit: 1/s, higher_is_better: true, mean: hmean}}
  - {{name: wall_s, unit: s, higher_is_better: false}}
"""


def _build(tmp_path: Path) -> Path:
    if not Path(NPROC).is_file():
        pytest.fail("coreutils is part of make setup")
    return static_workload(tmp_path, "repro", REPRO_C, WORKLOAD)


def _run(*args: str) -> dict:
    proc = numalab("run", "--topology", "ring-2", "--duration", "2", "--no-trace", "--json", *args, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_workload_file_metrics_reach_compare(tmp_path: Path) -> None:
    spec = _build(tmp_path)
    runs = []
    for side, balancing in (("a", "on"), ("b", "off")):  # two groups, so that the report compares them
        out = tmp_path / side
        m = _run("--workload", str(spec), "--numa-balancing", balancing, "--out", str(out))
        assert m["status"] == "ok", (m["reason"], m.get("console_tail"))
        result = m["workload"]["result"]
        # The host's nproc ran in the guest (busybox's is /bin/nproc) and saw every vCPU.
        assert result["cpus_seen"] == m["topology"]["total_cpus"], result
        assert result["loops_per_s"] > 0 and 1.5 < result["wall_s"] < 30
        # its declared rate's twin: the loops per vCPU CPU-second (the host clock's; lab.analysis.metrics)
        assert m["metrics"]["per_vcpu_s"]["loops_per_vcpu_s"] > 0, m["metrics"].get("per_vcpu_s")
        assert m["workload"]["spec"]["sha256"] == hashlib.sha256(spec.read_bytes()).hexdigest()
        assert m["guest_image"]["user"]["files"] == ["/workload/repro"]
        tools = m["guest_image"]["user"]["tools"]
        assert tools[0] == NPROC and "/usr/bin/hackbench" in tools, tools  # the tool, and rt-tests' programs
        assert m["guest_image"]["user"]["packages"] == ["rt-tests"]
        assert m["guest_image"]["user"]["layer_bytes"] > (tmp_path / "repro").stat().st_size
        runs.append(out)

    proc = numalab("compare", "--baseline", str(runs[0]), "--new", str(runs[1]), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["metric"]: r for r in json.loads(proc.stdout)["metrics"]}
    loops, wall = rows["workload.loops_per_s"], rows["workload.wall_s"]
    assert (loops["better"], loops["mean"], loops["unit"]) == ("higher", "Hmean", "1/s")
    assert (wall["better"], wall["mean"], wall["unit"]) == ("lower", "Amean", "s")
    twin = rows["workload.loops_per_vcpu_s"]
    assert (twin["better"], twin["mean"], twin["unit"]) == ("higher", "Hmean", "1/vCPU-s")
    assert "workload.cpus_seen" not in rows  # a figure the file did not declare is not a metric

    # The report compares the two groups on the declared metrics too, each with its mean, and plots them
    html = tmp_path / "report.html"
    proc = numalab("report", str(runs[0]), str(runs[1]), "--out", str(html))
    assert proc.returncode == 0, proc.stderr
    (comparison,) = json.loads(html.with_suffix(".json").read_text())["comparisons"]
    text = comparison["text"]
    assert any(ln.startswith("Hmean") and "workload.loops_per_s" in ln for ln in text.splitlines()), text
    assert any(ln.startswith("Amean") and "workload.wall_s" in ln for ln in text.splitlines()), text
    assert "workload.cpus_seen" not in text
    page = html.read_text()
    assert '<span class="mono">workload.loops_per_s</span>' in page  # its dot plot beside the key metrics


def test_workload_cmd_every_number_is_a_metric(tmp_path: Path) -> None:
    _build(tmp_path)
    cmd = "./repro {duration} {cpus} | sed 's/^REPRO /NUMALAB_RESULT /'"
    m = _run("--workload-cmd", cmd, "--workload-file", str(tmp_path / "repro"), "--out", str(tmp_path / "cmd"))
    assert m["status"] == "ok", (m["reason"], m.get("console_tail"))
    declared = {d["name"]: d["better"] for d in m["workload"]["metrics"]}
    assert declared == {"loops_per_s": "higher", "wall_s": "higher", "cpus_seen": "higher"}
