"""The access matrix (``numalab run --access-matrix``), one instrument of the run (lab.run.instrument): the plugin
counts the guest's memory accesses by (vCPU, node of the page); its counts go into the run record.

Its options are a piece of the run's (lab.vm.tcg.access_options), the plugin and its address map
lab.vm.tcg.access_plugin's, the counts' reader lab.analysis.access_counts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab.analysis.access_counts import read_log, self_check, summarize
from lab.errors import LabError
from lab.record_files import ACCESS_MATRIX_JSON, ACCESS_MATRIX_TXT
from lab.run.instrument import InstrumentResult, Plan, Window, keep_counts, record_section, section_lines
from lab.topology.model.topology import Topology
from lab.vm.libvirt.libvirt_conn import is_local_uri
from lab.vm.qemu.emulator import Emulator
from lab.vm.tcg.access_options import AccessOptions
from lab.vm.tcg.access_plugin import AccessPlugin

KEY = "access_matrix"  # its section of the manifest
STATUS = "access-map-mismatch"  # the self-check failed: the counts cannot be trusted
CLOCK_STATUS = "guest-clock-skew"  # the guest's clock did not follow the host's during the workload
RAW_FILE = ACCESS_MATRIX_TXT
JSON_FILE = ACCESS_MATRIX_JSON


def check_request(
    sample: int, accel: str | None, backend: str, uri: str = "", clock: str = "host", emulator: Emulator | None = None
) -> None:
    """One-line errors for what --access-matrix cannot do, before anything is built or booted
    (``accel`` None: not known yet; ``uri``: the libvirt host; ``emulator``: the QEMU, once known).
    Under --clock virtual TCG runs the vCPUs in turn on one thread, and a stock QEMU 10.0 then tells a plugin
    the vCPU that translated the code, not the one running it (images/qemu/0003): per-vCPU counts would be
    wrong, so only numalab's patched QEMU will do."""
    if sample < 1:
        raise LabError(f"--access-sample: must be >= 1, got {sample}")
    if accel is not None and accel != "tcg":
        raise LabError(f"--access-matrix: needs TCG (the plugin sees no access under {accel}); add --accel tcg")
    if backend == "libvirt" and not is_local_uri(uri or "qemu:///system"):
        raise LabError(
            f"--access-matrix: not with the remote libvirt host {uri}: the plugin is built for this host's QEMU "
            "and the counts are cut to the workload with this host's clock; use a local URI or --backend qemu"
        )
    if clock == "virtual" and emulator is not None and not emulator.charges_time:
        raise LabError(
            f"--access-matrix with --clock virtual: QEMU {emulator.short_version} tells plugins the wrong vCPU when "
            "the vCPUs share one thread (every access would count for the vCPU that translated the code); use "
            "numalab's patched QEMU: make setup-qemu-charge, then add --qemu charge"
        )


@dataclass(frozen=True)
class AccessMatrix:
    """The access matrix of a run on ``topology``: every ``sample``-th access of each vCPU counted by node."""

    topology: Topology
    sample: int

    key = KEY
    from_workload = False  # (it counts from the boot on; the record cuts the counts to the workload's window)
    host_time_scale = 1.0

    @classmethod
    def asked(cls, options: AccessOptions, topology: Topology) -> AccessMatrix | None:
        """The access matrix ``options`` ask for (None: --access-matrix not given)."""
        return cls(topology, options.sample()) if options.access_matrix else None

    def check(self, plan: Plan) -> None:
        check_request(self.sample, plan.accel, plan.backend, plan.uri, plan.clock, plan.emulator)

    def plugin_args(self, workdir: Path) -> list[str]:
        return [f"out={workdir / RAW_FILE}", f"sample={self.sample}"]

    def collect(self, record_dir: Path, plugin: AccessPlugin, window: Window) -> InstrumentResult:
        return measure(record_dir, plugin, self.sample, self.topology, window)


def summary_lines(manifest: dict) -> list[str]:
    """The run summary's access-matrix line (none without --access-matrix)."""

    def line(a: dict) -> str:
        sample = (a.get("plugin") or {}).get("sample")
        return (
            f"  access-local={a.get('local_pct')}%  ({a.get('accesses', 0):,} accesses sampled 1/{sample}; "
            "instrumented: throughput not comparable with plain runs)"
        )

    return section_lines(manifest, KEY, "access matrix", line)


def measure(run_dir: Path, plugin: AccessPlugin, sample: int, topo: Topology, window: Window) -> InstrumentResult:
    """Counts -> access-matrix.{txt,json} in the run record and the manifest's section; a failed self-check
    (or a guest clock that did not follow the host's over the workload, ``window.guest_s`` by the guest's clock)
    is a failure. Under ``--clock virtual`` the guest's clock counts instructions and follows no host clock:
    no such check there (every such run failed it)."""
    section: dict = {"plugin": {"sample": sample} | plugin.to_dict()}
    keep_counts(plugin.workdir / RAW_FILE, run_dir / RAW_FILE)
    vcpu_nodes = [n for n, cpus in enumerate(topo.node_cpus()) for _ in cpus]
    problem = None
    status = STATUS
    start_ns, end_ns, guest_s = window.start_ns, window.end_ns, window.guest_s
    try:
        log = read_log(run_dir / RAW_FILE)
    except LabError as err:
        problem = f"access matrix: {err}"
    else:
        section |= summarize(log, vcpu_nodes, start_ns, end_ns)
        problem = self_check(section)
    host_s = (end_ns - start_ns) / 1e9 if start_ns is not None and end_ns is not None else None
    if host_s and guest_s:
        section["guest_clock_ratio"] = round(guest_s / host_s, 3)
        # The host sees the stage marks up to a console poll late: 0.1-0.2 s with direct QEMU, up to about
        # 1.2 s through libvirt (the console is mirrored from the daemon's file; seen: 3.14 s guest against
        # 4.35 s host for a sound clock). A miscalibrated guest clock is off by 4-52x (lab.vm.tcg.tcg_clock), so
        # the slack is generous: 2 s or half the host's time.
        if not problem and not window.virtual and abs(guest_s - host_s) > max(2.0, 0.5 * host_s):
            problem = (
                f"guest clock ran {guest_s / host_s:.2f}x the host's during the workload ({guest_s:g} s guest, "
                f"{host_s:.2f} s host): its TSC calibration went wrong; the window and the workload's figures are wrong"
            )
            status = CLOCK_STATUS
    return record_section(run_dir, KEY, section, problem, status, (RAW_FILE, JSON_FILE))
