"""Process plumbing shared by every layer: atomic files, signals, logging.

Standard library only (no numpy, numba or torch), so any process can import it first.

- :func:`atomic_write` / :func:`atomic_write_bytes` / :func:`atomic_write_json`: write to a
  temporary file in the target directory, fsync it, rename it over the final name, then
  fsync the directory. A reader sees the old file or the new one, never a partial one;
  a crash leaves at most a ``NAME.*.tmp`` file (:func:`remove_stale_temps` clears them).
- :func:`fsync_dir`: make a rename (or a file created with another writer) durable.
- :func:`raise_on_interrupt`: SIGINT, SIGTERM and SIGHUP raise ``KeyboardInterrupt``, so
  every long command stops through one clean path; :func:`check_interrupt` raises it again
  if it was swallowed (see there); :func:`deferred_interrupts` holds it back until a block
  ends (every atomic write runs in one).
- :func:`setup_logging`: one logger per process, to stderr and optionally a file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
import threading
from typing import Any, Callable, IO

__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_json", "fsync_dir",
           "remove_stale_temps", "raise_on_interrupt", "setup_logging", "start_resource_tracker",
           "die_with_parent", "DirLock", "LockedError", "forget_handled_interrupt", "ignore_interrupts",
           "check_interrupt", "deferred_interrupts",
           "LOG_FORMAT"]

LOG_FORMAT = "%(asctime)s %(levelname).1s [%(processName)s] %(name)s: %(message)s"


def _current_umask() -> int:
    """The process umask, read without changing it (``/proc``), or 0o022 where unreadable."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def fsync_dir(directory: str | os.PathLike) -> None:
    """fsync a directory so that renames and new entries in it survive a power loss."""
    try:
        fd = os.open(os.fspath(directory), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> None:
    """Call ``write(fileobj)`` on a binary temp file next to `path`, fsync, rename, fsync dir.

    The temp file is removed if `write` raises; the directory is created if missing. A
    signal caught by :func:`raise_on_interrupt` during the write raises only once the file
    is in place (:func:`deferred_interrupts`).
    """
    with deferred_interrupts():
        _atomic_write(path, write)


def _atomic_write(path, write) -> None:
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~_current_umask())  # mkstemp makes 0600
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(directory)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Atomically replace `path` with `data`."""
    atomic_write(path, lambda f: f.write(data))


def read_json(path: str | os.PathLike, default: Any = None) -> Any:
    """The JSON in `path`, or `default` ({} if None) when it is missing or unreadable
    (a status file read while its writer replaces it atomically is never half-written)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {} if default is None else default


def atomic_write_json(path: str | os.PathLike, obj: Any, indent: int | None = 1) -> None:
    """Atomically replace `path` with ``json.dumps(obj)`` (UTF-8, trailing newline)."""
    atomic_write_bytes(path, (json.dumps(obj, indent=indent) + "\n").encode())


def remove_stale_temps(directory: str | os.PathLike, prefix: str = "") -> list[str]:
    """Delete ``*.tmp`` files left in `directory` by killed writers; returns their names.

    Only call this where no other live process writes temp files into `directory`.
    """
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        if name.endswith(".tmp") and name.startswith(prefix):
            try:
                os.unlink(os.path.join(directory, name))
                removed.append(name)
            except OSError:
                pass
    return removed


def raise_on_interrupt() -> None:
    """Make SIGINT (Ctrl-C), SIGTERM and SIGHUP raise ``KeyboardInterrupt`` in this process.

    Works even when the process was started with SIGINT ignored (a background job of a
    non-interactive shell). Call it in the main thread of every long-running command.
    """

    def handler(signum, frame):
        global _pending_interrupt, _deferred
        _pending_interrupt = signal.Signals(signum).name
        if _defer_depth:
            _deferred = _pending_interrupt
            return
        raise KeyboardInterrupt(_pending_interrupt)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


_pending_interrupt: str | None = None
_defer_depth = 0  # open deferred_interrupts blocks of the main thread
_deferred: str | None = None  # a signal that arrived inside them


@contextlib.contextmanager
def deferred_interrupts():
    """Hold back the ``KeyboardInterrupt`` of a signal caught by :func:`raise_on_interrupt`
    until the (outermost) block ends, then raise it, unless the block raised. For writes a
    signal must not cut short: raised inside the Python callback of a C++ writer
    (``torch.save`` to a file object), it can abort the whole process. Python runs signal
    handlers in the main thread only, so in other threads this does nothing."""
    global _defer_depth, _deferred
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _defer_depth += 1
    finished = False
    try:
        yield
        finished = True
    finally:
        _defer_depth -= 1
        name = None
        if _defer_depth == 0:
            name, _deferred = _deferred, None
    if finished and name is not None:
        raise KeyboardInterrupt(name)


def check_interrupt() -> None:
    """Raise ``KeyboardInterrupt`` if a signal caught by :func:`raise_on_interrupt` has not
    been handled yet (it is marked handled by :func:`forget_handled_interrupt`).

    A signal that arrives while Python runs a callback from C (a ctypes callback such as
    Numba's LLVM object-cache hook during a JIT compile) raises inside that callback, and
    the C caller swallows the exception ("Exception ignored in ..."): the program would go
    on as if never interrupted. Long loops call this once per iteration so such a signal
    still stops them. Only the main thread raises (Python delivers signals there); in any
    other thread, such as the cluster driver's evaluation thread, this does nothing.
    """
    if _pending_interrupt is not None and threading.current_thread() is threading.main_thread():
        raise KeyboardInterrupt(_pending_interrupt)


