"""Run one VM through libvirt (local or remote), with the same VM, watch and classification as direct QEMU.

The domain is the foundation's XML (:func:`lab.vm.libvirt.libvirt_xml.domain_xml`),
started transient with ``createXML(..., VIR_DOMAIN_START_AUTODESTROY)``: it
is destroyed in a ``finally`` on every path (end, failure, timeout, Ctrl-C,
SIGTERM), and libvirt itself destroys it if numalab dies without running
that ``finally`` (SIGKILL), because the connection that started it closes.

Files go through libvirt's storage API only (see :mod:`lab.vm.libvirt.libvirt_storage`),
so a remote host (``qemu+ssh://``) works like the local daemon and the tests
on this machine exercise the very path a remote host takes:

* kernel and initramfs are uploaded into the host's ``numalab`` pool;
* the results share is a directory volume of that pool, owned by the user
  QEMU runs as (``libvirt-qemu`` under ``qemu:///system``, from the host's
  DAC base label), so nothing on this machine has to be made readable or
  writable for another user;
* the serial console file is written on the host by virtlogd into the
  results directory and tailed through stream downloads while the guest
  runs (``lab.vm.console.watch`` follows the local copy for stage marks);
* when the domain is gone, the files the guest init sends (``lab.vm.share.SHARE_FILES``,
  plain files within the size limit, nothing else) are downloaded into the run's
  local share directory, and the host's per-run volumes are deleted. The share is
  ``accessmode='mapped'`` (QEMU's ``mapped-xattr``): a guest's symlinks, device
  nodes and setuid bits are only extended attributes on the host.

vCPU pinning and memory binding come from ``<cputune>``/``<numatune>``;
what libvirt reports back (``vcpuPinInfo``, the live affinities, the NUMA
parameters) goes into the manifest's ``backend`` section. The domain's metadata names the
process that started it, so leftovers can be told from live runs (:mod:`lab.vm.libvirt.libvirt_leftovers`).
"""

from __future__ import annotations

import hashlib
import json
import platform
import signal
import time
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from lab.cpulist import format_cpulist
from lab.errors import LabError
from lab.placement.pinning import Placement, plan_placement
from lab.record_files import CONSOLE_LOG, DOMAIN_LIVE_XML, DOMAIN_XML, QEMU_LOG
from lab.topology.model.topology import Topology
from lab.vm.backend import FIRMWARES, BootSpec, VmRequest
from lab.vm.console import VmOutcome, WatchRules, watch
from lab.vm.hang import BUSY_WINDOW_S, add_busy, busy_shares, parse_registers
from lab.vm.libvirt.libvirt_conn import (
    capabilities,
    close_quietly,
    connect,
    host_inventory,
    is_error,
    is_local_uri,
    libvirt_module,
    qemu_dac_label,
    short_error,
    version_string,
    version_tuple,
)
from lab.vm.libvirt.libvirt_hostspec import HostSpec, check_host
from lab.vm.libvirt.libvirt_leftovers import clean_hint, with_metadata
from lab.vm.libvirt.libvirt_storage import ImageStore, download, ensure_pool
from lab.vm.libvirt.libvirt_xml import check_expressible, domain_xml
from lab.vm.machine_needs import check_qemu_can_express
from lab.vm.share import SHARE_FILES, ShareLimits, fmt_bytes, over_limit
from lab.vm.tcg.access_plugin import relocate, split_argument
from lab.vm.vcpu_time import Sample, StageSampler, libvirt_stats_sample

# virDomainState -> the word QEMU's query-status would use (lab.vm.hang reports either)
DOMAIN_STATES = {1: "running", 2: "blocked", 3: "paused", 4: "shutdown", 5: "shutoff", 6: "crashed", 7: "suspended"}

