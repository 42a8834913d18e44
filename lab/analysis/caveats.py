"""What a verdict cannot mean, said in the verdict's own row.

A throughput or time row (the workload's own figures, ``workload.*``, in a unit of time, a rate, or a ratio of
speeds such as the bandwidth matrix's remote/local) measures what locality buys only where remote memory costs
something; a workload's share (``%``: misplaced's ``local_pct``, nodes13's ``balance_pct``) says where memory
and tasks ended up, which the VM does not change. A run record says whether it did:

* ``remote_latency.model`` (``numalab run --remote-latency slit|table``): the access plugin charged remote
  misses (held the vCPU under the host's clock; the guest's clock under ``--qemu charge --clock virtual``):
  remote memory costs, by the model;
* ``accelerator.name`` ``tcg`` without such a model: every guest node is the same host memory, and TCG
  emulates an access the same wherever it lands: remote memory costs nothing;
* any other accelerator (KVM) whose ``placement.memory_host_nodes`` put every guest node's memory on one host
  node: remote memory is local memory on the host, and costs nothing either.

Where it costs nothing, balancing can only cost (its hint faults and page copies) and gain nothing, so a
"worse" on such a row is about the VM, not about the kernel: each such row's verdict carries
:data:`FREE_REMOTE` (:func:`row_caveat`), and the notes say which command runs the modelled machine
(:data:`MODELLED_COMMAND`). Mechanism rows (hint-fault locality, pages migrated, the NUMA decisions) are what
the kernel did, and carry none.
"""

from __future__ import annotations

from lab.vm.tcg.machine_model import DEFAULT_MODEL

FREE_REMOTE = "remote memory costs nothing here"
MODELLED_FLAGS = f"--model {DEFAULT_MODEL}"
MODELLED_COMMAND = f"numalab run {MODELLED_FLAGS} (make setup-qemu-charge builds that QEMU)"


def modelled_command(topology: str, workload: str) -> str:
    """The runs of a comparison again on the modelled machine (each side with its own settings)."""
    return (f"numalab run --topology {topology} --workload {workload} {MODELLED_FLAGS}, each side with its own "
            "settings (make setup-qemu-charge builds that QEMU first)")  # fmt: skip


# The rows whose figures would show what remote memory costs: the workload's own throughput, times, and ratios
# of speeds.
CAVEATED_PREFIXES = ("workload.",)
TIME_UNITS = frozenset({"s", "ms", "us", "µs", "ns"})
SPEED_RATIO_UNITS = frozenset({"x"})


def free_remote_why(manifest: dict) -> str | None:
    """Why remote memory cost nothing in the VM of a run record (a few words), or None where it cost something
    (a --remote-latency model; KVM with guest nodes on more than one host node) or the record cannot say."""
    if not isinstance(manifest, dict):
        return None
    latency = manifest.get("remote_latency")
    if isinstance(latency, dict) and isinstance(latency.get("model"), dict):
        return None
    accel = manifest.get("accelerator")
    name = accel.get("name") if isinstance(accel, dict) else None
    if name == "tcg":
        return "plain TCG, no --remote-latency model"
    placement = manifest.get("placement")
    hosts = placement.get("memory_host_nodes") if isinstance(placement, dict) else None
    if isinstance(hosts, list) and len(hosts) > 1 and len(set(map(str, hosts))) == 1:
        return f"every guest node's memory on host node {hosts[0]}"
    return None


def free_remote(manifests: list[dict]) -> str | None:
    """The reasons remote memory cost nothing in any of ``manifests`` ("; " between different ones), None
    where it cost something in every one."""
    whys = sorted({w for m in manifests if (w := free_remote_why(m))})
    return "; ".join(whys) if whys else None


def speed_unit(unit: str) -> bool:
    """A unit of time, of a rate ("GB/s", "1/vCPU-s", "ops/CPU-s") or of a ratio of speeds ("x")."""
    u = unit.replace(" ", "")
    return u in TIME_UNITS or u in SPEED_RATIO_UNITS or u.endswith(("/s", "-s"))


def caveated(metric_key: str, unit: str) -> bool:
    """Whether a row of this metric measures what remote memory costs: one of the workload's own figures in a
    unit of speed or time."""
    return metric_key.startswith(CAVEATED_PREFIXES) and speed_unit(unit)


def row_caveat(metric_key: str, unit: str, why: str | None, model: str = "", phase: str = "") -> str:
    """The words a row's verdict carries: "remote memory costs nothing here (plain TCG, ...)"; on the modelled
    machine, which one and what validated it ("on the modelled machine m1 (known answers: K1 CPU capacity, ...)", or
    "on m1 modified (...): not the validated machine": ``model``, :func:`lab.vm.tcg.machine_model.model_words`);
    then, where runs were still migrating at their end, ``phase`` (lab.analysis.steady_state.phase_words); or ""."""
    if not caveated(metric_key, unit):
        return ""
    machine = f"{FREE_REMOTE} ({why})" if why else (f"on {model}" if model else "")
    return "; ".join(w for w in (machine, phase) if w)


def caveat_note(why: str | None) -> str | None:
    """The note under a table whose rows carry the caveat: what it means, and the command that measures it."""
    if not why:
        return None
    return (
        f"{FREE_REMOTE} ({why}): the workload's throughput and times cannot show what locality buys, only what "
        f"balancing costs; rows marked so are about this VM, not the kernel. The modelled machine, where remote "
        f"memory costs its SLIT ratio: {MODELLED_COMMAND}"
    )
