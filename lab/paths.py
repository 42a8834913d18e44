"""Where numalab keeps its caches and runs."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lab.datafile import MAX_SPEC_BYTES, read_bytes, text_of
from lab.errors import LabError
from lab.untrusted import escape_surrogates, term_safe

REPO_ROOT = Path(__file__).resolve().parents[1]

# ``subprocess.run(..., **TOOL_TEXT)``: the output of a host tool (git, patch, tar, ldd, dpkg-query) as text that
# always decodes. A file name in it may be any bytes, which ``text=True``'s strict UTF-8 turns into a traceback;
# here such a byte becomes a surrogate escape, so the str is still the name to open (``os.fsencode`` gives the
# bytes back), and lab.untrusted.escape_surrogates shows it as ``\xNN`` in a message.
TOOL_TEXT: dict = {"encoding": "utf-8", "errors": "surrogateescape"}


def system_tool(name: str) -> str | None:
    """A system tool's path, looked up in /usr/sbin and /sbin after the PATH: on Debian an ordinary user's
    PATH has neither (depmod, libvirtd and virtlogd live there), and numalab runs as an ordinary user."""
    return shutil.which(name, path=os.environ.get("PATH", os.defpath) + ":/usr/sbin:/sbin")


def resolved(path: Path, label: str) -> Path:
    """``path.resolve()``, or a one-line error ``<label>: a loop of symbolic links`` (Python 3.11 raises
    RuntimeError for a loop, later ones OSError)."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as err:
        why = "a loop of symbolic links" if isinstance(err, RuntimeError) or err.errno == errno.ELOOP else err.strerror
        raise LabError(f"{label}: {why or err}") from None


def printable_path(path: Path | str, label: str) -> None:
    """A one-line error naming ``label`` and ``path`` (its control characters as ``\\xNN``) if ``path`` is not one
    printable line, as --append must be: a newline, a tab or another control character in a path numalab writes
    to would break the lines it prints and writes the path in (progress, the records' text files). A byte that is
    not UTF-8 is :func:`utf8_path`'s to name."""
    if escape_surrogates(str(path)).isprintable():
        return
    shown = term_safe(path).replace("\t", "\\x09")  # (term_safe keeps tabs, which a LabError makes spaces)
    raise LabError(f"{label} {shown}: not one printable line (a newline, a tab or another control "
                   "character); choose a printable name")  # fmt: skip


def utf8_path(path: Path | str, label: str) -> None:
    """A one-line error naming ``label`` and ``path`` (its bytes that are not UTF-8 as ``\\xNN``) if ``path``,
    made absolute (the current directory counts), is not UTF-8 or not one printable line (:func:`printable_path`): for
    a directory numalab writes a record into, whose path its UTF-8 text files (the QEMU command line, the manifest,
    the report) carry."""
    printable_path(path, label)
    given, whole = str(path), os.path.abspath(path)
    if escape_surrogates(whole) == whole:
        return
    shown = escape_surrogates(given)
    what = "not UTF-8" if shown != given else f"its absolute path {escape_surrogates(whole)} is not UTF-8"
    raise LabError(f"{label} {shown}: {what}; numalab writes the path into its records' UTF-8 text "
                   "(the QEMU command line, the manifest): choose a UTF-8 name")  # fmt: skip


def cache_root() -> Path:
    """$NUMALAB_CACHE, else $XDG_CACHE_HOME/numalab, else ~/.cache/numalab."""
    env = os.environ.get("NUMALAB_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "numalab"


def cache_dir(*parts: str) -> Path:
    path = cache_root().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_text_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``path`` so that readers see the old content or the new, never half of it: a
    temporary file beside it (named per process, so concurrent writers do not share one), given
    ``mode`` if any, then a rename (so an executable is never there without its x bit)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        if mode is not None:
            tmp.chmod(mode)
        os.replace(tmp, path)
    except OSError as err:  # named as the file the caller asked for, not the temporary one
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise OSError(err.errno, err.strerror, str(path)) from None


def json_text(obj: object, indent: int | None = None, **kw) -> str:
    """Strict JSON, as everything numalab writes: NaN and Infinity (not JSON, though Python writes them)
    raise ValueError instead of reaching a file other readers then refuse. Otherwise ``json.dumps``."""
    return json.dumps(obj, indent=indent, allow_nan=False, **kw)


def write_json_atomic(path: Path, obj: object, indent: int | None = 2, **kw) -> None:
    """:func:`json_text` of ``obj`` and a newline, written with :func:`write_text_atomic`."""
    write_text_atomic(path, json_text(obj, indent, **kw) + "\n")


COMPLETE = ".complete"  # the marker a finished cache directory holds


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """``path`` (created if missing) locked exclusively while the block runs: waits for another holder."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def publish_dir(tmp: Path, out: Path, replace: bool = False) -> Path:
    """Put the finished cache directory ``tmp`` (its COMPLETE marker written) in place as ``out``, under a lock
    beside it. Another process that published a complete ``out`` meanwhile wins: its copy may be in use (a
    guest image being packed from it), so ``tmp`` is dropped instead, unless ``replace`` (a --refresh); a
    half-made ``out`` (a killed build's) is replaced."""
    with file_lock(out.parent / f".{out.name}.lock"):
        if (out / COMPLETE).exists() and not replace:
            shutil.rmtree(tmp, ignore_errors=True)
            return out
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    return out


SCRATCH_PREFIX = "numalab-"
LOCK_NAME = ".lock"


@contextmanager
def run_scratch() -> Iterator[Path]:
    """A private temporary directory for one run (initramfs, QMP socket, the guest's share), removed
    at the end. It holds a lock while the run lives, so a run that was killed (SIGKILL leaves its
    directory behind) is cleaned up by the next one: stale directories are those whose lock is free."""
    clean_stale_scratch()
    d = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
    # Locked under a temporary name first, so a cleaner never sees this lock free.
    tmp_lock = d / f"{LOCK_NAME}.{os.getpid()}"
    fd = os.open(tmp_lock, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(tmp_lock, d / LOCK_NAME)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
        os.close(fd)


def clean_stale_scratch(tmpdir: Path | None = None) -> list[Path]:
    """Remove the scratch directories of runs that are gone; returns them."""
    removed = []
    for d in (tmpdir or Path(tempfile.gettempdir())).glob(f"{SCRATCH_PREFIX}*"):
        try:
            fd = os.open(d / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # not a run's scratch directory (or not one of ours)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # a live run
        else:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
        finally:
            os.close(fd)
    return removed


def read_text_file(path: Path, what: str = "", limit: int | None = None) -> str:
    """A text file a user gave (a spec, a fragment, a series), or a one-line error naming it; at most
    ``limit`` bytes (lab.datafile.MAX_SPEC_BYTES by default)."""
    label = f"{what} {path}" if what else str(path)
    return text_of(read_bytes(path, what, MAX_SPEC_BYTES if limit is None else limit), label)
