"""Process and shared-memory checks shared by the crash tests (real processes, /proc)."""

from __future__ import annotations

import os
import time


def wait_for(cond, timeout: float = 300.0, what: str = "condition", poll: float = 0.2):
    """Poll `cond` until it returns something truthy (returned); AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def alive(pid: int) -> bool:
    """True if `pid` runs and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def shm_snapshot() -> set[str]:
    """The names in /dev/shm now."""
    return set(os.listdir("/dev/shm"))


def shm_in_use() -> set[str]:
    """/dev/shm entries some live process maps or holds open (other jobs on the machine too)."""
    used = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/maps") as f:
                used.update(line.rsplit("/dev/shm/", 1)[1].split()[0] for line in f if "/dev/shm/" in line)
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("/dev/shm/"):
                    used.add(target[len("/dev/shm/"):].split()[0])
        except OSError:
            continue
    return used


def leaked_shm(before: set[str]) -> list[str]:
    """/dev/shm entries created since `before` that no live process maps or holds open."""
    new = shm_snapshot() - before
    if not new:
        return []
    in_use = shm_in_use()
    return sorted(n for n in new if n not in in_use and os.path.exists(f"/dev/shm/{n}"))