CONSOLE_POLL_S = 0.3
STATE_POLL_S = 0.3
SHARE_POLL_S = 2.0
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextmanager
def _signals_deferred():
    """Hold SIGTERM/SIGINT/SIGHUP while tearing down, so a second Ctrl-C cannot leave a domain behind."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    except (AttributeError, ValueError, OSError):
        old = None
    try:
        yield
    finally:
        if old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _cpusets(rows) -> dict[int, str]:
    return {i: format_cpulist(c for c, on in enumerate(row) if on) for i, row in enumerate(rows)}


class LibvirtBackend:
    """A libvirt daemon (``uri``) runs the VM; everything else is as for :class:`QemuBackend`."""

    name = "libvirt"
    emulator = None  # the host's QEMU is the daemon's: asked for its version only (emulator_version)

    def __init__(self, uri: str = "qemu:///system", host: HostSpec | None = None) -> None:
        self.host = host or HostSpec(uri)
        self.uri = self.host.uri

    @property
    def host_id(self) -> str:
        """ "" for a daemon on this machine (its VMs share this machine's clock), else the URI."""
        return "" if is_local_uri(self.uri) else self.uri

    def probe_host(self) -> dict:
        """The daemon's host as an accelerator verdict holds for it: the URI (each daemon runs QEMU as
        its own user, with its own access to /dev/kvm), the host's name, its QEMU and libvirt, its CPU
        model, and the host kernel when the host is this machine (libvirt does not tell a remote one's)."""
        conn = connect(self.uri)
        try:
            facts = {
                "uri": self.uri,
                "host": conn.getHostname(),
                "host_kernel": "" if self.host_id else platform.release(),
                "hypervisor": version_string(conn.getVersion()),
                "libvirt": version_string(conn.getLibVersion()),
                "cpu_model": conn.getInfo()[0],
            }
        finally:
            close_quietly(conn)
        key = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]
        return facts | {"key": f"libvirt-{key}", "where": f" on the libvirt host {self.uri} ({facts['host']})"}

    def kvm_missing(self) -> str:
        """Why a KVM domain cannot even be tried on this host ("" when its capabilities offer one)."""
        conn = connect(self.uri)
        try:
            caps = capabilities(conn)
        finally:
            close_quietly(conn)
        types = {d.get("type") for d in caps.findall("./guest/arch[@name='x86_64']/domain")}
        if "kvm" in types:
            return ""
        return f"the libvirt host {self.uri} offers no KVM domains (x86_64 domain types: {', '.join(sorted(types))})"

    def _qemu_version(self) -> int:
        """The host's QEMU version as the daemon reports it (libvirt runs its own emulator): 10000002."""
        conn = connect(self.uri)
        try:
            return conn.getVersion()
        finally:
            close_quietly(conn)

    def emulator_version(self) -> str:
        """The host's QEMU as a ``--version`` line."""
        return f"QEMU emulator version {version_string(self._qemu_version())}"

    def firmware_rom(self, choice: str) -> str:
        """libvirt hosts boot their default firmware ("": --firmware qboot is a one-line error; a ROM path on a
        remote host cannot be checked from here)."""
        if choice not in FIRMWARES:
            raise LabError(f"--firmware {choice}: expected one of {', '.join(FIRMWARES)}")
        if choice == "qboot":
            raise LabError("--firmware qboot: only with --backend qemu (libvirt hosts boot their default firmware)")
        return ""

    def check_machine(self, topo: Topology) -> None:
        """What libvirt 9.0 cannot say or start (lab.vm.libvirt.libvirt_xml.check_expressible), and what the
        host's QEMU cannot express."""
        check_expressible(topo)
        check_qemu_can_express(topo, version_tuple(self._qemu_version()), f"{self.host}'s QEMU")

    def check(self) -> dict:
        """Fail early, with a one-line error, when the host cannot be reached (before building images)."""
        return check_host(self.host)

    def run(self, req: VmRequest) -> tuple[VmOutcome, dict]:
        """Run the domain for ``req`` on this backend's host (lab.vm.backend.Backend.run)."""
        conn = connect(self.uri)
        try:
            return _Run(conn, self.host, req.boot, req.run_dir, req.limits).go(
                req.topo, req.placement, req.timeout_s, req.on_stage, req.on_tick, req.boot_deadline_s
            )
        finally:
            close_quietly(conn)


