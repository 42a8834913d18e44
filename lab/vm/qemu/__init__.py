"""Direct QEMU: its command line (qemu_argv), the backend that runs it (qemu_backend), QMP, which QEMU
(emulator) and firmware, and virtme-ng's options for the same VM (vng_args)."""
