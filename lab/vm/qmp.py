"""A small, synchronous QMP client (QEMU's JSON monitor) over a UNIX socket."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from lab.errors import LabError


class QemuGone(Exception):
    """QEMU exited before its monitor could be reached."""


class Qmp:
    def __init__(self, path: str | Path, timeout: float = 10.0, alive: Callable[[], bool] | None = None) -> None:
        """Connect; ``alive`` (if given) is asked while waiting, so a QEMU that exits at once (a bad option,
        too many vCPUs) is reported at once as :class:`QemuGone` instead of after the timeout."""
        deadline = time.monotonic() + timeout
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._connect(path, deadline, timeout, alive)
        except BaseException:  # (QEMU gone or never listening: the socket is ours to close)
            self.sock.close()
            raise

    def _connect(self, path: str | Path, deadline: float, timeout: float, alive: Callable[[], bool] | None) -> None:
        while True:
            try:
                self.sock.connect(str(path))
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if alive is not None and not alive():
                    raise QemuGone() from None
                if time.monotonic() > deadline:
                    raise LabError(f"QMP socket {path}: QEMU did not open it within {timeout:.0f}s") from None
                time.sleep(0.01)
        self.sock.settimeout(timeout)
        self.buf = b""
        self._read()  # greeting
        self.command("qmp_capabilities")

    def _read(self) -> dict:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise LabError("QMP: QEMU closed the monitor")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def command(self, name: str, **arguments) -> object:
        msg = {"execute": name}
        if arguments:
            msg["arguments"] = arguments
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            reply = self._read()
            if "event" in reply:
                continue
            if "error" in reply:
                raise LabError(f"QMP {name}: {reply['error'].get('desc', reply['error'])}")
            return reply.get("return")

    def listen(self, on_event: Callable[[dict], None]) -> threading.Thread:
        """Hand every event QEMU sends from now on to ``on_event``, from a thread, until the monitor closes
        (QEMU exits, or :meth:`close`). No command may be sent on this connection after this."""

        def run() -> None:
            self.sock.settimeout(None)
            try:
                while True:
                    msg = self._read()
                    if isinstance(msg, dict) and "event" in msg:
                        on_event(msg)
            except (LabError, OSError, ValueError):
                return  # closed

        thread = threading.Thread(target=run, name="qmp-events", daemon=True)
        thread.start()
        return thread

    def vcpu_threads(self) -> dict[int, int]:
        """vCPU index -> host thread id."""
        return {c["cpu-index"]: c["thread-id"] for c in self.command("query-cpus-fast")}

    def close(self) -> None:
        """Hang up. A :meth:`listen` thread blocked reading the socket would keep the connection open after a
        plain close (QEMU's monitor takes one client at a time: the next one would wait): shut it down first."""
        for end in (lambda: self.sock.shutdown(socket.SHUT_RDWR), self.sock.close):
            try:
                end()
            except OSError:
                pass