class _Run:
    def __init__(self, conn, host: HostSpec, boot: BootSpec, run_dir: Path, limits: ShareLimits) -> None:
        self.libvirt = libvirt_module()
        self.limits = limits
        self.host_files: dict[str, Path] = {}  # files QEMU itself writes into the results directory -> local path
        self.last_share_check = 0.0
        self.conn = conn
        self.host = host
        self.boot = boot
        self.run_dir = run_dir
        self.name = boot.name
        self.dom = None
        self.store: ImageStore | None = None
        self.results_pool = None
        self.console_vol = None
        self.console_pos = 0
        self.console_local = Path(boot.console_log)
        self.last_console = 0.0
        self.last_refresh = 0.0
        self.last_state = 0.0
        self.guest_panicked = False  # the domain crashed: pvpanic
        self.gone_code: int | None = None
        self.info: dict = {
            "name": "libvirt",
            "uri": conn.getURI(),
            "hostname": conn.getHostname(),
            "local": is_local_uri(host.uri),
            "libvirt_version": version_string(conn.getLibVersion()),
            "hypervisor_version": version_string(conn.getVersion()),
            "domain": self.name,
            "problems": [],
        }

    # --- the run ------------------------------------------------------------------------------------

    def go(self, topo, placement, timeout_s, on_stage, on_tick, boot_deadline_s=None) -> tuple[VmOutcome, dict]:
        libvirt = self.libvirt
        domain_type = "kvm" if self.boot.accel == "kvm" else "qemu"
        self.info["domain_type"] = domain_type
        self._refuse_clash()
        if not self.info["local"]:
            # Pin and bind on the host that runs the VM, not on this one.
            placement = plan_placement(
                topo, host_inventory(self.conn), placement.backing, pinning=placement.pinning_policy
            )
            self.info["placement"] = placement.to_dict()
        outcome = VmOutcome(None, False, 0.0)
        finished = False
        start = time.monotonic()
        try:
            self._stage_files(domain_type)
            xml = with_metadata(domain_xml(topo, placement, self.rboot, domain_type), self.run_dir)
            (self.run_dir / DOMAIN_XML).write_text(xml)
            try:
                self.dom = self.conn.createXML(xml, libvirt.VIR_DOMAIN_START_AUTODESTROY)
            except libvirt.libvirtError as err:
                msg = short_error(err)
                if "already exists" in msg or "already defined" in msg:
                    raise LabError(self._clash_message()) from None
                raise LabError(f"{self.host.uri}: libvirt could not start domain {self.name}: {msg}") from None
            start = time.monotonic()
            self._read_pinning(outcome, placement)
            sampler = StageSampler("libvirt", self._vcpu_sample, on_stage)

            def tick(now: float) -> None:
                sampler.refresh()  # (the domain may be gone when the end mark is read)
                if on_tick is not None:
                    on_tick(now)

            try:
                rules = WatchRules(timeout_s, self._guard, boot_deadline_s)
                watch(self.console_local, outcome, rules, self._exited, sampler, tick, token=self.boot.stage_token)
            finally:
                outcome.vcpu_time = sampler.result()
            if outcome.timed_out:
                outcome.hang_state = self._hang_state()
            outcome.guest_panicked = self.guest_panicked
            finished = True
        except libvirt.libvirtError as err:
            raise LabError(f"{self.host.uri}: {short_error(err)} (domain {self.name})") from None
        finally:
            with _signals_deferred():
                outcome.wall_s = time.monotonic() - start
                self._teardown(fetch=finished, timed_out=outcome.timed_out)
        self.info["exit_code"] = outcome.exit_code
        return outcome, self.info

    def _clash_message(self) -> str:
        return (
            f"{self.host.uri}: a libvirt domain named {self.name} already exists (a leftover of an earlier run? "
            f"{clean_hint(self.host.uri)} removes numalab-* leftovers)"
        )

    def _refuse_clash(self) -> None:
        try:
            self.conn.lookupByName(self.name)
        except self.libvirt.libvirtError as err:
            if is_error(err, self.libvirt.VIR_ERR_NO_DOMAIN):
                return
            raise LabError(f"{self.host.uri}: {short_error(err)}") from None
        raise LabError(self._clash_message())

    def _stage_files(self, domain_type: str) -> None:
        """Upload kernel and initrd, make the results directory and the pool that brings it back."""
        self.store = ImageStore(self.conn, self.host).open()
        t0 = time.monotonic()
        kernel = self.store.put_kernel(Path(self.boot.kernel))
        initrd = self.store.put_file(Path(self.boot.initrd), f"{self.name}.initrd")
        owner = qemu_dac_label(self.conn, domain_type)
        results = self.store.make_dir(f"{self.name}.results", owner)
        self.results_pool = ensure_pool(self.conn, f"{self.name}-results", results, build=False)
        self.rboot = replace(
            self.boot, kernel=kernel, initrd=initrd, results_dir=results, console_log=f"{results}/{CONSOLE_LOG}"
        )
        if self.boot.plugin:  # --access-matrix: the plugin into the pool, its counts into the results
            self.rboot = replace(self.rboot, plugin=self._stage_plugin(results))
        self.info["images"] = {
            "pool": self.host.pool_name,
            "pool_dir": self.store.path,
            "kernel": kernel,
            "initrd": initrd,
            "uploaded_bytes": self.store.stats["uploaded_bytes"],
            "upload_s": round(time.monotonic() - t0, 2),
        }
        self.info["results"] = {"dir": results, "owner": f"{owner[0]}:{owner[1]}" if owner else None}

    def _stage_plugin(self, results: str) -> str:
        so = next(p[5:] for p in split_argument(self.boot.plugin) if p.startswith("file="))
        out = next(p[4:] for p in split_argument(self.boot.plugin) if p.startswith("out="))
        remote_so = self.store.put_file(Path(so), f"{self.name}.plugin.so")
        self.host_files[Path(out).name] = Path(out)  # QEMU's (the plugin's) file, fetched to where it was asked for
        return relocate(self.boot.plugin, remote_so, f"{results}/{Path(out).name}")

    def _read_pinning(self, outcome: VmOutcome, placement: Placement) -> None:
        """What libvirt says about pinning and binding, once the domain runs."""
        libvirt = self.libvirt
        try:
            pins = _cpusets(self.dom.vcpuPinInfo(0))
            self.info["vcpu_pin_info"] = pins
        except libvirt.libvirtError as err:
            pins = {}
            self.info["problems"].append(f"vcpuPinInfo: {short_error(err)}")
        try:
            vcpus, maps = self.dom.vcpus()
            self.info["vcpu_affinity"] = _cpusets(maps)
            self.info["vcpu_host_cpu"] = {v[0]: v[3] for v in vcpus}
        except libvirt.libvirtError as err:
            self.info["problems"].append(f"vcpus: {short_error(err)}")
        try:
            self.info["numa_parameters"] = self.dom.numaParameters(0)
        except libvirt.libvirtError as err:
            self.info["problems"].append(f"numaParameters: {short_error(err)}")
        live = ET.fromstring(self.dom.XMLDesc(0))
        (self.run_dir / DOMAIN_LIVE_XML).write_text(self.dom.XMLDesc(0))
        self.info["memnodes"] = {m.get("cellid"): m.get("nodeset") for m in live.iter("memnode")}
        self.info["seclabels"] = [
            {"model": s.get("model"), "label": s.findtext("label")} for s in live.findall("seclabel")
        ]
        affinity = self.info.get("vcpu_affinity", pins)
        for vcpu in range(len(placement.vcpu_pins)):
            want, got = placement.cpuset(vcpu), affinity.get(vcpu)
            if got == want:
                outcome.pinned[vcpu] = want
            elif outcome.pin_error is None:
                outcome.pin_error = f"vCPU {vcpu} -> CPUs {want}: libvirt reports affinity {got or 'unknown'}"

    def _vcpu_sample(self) -> Sample:
        """The domain's vCPU times now (lab.vm.vcpu_time): libvirt's per-vCPU statistics."""
        try:
            ((_dom, stats),) = self.conn.domainListGetStats([self.dom], self.libvirt.VIR_DOMAIN_STATS_VCPU)
        except self.libvirt.libvirtError as err:
            raise LabError(f"vCPU statistics: {short_error(err)}") from None
        return libvirt_stats_sample(stats)

    # --- watching -----------------------------------------------------------------------------------

    def _exited(self) -> int | None:
        """watch()'s ``exited``: mirror the console, then None while the domain runs, else its exit code."""
        now = time.monotonic()
        if now - self.last_console >= CONSOLE_POLL_S:
            self.last_console = now
            self._sync_console()
        if now - self.last_state < STATE_POLL_S:
            return None
        self.last_state = now
        code = self._gone()
        if code is not None:
            self._sync_console()
        return code

    def _guard(self) -> str | None:
        """watch()'s ``guard``: the console mirrored so far, and (every few seconds, it lists the
        host's results pool) what the guest wrote to its share, against the limits."""
        now = time.monotonic()
        if now - self.last_share_check < SHARE_POLL_S:
            return over_limit(self.limits, 0, 0, self.console_pos)
        self.last_share_check = now
        try:
            self.results_pool.refresh(0)
            vols = self.results_pool.listAllVolumes(0)
            total = sum(v.info()[1] for v in vols if v.name() != CONSOLE_LOG)
        except self.libvirt.libvirtError:
            return None  # a refresh raced with the guest's writes: next time
        return over_limit(self.limits, total, len(vols), self.console_pos)

    def _gone(self) -> int | None:
        libvirt = self.libvirt
        try:
            state, reason = self.dom.state(0)
        except libvirt.libvirtError as err:
            if is_error(err, libvirt.VIR_ERR_NO_DOMAIN):
                self.gone_code = 0 if self.gone_code is None else self.gone_code
                self.info.setdefault("exit", "powered off (the transient domain is gone)")
                return self.gone_code
            raise
        if state == libvirt.VIR_DOMAIN_SHUTOFF:
            ok = reason == libvirt.VIR_DOMAIN_SHUTOFF_SHUTDOWN
            self.guest_panicked |= reason == libvirt.VIR_DOMAIN_SHUTOFF_CRASHED
            self.gone_code = 0 if ok else 1
            self.info["exit"] = f"shut off (reason {reason})"
            return self.gone_code
        if state == libvirt.VIR_DOMAIN_CRASHED:
            # The guest kernel's panic through the pvpanic device (<panic model='isa'/>): its own word,
            # which no console line from guest userspace can fake.
            self.gone_code = 1
            self.guest_panicked = True
            self.info["exit"] = f"crashed (reason {reason})"
            return 1
        return None

    def _sync_console(self) -> None:
        """Append what the host's console file gained since the last call to the local console.log."""
        libvirt = self.libvirt
        try:
            if self.console_vol is None:
                now = time.monotonic()
                if now - self.last_refresh < 1.0 and self.last_refresh:
                    return
                self.last_refresh = now
                self.results_pool.refresh(0)
                self.console_vol = self.results_pool.storageVolLookupByName(CONSOLE_LOG)
            size = self.console_vol.info()[1]
            if size > self.console_pos:
                self.console_pos += download(
                    self.conn, self.console_vol, self.console_local, self.console_pos, append=True
                )
        except libvirt.libvirtError:
            return  # not there yet, or a refresh raced with virtlogd: next time

    # --- teardown -----------------------------------------------------------------------------------

    def _hang_state(self) -> dict | None:
        """Where the domain was at the timeout (lab.vm.hang): libvirt's state for it and, through QEMU's
        human monitor, every vCPU's registers. Best effort: None if the domain or the daemon will not say."""
        try:
            import libvirt_qemu  # (optional: the libvirt extra)
        except ImportError:
            return None
        try:
            state, _reason = self.dom.state()
            before, t0 = self._vcpu_cpu_ns(), time.monotonic()
            regs = libvirt_qemu.qemuMonitorCommand(
                self.dom, "info registers -a", libvirt_qemu.VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP
            )
            out = {"status": DOMAIN_STATES.get(state, f"state {state}"), "vcpus": parse_registers(regs)}
            if before:
                time.sleep(max(0.0, BUSY_WINDOW_S - (time.monotonic() - t0)))
                add_busy(out, busy_shares(before, self._vcpu_cpu_ns(), time.monotonic() - t0))
        except self.libvirt.libvirtError:
            return None
        return out

    def _vcpu_cpu_ns(self) -> dict[int, int]:
        """vCPU index -> the CPU time libvirt counts for it (virDomainGetVcpus), {} if it will not say."""
        try:
            info, _maps = self.dom.vcpus()
        except self.libvirt.libvirtError:
            return {}
        return {int(v[0]): int(v[2]) for v in info}

    def _teardown(self, fetch: bool, timed_out: bool) -> None:
        libvirt = self.libvirt
        problems = self.info["problems"]
        if self.dom is not None:
            try:
                if self.dom.isActive():
                    self.dom.destroy()
                    if self.guest_panicked:  # (kept by on_crash preserve until now)
                        self.info["exit"] = f"{self.info.get('exit', 'crashed')}, then destroyed"
                    else:
                        self.info["exit"] = "destroyed (timeout)" if timed_out else "destroyed"
            except libvirt.libvirtError as err:
                if not is_error(err, libvirt.VIR_ERR_NO_DOMAIN):
                    problems.append(f"destroy: {short_error(err)}")
        self._qemu_log_tail()
        if self.results_pool is not None:
            if fetch:
                self._fetch_results()
            try:
                self.results_pool.refresh(0)
                for vol in self.results_pool.listAllVolumes(0):
                    vol.delete(0)
                self.results_pool.destroy()
            except libvirt.libvirtError as err:
                problems.append(f"results pool: {short_error(err)}")
        if self.store is not None:
            for suffix in (".results", ".initrd", *((".plugin.so",) if self.boot.plugin else ())):
                try:
                    self.store.remove(self.name + suffix)
                except libvirt.libvirtError as err:
                    problems.append(f"removing {self.name}{suffix}: {short_error(err)}")

    def _fetch_results(self) -> None:
        if not self.boot.results_dir:  # a guest that sends nothing back (the KVM probe)
            return
        libvirt = self.libvirt
        t0 = time.monotonic()
        files, total = 0, 0
        try:
            self.results_pool.refresh(0)
            local = Path(self.boot.results_dir)
            for vol in self.results_pool.listAllVolumes(0):
                kind, size = vol.info()[:2]
                name = vol.name()
                if name == CONSOLE_LOG:
                    continue  # mirrored while the guest ran
                dest = self.host_files.get(name, local / name)
                if (name not in SHARE_FILES and name not in self.host_files) or kind != libvirt.VIR_STORAGE_VOL_FILE:
                    self.info["problems"].append(f"results: skipped {name!r} (not a file the guest init sends)")
                    continue
                if total + size > self.limits.output_bytes:
                    self.info["problems"].append(
                        f"results: skipped {name} ({fmt_bytes(size)}: over the {fmt_bytes(self.limits.output_bytes)}"
                        " limit)"
                    )
                    continue
                total += download(self.conn, vol, dest, max_bytes=self.limits.output_bytes - total)
                files += 1
        except libvirt.libvirtError as err:
            self.info["problems"].append(f"downloading results: {short_error(err)}")
        self.info["results"].update(
            {"files": files, "downloaded_bytes": total, "download_s": round(time.monotonic() - t0, 2)}
        )

    def _qemu_log_tail(self) -> None:
        """libvirt's per-domain QEMU log, when the daemon is on this machine and we can read it."""
        if not self.info["local"]:
            return
        log = Path("/var/log/libvirt/qemu") / f"{self.name}.log"
        try:
            text = log.read_text(errors="replace")
        except OSError:
            return
        (self.run_dir / QEMU_LOG).write_text(text)
        self.info["qemu_log"] = QEMU_LOG
