"""lab.run.manifest builds the whole manifest in one place: given the parts of a real run (the checked-in
ring2-idle record, made before the builder existed), it gives that run's manifest back, key for key and
in the same order; and the access matrix's part fails only an otherwise good run."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from common import REPO

from lab.analysis.record import RunRecord
from lab.analysis.results import Unpacked
from lab.guest.settings import GuestSettings
from lab.kernel.bootable import Kernel
from lab.record_files import CONSOLE_LOG, MANIFEST
from lab.run.instrument import InstrumentResult
from lab.run.manifest import (
    GuestImage,
    GuestSaid,
    GuestView,
    Instruments,
    ManifestInputs,
    RecordFiles,
    RunAsked,
    RunEnd,
    RunMachine,
    add_instrument,
    build,
)
from lab.vm.console import Stage, VmOutcome

RECORD = REPO / "tests" / "data" / "runs" / "ring2-idle"


def _inputs(tmp_path: Path, m: dict) -> ManifestInputs:
    """The parts lab.run.collect gathers, taken from a real record (the kernel image is a stand-in file)."""
    image = tmp_path / "vmlinuz"
    image.write_bytes(b"not a kernel")
    k = m["kernel"]
    kernel = Kernel(k["name"], image, Path("/modules") if k["modular"] else None,
                    Path(k["config"]) if k["config"] else None, k["release"])  # fmt: skip
    fields = {key: v for key, v in m["settings"].items() if key != "readback"}
    settings = GuestSettings(**fields | {"trace_events": tuple(fields["trace_events"])})
    stages = [Stage(s["name"], s["detail"], s["host_s"], s["uptime"]) for s in m["stages"]]
    placement = {key: v for key, v in m["placement"].items() if key not in ("pinned", "pin_error")}
    outcome = VmOutcome(m["backend"]["exit_code"], False, m["timings"]["vm_s"], stages,
                        m["placement"]["pinned"], m["placement"]["pin_error"], vcpu_time=m["vcpu_time"])  # fmt: skip
    share = {key: v for key, v in m["guest_share"].items() if key not in ("limits", "unpacked_bytes")}
    guest_image = GuestImage(tuple(m["guest_image"]["tools"]), tuple(m["guest_image"]["programs"]),
                             m["guest_image"]["initrd_bytes"])  # fmt: skip
    return ManifestInputs(
        asked=RunAsked(m["run_id"], m["label"], RunRecord.load(RECORD).topology, kernel, m["workload"]["name"],
                       settings),
        machine=RunMachine(m["accelerator"]["name"], m["accelerator"]["reason"], m["accelerator"]["clock"], placement,
                           m["backend"], k["boot_protocol"], m["firmware"]["rom"] or "", m["firmware"]["choice"],
                           guest_image),
        end=RunEnd(outcome, m["status"], m["reason"], m["timings"]["total_s"], m["timings"]["timeout_s"]),
        guest=GuestSaid(k["guest_release"], k["build_id"], m["settings"]["readback"], GuestView(**m["guest_topology"]),
                        m["workload"]["result"], m["workload"]["exit_code"]),
        record=RecordFiles(m["files"], share, m["guest_share"]["limits"],
                           Unpacked(bytes=m["guest_share"]["unpacked_bytes"]), (RECORD / CONSOLE_LOG).read_text()),
        instruments=Instruments(m["metrics"]),
    )  # fmt: skip


def test_the_builder_gives_a_real_runs_manifest_back(tmp_path) -> None:
    recorded = json.loads((RECORD / MANIFEST).read_text())
    built = json.loads(json.dumps(build(_inputs(tmp_path, recorded))))  # as written: int keys become strings
    for key in ("image", "sha256"):  # the stand-in kernel file's
        built["kernel"][key] = recorded["kernel"][key]
    # Added after this record was made: what the guest had to show, and whether it did (the stand-in file
    # has no build-id, so the run is unverified).
    assert built["kernel"].pop("expected_build_id") is None and built["kernel"].pop("expected_build_id_from") is None
    assert built["kernel"].pop("identity") == "unverified"
    # What the accelerator changes besides speed, and whether the placement held (no window watched here).
    acc = built["accelerator"]
    assert (acc.pop("cpu"), acc.pop("guest_clocksource")) == ("qemu64 (QEMU's default)", None)
    assert acc.pop("tcg_timing_args") == ["tsc=reliable", "no_timer_check", "tsc_early_khz=2600002", "lpj=10400008"]
    assert built["placement"].pop("check") is None
    assert built["settings"].pop("node_maps") is False  # (--node-maps: the workload's numa_maps sampled)
    assert built.pop("scheduler")["kind"] == "fair"  # (--scheduler: which scheduler ran, and the guest's word)
    assert built["guest_topology"].pop("sched_cache") == {}  # (7.x's cache-aware scheduling: not in these inputs)
    built["created"] = recorded["created"]
    assert json.dumps(built, indent=1) == json.dumps(recorded, indent=1)  # every key, every value, in order


def test_a_failed_run_gets_its_console_tail_and_no_access_failure(tmp_path) -> None:
    recorded = json.loads((RECORD / MANIFEST).read_text())
    inputs = _inputs(tmp_path, recorded)
    access = InstrumentResult("access_matrix", {"problem": "access matrix: 27% outside"}, ("access-matrix.json",),
                              ("access-map-mismatch", "access matrix: 27% outside"))  # fmt: skip
    ok = build(replace(inputs, instruments=replace(inputs.instruments, plugin=(access,))))
    assert (ok["status"], ok["reason"]) == access.failure and "access-matrix.json" in ok["files"]
    assert "console_tail" not in ok and list(ok)[-3:] == ["access_matrix", "firmware", "guest_image"]
    timed_out = build(replace(inputs, end=replace(inputs.end, status="timeout", reason="no end"),
                              instruments=replace(inputs.instruments, plugin=(access,))))  # fmt: skip
    assert timed_out["status"] == "timeout" and "console_tail" in timed_out
    manifest = {"status": "ok", "files": ["b", "a"]}
    add_instrument(manifest, InstrumentResult("access_matrix", {"problem": None}, ("access-matrix.txt",), None))
    assert manifest == {"status": "ok", "files": ["a", "access-matrix.txt", "b"], "access_matrix": {"problem": None}}


def test_the_records_accessors_read_what_the_builder_wrote(tmp_path) -> None:
    """RunRecord's typed accessors against the manifest the builder made (and a real record's files)."""
    recorded = json.loads((RECORD / MANIFEST).read_text())
    inputs = _inputs(tmp_path, recorded)
    run = tmp_path / "run"
    run.mkdir()
    (run / MANIFEST).write_text(json.dumps(build(replace(inputs, asked=replace(inputs.asked, label="A repeat 1/3")))))
    r = RunRecord.load(run)
    assert (r.run_id, r.status, r.reason, r.label) == (inputs.asked.run_id, "ok", inputs.end.reason, "A repeat 1/3")
    assert (r.kernel_name, r.workload_name, r.accelerator) == ("stock", "idle", "tcg")
    assert r.workload_duration_s == 1 and r.workload_result == recorded["workload"]["result"]
    assert r.numa_balancing == "1" and r.knobs == recorded["settings"]["knobs"]
    assert r.trace_events == inputs.asked.settings.trace_events and r.topology.name == "ring-2"
    assert r.timings["boot_s"] == recorded["timings"]["boot_s"] and r.metrics == recorded["metrics"]
    start = next(s["uptime"] for s in recorded["stages"] if s["name"] == "workload-start")
    assert r.workload_start_uptime == r.stage_uptime("workload-start") == start and r.stage_uptime("nope") is None
    assert not r.marked_incomplete and r.access_matrix is None
    # a record without the keys added later (an early manifest): the defaults, not a KeyError
    old = {k: v for k, v in json.loads((run / MANIFEST).read_text()).items() if k != "label"}
    old["workload"] = {"name": "idle"}
    old["settings"] = {}
    (run / MANIFEST).write_text(json.dumps(old))
    r = RunRecord.load(run)
    assert (r.label, r.workload_result, r.knobs, r.trace_events, r.numa_balancing) == ("", {}, {}, (), None)
