"""qemu --version is asked once per binary and remembered in the cache directory."""

from __future__ import annotations

import os

from lab.vm import qemu_backend


def test_version_is_remembered_per_binary_until_it_changes(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    fake = bindir / "qemu-system-x86_64"
    fake.write_text(f'#!/bin/sh\necho x >> {calls}\necho "QEMU emulator version 7.2.0"\necho "Copyright"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")

    def ask() -> str:
        qemu_backend._qemu_version.cache_clear()  # a new numalab process
        return qemu_backend.qemu_version()

    assert ask() == "QEMU emulator version 7.2.0"
    assert ask() == "QEMU emulator version 7.2.0"
    assert calls.read_text().count("x") == 1  # the second process read the cache
    fake.write_text(fake.read_text().replace("7.2.0", "8.0.0"))  # upgraded: new size and mtime
    assert ask() == "QEMU emulator version 8.0.0"
    assert calls.read_text().count("x") == 2
    assert qemu_backend.qemu_version("no-such-qemu") == ""
