"""A run's host-time limit (lab.run.request.RunRequest.timeout): a hang detector whose allowance follows the work
a guest second holds. Under --clock virtual a guest second is 1 G instructions (times --insns-per-ns) on one host
thread; under parallel guest time (--quantum) each vCPU has its own, so a machine's guest second holds that many
instructions a vCPU, and coherence's directory costs host time besides. Seed 000's 4-node machine under --quantum
2000 with coherence on went past the one-vCPU allowance (256 s), then past the four vCPUs' without coherence's
(436 s), on 2026-11-28."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from lab.matrix.definition import load_matrix
from lab.matrix.schedule import GUARD_S, child_limit_s
from lab.run.remote_latency import COHERENCE_SCALE, RemoteLatency
from lab.run.request import RunRequest, default_timeout_s
from lab.topology.model.spec import load_topology
from lab.vm.tcg.guest_clock import GuestClock
from lab.vm.tcg.latency_model import LatencyModel


def _req(clock: GuestClock) -> RunRequest:
    """A request with only what the limit reads (the kernel and workload are not)."""
    return RunRequest(topology=load_topology("ring-4"), kernel=None, workload=None,  # type: ignore[arg-type]
                      settings=SimpleNamespace(duration_s=5.0), accel="tcg", clock=clock)  # type: ignore[arg-type]  # fmt: skip


def test_the_timeout_follows_the_instructions_a_guest_second_holds() -> None:
    shared = _req(GuestClock("virtual"))
    cpus = shared.topology.total_cpus
    boot = 2 * (60 + 2 * cpus)  # (the virtual clock's boot allowance)
    assert shared.timeout() == boot + 5 * 12 + 60  # one thread, one clock: 12 host s a guest s
    assert _req(GuestClock("virtual", insns_per_ns=4)).timeout() == boot + 5 * 12 * 4 + 60
    parallel = _req(GuestClock("virtual", quantum_ns=2000))
    assert parallel.timeout() == boot + 5 * 12 * cpus + 60  # each vCPU its own guest second
    assert _req(GuestClock("virtual", quantum_ns=2000, insns_per_ns=4)).timeout() == boot + 5 * 12 * 4 * cpus + 60
    # the host's clock and KVM: as before
    assert _req(GuestClock("host")).timeout() == 60 + 2 * cpus + 5 * 1.5 + 60
    assert replace(parallel, timeout_s=30.0).timeout() == 30.0
    # coherence on: its directory at every access, 2.5 times the host time a guest second may take
    model = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1), clock="virtual", coherence=True)
    assert replace(parallel, instruments=(RemoteLatency(model),)).timeout() == boot + 5 * 12 * cpus * 2.5 + 60
    without = RemoteLatency(replace(model, coherence=False))
    assert replace(parallel, instruments=(without,)).timeout() == parallel.timeout()


def test_the_matrix_runner_waits_for_a_runs_own_limits_before_killing_it() -> None:
    # Seed 000's machine under parallel guest time with coherence on, 4 vCPUs, 5 guest s: its own timeout, then its
    # collection's (as long again), then the guard. The runner killed such runs at 310 s before (2026-11-28).
    spec = load_matrix("lab/seeds/seed000/seed000-coherence.yaml")
    run = spec.runs[0]
    own = default_timeout_s(4, 5.0, "tcg", GuestClock("virtual", quantum_ns=2000), instrument_scale=COHERENCE_SCALE)
    assert own == 136 + 5 * 12 * 4 * 2.5 + 60  # 796 s
    assert child_limit_s(run, 4, None) == own + own + GUARD_S
    # a short run's collection still has its 300 s; a spec's timeout: is the run's own
    assert child_limit_s(run, 4, 50.0) == 50.0 + 300.0 + GUARD_S
