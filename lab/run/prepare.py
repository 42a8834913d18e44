"""Stage 1 of a run (lab.run.execute): the guest's image (initrd layers), the kernel command line, the firmware and
the TCG plugin, handed to the boot stage as one :class:`Prepared`."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from lab.guest import image
from lab.guest.settings import GuestSettings
from lab.kernel.pvh import boot_image
from lab.record_files import CONSOLE_LOG
from lab.run import instrument_set
from lab.run.manifest import GuestImage
from lab.run.request import Trip
from lab.topology.model.tiers import kernel_args as tier_kernel_args
from lab.topology.model.topology import Topology
from lab.vm.backend import BootSpec
from lab.vm.share import make_share
from lab.vm.tcg import tcg_boot
from lab.vm.tcg.access_plugin import AccessPlugin
from lab.workloads import image_layers
from lab.workloads.workload_type import Workload


def kernel_cmdline(settings: GuestSettings, topo: Topology, tcg_args: str = "") -> str:
    """The guest kernel's whole command line: the settings', the memory tiers' (lab.topology.model.tiers), then the
    TCG arguments (lab.vm.tcg.tcg_boot; they depend on the host, so the golden files leave them out)."""
    return " ".join([settings.cmdline(), *tier_kernel_args(topo), *([tcg_args] if tcg_args else [])])


@dataclass(frozen=True)
class Prepared:
    """What the prepare stage hands the boot stage: the guest's image and how QEMU boots it. ``image`` is the
    manifest's ``guest_image`` as it is (before, four loose fields here were turned into it at the end)."""

    boot: BootSpec
    share: Path
    image: GuestImage  # what the initramfs carries (the manifest's guest_image)
    protocol: str
    firmware: str
    tsc_host: str
    plugin: AccessPlugin | None  # the TCG plugin, built for the run's instruments (lab.run.instrument); None: none


def prepare(trip: Trip) -> Prepared:
    """The guest image, the kernel command line, the firmware and the plugin."""
    req, tmp = trip.req, trip.scratch
    trip.say("building guest image")
    boot_kernel, protocol = boot_image(req.kernel.image)
    tsc_host = req.backend.host_id  # a remote libvirt host has its own TSC frequency
    tcg_args = tcg_boot.boot_args(req.kernel.image, req.accel, tsc_host, req.clock.virtual, req.kernel.config)
    cmdline = kernel_cmdline(req.settings, req.topology, " ".join(filter(None, (tcg_args, req.clock.kernel_args()))))
    firmware = req.backend.firmware_rom(req.firmware)
    tools = image_layers.tools_for(req.workload, req.settings.trace_mode, bool(req.settings.trace_events))
    programs = image_layers.programs_for(req.workload)
    layers = [
        image.base_image(),
        image.workload_image(programs),
        user_layer := image_layers.user_layer(req.workload.user),
        *map(image_layers.tool_layer, tools),
        image.modules_image(req.kernel.modules_dir, image.tier_modules(req.topology)),
        req.scheduler.layer(),  # --scheduler: a sched_ext scheduler and its libraries (lab.run.scheduler)
    ]
    token = secrets.token_hex(16)  # this boot's stage-mark token (lab.vm.console; docs/security.md)
    initrd = image.assemble_initrd(tmp / "initrd.cpio", layers, req.settings.to_shell(), token)
    plugin = None
    if req.instruments:
        qemu = req.backend.emulator_version()
        plugin = instrument_set.build_plugin(req.instruments, req.topology, tmp, qemu, req.access_map)
    share = make_share(tmp)
    boot = BootSpec(
        kernel=str(boot_kernel),
        initrd=str(initrd),
        cmdline=cmdline,
        results_dir=str(share),
        console_log=str((trip.record / CONSOLE_LOG).resolve()),
        qmp_socket=str(tmp / "qmp.sock"),
        accel=req.accel,
        name=f"numalab-{trip.run_id}",
        firmware=firmware,
        plugin=plugin.argument if plugin else "",
        clock=req.clock,
        stage_token=token,
    )
    guest_image = GuestImage(
        tuple(tools), tuple(programs), initrd.stat().st_size, _user_image_facts(req.workload, user_layer)
    )
    return Prepared(boot, share, guest_image, protocol, firmware, tsc_host, plugin)


def _user_image_facts(workload: Workload, layer: Path | None) -> dict | None:
    """What a user's workload carried into the guest (the manifest's ``guest_image.user``)."""
    if workload.user is None or layer is None:
        return None
    spec = workload.user
    return {"files": [f"/workload/{g}" for _, g in spec.files], "tools": list(spec.tools),
            "packages": list(spec.packages), "layer_bytes": layer.stat().st_size}  # fmt: skip