def ignore_interrupts() -> dict:
    """Ignore SIGINT, SIGTERM and SIGHUP from now on in this process: for a clean-up that a
    second signal must not cut short, or for a process whose parent decides when it stops.
    Returns the handlers it replaced, for :func:`restore_handlers` once the clean-up is done."""
    before = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        before[sig] = signal.signal(sig, signal.SIG_IGN)
    return before


def restore_handlers(before: dict) -> None:
    """Put back the signal handlers that :func:`ignore_interrupts` returned."""
    for sig, handler in before.items():
        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def forget_handled_interrupt() -> None:
    """Make a KeyboardInterrupt that was caught and handled not turn the exit code into
    -SIGINT. CPython sets an internal "unhandled KeyboardInterrupt" flag when the exception
    passes through code run by ``exec`` of a string (dataclasses, Numba and torch generate
    such code), and ``python -m`` then exits by re-raising SIGINT even though the program
    caught the exception and stopped cleanly. Running any string through ``exec`` clears
    the flag; call this right before a clean exit after an interrupt."""
    global _pending_interrupt
    _pending_interrupt = None
    exec("pass", {})


def start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker now, immune to SIGHUP (it already ignores
    SIGINT and SIGTERM), so that a hang-up sent to the whole process group cannot kill it
    before it unlinks the shared memory and semaphores of crashed processes."""
    from multiprocessing import resource_tracker

    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # SIG_IGN survives fork + exec
    try:
        resource_tracker.ensure_running()
    finally:
        signal.signal(signal.SIGHUP, old)


def setup_logging(log_file: str | os.PathLike | None = None, level: int = logging.INFO,
                  stream: IO[str] | None = None) -> logging.Logger:
    """Configure the root logger of this process: stderr (or `stream`) and `log_file`.

    Idempotent: calling it again replaces the handlers it installed. Machine-readable
    output (JSON summaries) stays on stdout; diagnostics go through ``logging``.
    """
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "_c4fast", False):
            root.removeHandler(h)
            h.close()
    fmt = logging.Formatter(LOG_FORMAT, "%H:%M:%S")
    handlers: list[logging.Handler] = [logging.StreamHandler(stream or sys.stderr)]
    if log_file is not None:
        os.makedirs(os.path.dirname(os.path.abspath(log_file)), exist_ok=True)
        handlers.append(logging.FileHandler(log_file))
    for h in handlers:
        h._c4fast = True  # type: ignore[attr-defined]
        h.setFormatter(fmt)
        root.addHandler(h)
    root.setLevel(level)
    return root


def die_with_parent(sig: int = signal.SIGTERM, expected_parent: int | None = None) -> None:
    """Ask the kernel to send `sig` to this process when its parent exits (Linux
    ``PR_SET_PDEATHSIG``); elsewhere a no-op. If the parent is already gone (it is no longer
    `expected_parent`), the signal is sent at once, closing the race with the parent's death.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if expected_parent is not None and os.getppid() != expected_parent:
        os.kill(os.getpid(), sig)


def keep_heap_mapped() -> bool:
    """Make glibc's malloc keep large blocks mapped (this process only): allocations up to
    32 MiB come from the heap and the heap is never trimmed. By default glibc maps each
    block above a moving threshold afresh and returns freed memory to the kernel, so every
    network forward page-faults its activations in again (measured: 800-8,000 minor faults
    per CPU forward, 14-39 % of its time; docs/PERFORMANCE.md). True if applied (glibc)."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        return bool(libc.mallopt(m_mmap_threshold, 32 << 20)) and bool(libc.mallopt(m_trim_threshold, 1 << 30))
    except (OSError, AttributeError):  # not glibc: nothing to tune
        return False


def cpu_seconds(pid: int, reaped_children: bool = False) -> float:
    """CPU time (user + system, all threads) process `pid` has used so far, in seconds;
    with `reaped_children`, plus that of its children it has waited for. 0.0 when the
    process is gone or /proc is not there (Linux only)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(b")") + 2:].split()  # after "pid (comm) "; comm may hold spaces
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    if reaped_children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def held_lock(path: str | os.PathLike):
    """Hold an exclusive ``flock`` on `path` (created if missing) for the ``with`` block,
    waiting for another holder: read-modify-write of a file shared by processes (write the
    file itself atomically inside). The kernel drops the lock with a dead holder."""
    import fcntl

    fd = os.open(os.fspath(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


class LockedError(RuntimeError):
    """Another live process holds the directory lock."""


class DirLock:
    """An exclusive lock on a directory (``DIR/.c4fast.lock``, ``flock``), held until
    :meth:`release` or process exit. A lock left by a dead process is free again (the
    kernel drops ``flock`` locks with their holder), so no stale-lock cleanup is needed.
    The file names the holder's pid and command for the error message.
    """

    def __init__(self, directory: str | os.PathLike, what: str):
        import fcntl

        self.path = os.path.join(os.fspath(directory), ".c4fast.lock")
        os.makedirs(os.fspath(directory), exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self.fd, 4096, 0).decode(errors="replace").strip() or "another process"
            os.close(self.fd)
            raise LockedError(f"{os.fspath(directory)!r} is in use by {holder}; stop it first "
                              f"(two {what}s on one directory would overwrite each other)") from None
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"pid {os.getpid()} ({what}: {' '.join(sys.argv)[:200]})\n".encode(), 0)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
