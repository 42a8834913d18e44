"""The vCPU threads' CPU time over the workload window (lab.vm.vcpu_time) and the per-vCPU-second twins of
the throughput metrics (lab.analysis.metrics.per_vcpu_second).

The sampler reads real /proc schedstat files (of this test's own threads, one of them kept busy); the real
VMs' figures are checked in tests/vm/test_vm_vcpu_time.py.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from lab.analysis.metrics import METRIC_KEYS, PER_CPU_SECOND, TWINS, metric_values, per_vcpu_second
from lab.vm.console import Stage
from lab.vm.vcpu_time import (
    END,
    START,
    StageSampler,
    ThreadTime,
    libvirt_stats_sample,
    read_schedstat,
    schedstat_sampler,
    window,
)


def _spin(stop: threading.Event, tid: list[int]) -> None:
    tid.append(threading.get_native_id())
    while not stop.is_set():
        pass


def test_the_sampler_reads_real_threads_over_a_window() -> None:
    stop, tid = threading.Event(), []
    busy = threading.Thread(target=_spin, args=(stop, tid))
    busy.start()
    try:
        while not tid:
            time.sleep(0.01)
        tids = {0: tid[0], 1: threading.get_native_id()}  # a busy "vCPU" and an idle one (this thread, asleep)
        seen: list[str] = []
        s = StageSampler("schedstat", schedstat_sampler(os.getpid(), tids), lambda st: seen.append(st.name))
        s(Stage(START, "", 1.0, 1.0))
        time.sleep(0.5)
        s(Stage("other", "", 1.2, 1.2))  # not sampled, still passed on
        s(Stage(END, "0", 1.5, 1.5))
    finally:
        stop.set()
        busy.join()
    assert seen == [START, "other", END]
    vt = s.result()
    assert vt is not None and vt["source"] == "schedstat" and vt["n_vcpus"] == 2
    assert 0.45 <= vt["window_s"] < 2.0
    busy_s = vt["vcpus"][0]["run_s"]
    assert 0 < busy_s <= vt["window_s"] * 1.05 and vt["vcpus"][1]["run_s"] < busy_s
    assert vt["run_s"] == pytest.approx(sum(v["run_s"] for v in vt["vcpus"]))
    assert vt["wait_s"] is not None and vt["wait_s"] >= 0 and vt["vcpus"][0]["slices"] >= 1


def test_a_thread_that_runs_every_vcpu_is_counted_once() -> None:
    """Single-threaded TCG (--clock virtual): QMP names one thread for every vCPU; its time is counted once."""
    me = threading.get_native_id()
    sample = schedstat_sampler(os.getpid(), {0: me, 1: me, 2: me})()
    assert list(sample) == [0]
    assert window("schedstat", (0.0, sample), (1.0, sample))["n_vcpus"] == 1


def test_a_window_that_never_ends_says_why() -> None:
    s = StageSampler("schedstat", lambda: {0: ThreadTime(1, 2, 3)})
    assert s.result() is None  # no workload ran
    s(Stage(START, "", 1.0, 1.0))
    assert s.result() == {"source": "schedstat", "problem": "the workload never ended (no workload-end stage)"}

    def gone():
        raise OSError("QEMU went away")

    bad = StageSampler("libvirt", gone)
    bad(Stage(START, "", 1.0, 1.0))
    assert bad.result() == {"source": "libvirt", "problem": "workload-start: QEMU went away"}
    assert read_schedstat(os.getpid(), 2**22 + 7) is None  # no such thread


def test_libvirt_stats_and_a_missing_wait() -> None:
    stats = {"vcpu.current": 2, "vcpu.0.time": 3_000_000_000, "vcpu.0.delay": 500_000_000,
             "vcpu.1.time": 1_000_000_000}  # fmt: skip
    a = libvirt_stats_sample(stats)
    assert a == {0: ThreadTime(3_000_000_000, 500_000_000, None), 1: ThreadTime(1_000_000_000, None, None)}
    b = libvirt_stats_sample(stats | {"vcpu.0.time": 5_000_000_000, "vcpu.1.time": 2_000_000_000})
    w = window("libvirt", (10.0, a), (14.0, b))
    assert (w["run_s"], w["window_s"], w["wait_s"]) == (3.0, 4.0, None)  # vCPU 1 has no wait: no sum


def test_every_throughput_metric_has_a_twin_equal_to_work_over_vcpu_seconds() -> None:
    rates = [k for k, m in METRIC_KEYS.items() if m.mean == "hmean" and "per_vcpu_s" not in k]
    rates = [k for k in rates if k not in PER_CPU_SECOND]
    assert PER_CPU_SECOND <= METRIC_KEYS.keys()
    assert sorted(f"workload.{t.rate}" for t in TWINS) == sorted(rates)
    for t in TWINS:
        twin = METRIC_KEYS[f"workload.{t.key}"]
        assert (twin.better, twin.mean) == ("higher", "hmean")
    vt = {"run_s": 8.0}
    numa = {"gbps": 1.1, "bytes_touched": 8_800_000_000, "elapsed_s": 8.0}
    assert per_vcpu_second(numa, vt) == {"gbps_per_vcpu_s": pytest.approx(8.8 / 8.0)}
    pairs = {"gbps": 0.0, "bytes_touched": 0, "round_trips": 40_000, "round_trips_per_s": 5000.0}
    assert per_vcpu_second(pairs, vt) == {"gbps_per_vcpu_s": 0.0, "round_trips_per_vcpu_s": 5000.0}
    perf = {"gbps": 2.0, "elapsed_s": 4.0}  # perf bench gives a rate and its time only
    assert per_vcpu_second(perf, vt) == {"gbps_per_vcpu_s": pytest.approx(1.0)}
    sysbench = {"sysbench_mib": 8227.12, "sysbench_mib_per_s": 4111.28, "sysbench_events": 9.0}  # no events rate
    assert per_vcpu_second(sysbench, vt) == {"sysbench_mib_per_vcpu_s": pytest.approx(8227.12 / 8.0)}
    assert per_vcpu_second(numa, None) == {} == per_vcpu_second(numa, {"problem": "x"})
    assert per_vcpu_second(numa, {"run_s": 0.0}) == {} == per_vcpu_second({"balance_pct": 50.0}, vt)
    manifest = {"workload": {"result": numa}, "metrics": {"per_vcpu_s": per_vcpu_second(numa, vt)}}
    assert metric_values(manifest)["workload.gbps_per_vcpu_s"] == pytest.approx(1.1)
    # an access-matrix run's throughput is never compared: nor its twin
    assert "workload.gbps_per_vcpu_s" not in metric_values(manifest | {"access_matrix": {"local_pct": 50}})


def test_the_twins_can_decide_an_auto_matrix_and_a_gate() -> None:
    from lab.matrix.definition import parse_matrix

    spec = parse_matrix({"name": "m", "topologies": ["ring-2"], "kernels": ["a", "b"], "workloads": ["pairs"],
                         "baseline": {"kernel": "a"}, "repeats": "auto",
                         "auto": {"decide": ["workload.round_trips_per_vcpu_s", "workload.gbps_per_vcpu_s"]},
                         "gates": [{"metric": "workload.round_trips_per_vcpu_s", "worse_than_baseline_pct": 5}]},
                        "m.yaml", "m")  # fmt: skip
    assert spec.auto is not None and spec.auto.decide == ("workload.round_trips_per_vcpu_s", "workload.gbps_per_vcpu_s")
    assert spec.gates[0].metric == "workload.round_trips_per_vcpu_s"


def test_a_vm_gone_at_its_end_mark_falls_back_to_the_last_sample_inside_the_window() -> None:
    """libvirt reads its console mirror every 0.3 s: a guest that powers off soon after its end mark is gone
    when the mark is read. The last sample the watcher's ticks took inside the window stands in for it."""
    samples = iter([{0: ThreadTime(1_000, 0, None)}, {0: ThreadTime(5_000, 10, None)}])
    alive = {"yes": True}

    def sample():
        if not alive["yes"]:
            raise ValueError("not enough values to unpack (expected 1, got 0)")  # libvirt: no such domain's stats
        return next(samples)

    s = StageSampler("libvirt", sample)
    s(Stage(START, "", 1.0, 1.0))
    s.refresh()
    alive["yes"] = False
    s.refresh()  # (the VM went away: nothing kept)
    s(Stage(END, "0", 2.0, 2.0))
    vt = s.result()
    assert vt is not None and vt["run_s"] == 4e-06 and vt["end"] == "the last sample before the VM stopped"
    gone = StageSampler("libvirt", lambda: {})
    gone(Stage(START, "", 1.0, 1.0))
    assert gone.result() == {"source": "libvirt", "problem": "workload-start: no vCPU could be read"}


