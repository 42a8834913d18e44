"""What every command of the front end shares: the parser class (usage errors on one line) and the one path
for progress and diagnostics: Python logging, one handler writing ``numalab: ...`` lines to stderr."""

from __future__ import annotations

import argparse
import logging
import sys

from lab.paths import json_text
from lab.untrusted import escape_surrogates

LOGGER = "numalab"
log = logging.getLogger(LOGGER)


class _Stderr(logging.StreamHandler):
    """A handler on whatever sys.stderr is when a line is written (a test's capture, or the terminal)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


class _Format(logging.Formatter):
    """``numalab: msg`` for progress, ``numalab: warning: msg``, ``numalab: error: msg``; -v's debug lines too."""

    def format(self, record: logging.LogRecord) -> str:
        level = {logging.WARNING: "warning: ", logging.ERROR: "error: ", logging.DEBUG: "debug: "}
        word = "" if getattr(record, "bare", False) else level.get(record.levelno, "")
        # (a file name's bytes that are not UTF-8, as \xNN: printed raw, a surrogate escape is a UnicodeEncodeError)
        return f"numalab: {word}{escape_surrogates(record.getMessage())}"


def setup_logging(verbosity: int = 0) -> logging.Logger:
    """The one handler on the ``numalab`` logger (installed once); verbosity -1 (-q: warnings and errors only),
    0 (progress too, the default) or 1 (-v: debug lines too)."""
    if not any(isinstance(h, _Stderr) for h in log.handlers):
        handler = _Stderr()
        handler.setFormatter(_Format())
        log.addHandler(handler)
        log.propagate = False
    log.setLevel({-1: logging.WARNING, 0: logging.INFO}.get(max(-1, min(1, verbosity)), logging.DEBUG))
    return log


def progress(msg: str) -> None:
    """A progress line (silenced by -q): the sink of every progress callback the CLI hands the library. A line
    the library starts with ``warning: `` is a warning, which -q keeps."""
    if not log.handlers:
        setup_logging()
    if msg.startswith("warning: "):
        log.warning(msg.removeprefix("warning: "))
    else:
        log.info(msg)


def debug(msg: str) -> None:
    """A line only -v shows: what numalab made of the options, and why."""
    if not log.handlers:
        setup_logging()
    log.debug(msg)


def options_line(opts) -> str:
    """A RunOptions on one line, only the fields that differ from the library's defaults (for debug lines)."""
    default = type(opts)().to_dict()
    return json_text({k: v for k, v in opts.to_dict().items() if v != default.get(k)}, sort_keys=True)


def warn(msg: str, *, bare: bool = False) -> None:
    """A warning line (``bare``: without the word warning); -q keeps it."""
    if not log.handlers:
        setup_logging()
    log.warning(msg, extra={"bare": bare})


def error(msg: str, *, bare: bool = False) -> None:
    """An error line (``bare``: without the word error, e.g. numalab: interrupted); never silenced."""
    if not log.handlers:
        setup_logging()
    log.error(msg, extra={"bare": bare})


class Parser(argparse.ArgumentParser):
    """argparse, with its usage errors on one line like every other error (exit 2)."""

    def error(self, message: str):  # type: ignore[override]
        error(f"{' '.join(message.split())} (see {self.prog} --help)")
        raise SystemExit(2)