def test_counters_that_go_backwards_give_no_window() -> None:
    """A domain's vCPU time never falls; an end sample below the start one (met once through libvirt) is named, not
    recorded as a negative run time that every per-vCPU-second twin would divide by."""
    samples = iter([{0: ThreadTime(5_000, 0, None), 1: ThreadTime(1_000, 0, None)},
                    {0: ThreadTime(1_000, 0, None), 1: ThreadTime(2_000, 0, None)}])  # fmt: skip
    s = StageSampler("libvirt", lambda: next(samples))
    s(Stage(START, "", 1.0, 1.0))
    s(Stage(END, "0", 2.0, 2.0))
    assert s.result() == {"source": "libvirt", "problem": "vCPU 0's run time went backwards over the window"}


def test_a_vm_stopping_as_its_end_mark_is_read_never_gives_a_window_over_some_vcpus() -> None:
    """A stopping QEMU loses its vCPU threads one by one: an end sample that has only some of them would
    undercount the CPU time (seen on ring-2: n_vcpus 1 of 4). The last whole sample stands in; without one,
    the record says why there is no window."""
    t = {i: ThreadTime(1_000, 0, 1) for i in range(4)}
    later = {i: ThreadTime(3_000, 0, 2) for i in range(4)}
    samples = iter([t, later, {0: ThreadTime(9_000, 0, 3)}, {2: ThreadTime(9_000, 0, 3)}])
    s = StageSampler("schedstat", lambda: next(samples))
    s(Stage(START, "", 1.0, 1.0))
    s.refresh()  # whole: kept
    s.refresh()  # vCPUs 1-3 gone: not kept
    s(Stage(END, "0", 2.0, 2.0))  # vCPU 2 only
    vt = s.result()
    assert vt is not None and vt["n_vcpus"] == 4 and vt["run_s"] == 8e-06, vt
    assert vt["end"] == "the last sample before the VM stopped"
    partial = iter([t, {0: ThreadTime(9_000, 0, 3), 3: ThreadTime(9_000, 0, 3)}])
    p = StageSampler("schedstat", lambda: next(partial))
    p(Stage(START, "", 1.0, 1.0))
    p(Stage(END, "0", 2.0, 2.0))
    assert p.result() == {"source": "schedstat", "problem": "workload-end: vCPU 1, 2 gone (the VM was stopping)"}


def test_a_signal_raised_while_sampling_ends_the_run() -> None:
    """lab.run.execute's SIGTERM handler raises in whatever the main thread does, a sample included: the sampler
    must let it through (it once swallowed it, and a libvirt run went on after SIGTERM)."""

    class Interrupted(BaseException):  # as lab.run.execute's
        pass

    def sample():
        raise Interrupted()

    s = StageSampler("libvirt", sample)
    with pytest.raises(Interrupted):
        s(Stage(START, "", 1.0, 1.0))
    s.taken[START] = (1.0, {0: ThreadTime(1, 0, None)})
    with pytest.raises(Interrupted):
        s.refresh()
