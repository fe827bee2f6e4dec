"""`python -m selfplay.cluster.guard`: run one command for a Ray actor, and never outlive it.

    python -m selfplay.cluster.guard --watch PID --pidfile FILE --log FILE [--grace S] -- CMD...

The guard detaches (double fork, new session: Ray kills an actor's direct children
with SIGKILL, which would leave a self-play run's servers, workers and shared memory
behind), writes FILE (JSON: pid, pgid and start time of the guard), starts CMD in its
process group with stdout and stderr appended to the log, and then watches:

* CMD exits: the guard kills what CMD left in the group, records ``exit`` in FILE, ends.
* SIGTERM to the guard, or the watched process (the actor) is gone: SIGINT to CMD
  (not to the group: a server still starting up would die of it), which is how
  `selfplay.generation.run` and `nets.train` stop cleanly (finished games are written, the
  training state is saved, shared memory is unlinked); after `--grace` seconds,
  SIGKILL to the group.

`process_alive`, `group_members` and `stop_guard` are the helpers actors use to find
and stop a guard left by an earlier incarnation of themselves.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

from c4fast.runtime import atomic_write_json

POLL_S = 0.25  # seconds between checks of the command and the watched process


def start_time(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (/proc), None if gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def process_alive(pid: int, start: int | None = None) -> bool:
    """True if `pid` runs and (when `start` is given) is the same process as then."""
    t = start_time(pid)
    return t is not None and (start is None or t == start)


def group_members(pgid: int) -> list[int]:
    """Live processes in process group `pgid` (from /proc)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            out.append(int(name))
    return out


def _signal_group(pgid: int, sig: int, but: int | None = None) -> None:
    for pid in group_members(pgid):
        if pid != but:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


def read_pidfile(path: str) -> dict | None:
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return None


def _write_pidfile(path: str, info: dict) -> None:
    atomic_write_json(path, info)


def stop_guard(pidfile: str, grace: float, wait: bool = True) -> None:
    """Stop the guard of `pidfile` (and its command) if it still runs: SIGTERM, then
    after `grace` + 10 s SIGKILL to its whole group. With `wait`, returns once the
    group is empty."""
    info = read_pidfile(pidfile)
    if not info:
        return
    pid, pgid = int(info["pid"]), int(info["pgid"])
    if process_alive(pid, info.get("start")):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    if not wait:
        return
    deadline = time.monotonic() + grace + 10
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    if group_members(pgid):
        _signal_group(pgid, signal.SIGKILL)
        while group_members(pgid):
            time.sleep(POLL_S)


def launch(cmd: list[str], watch: int, pidfile: str, log: str, grace: float, env=None) -> None:
    """Start a detached guard for `cmd` and return once its pidfile exists (from an actor)."""
    try:
        os.remove(pidfile)
    except FileNotFoundError:
        pass
    argv = [sys.executable, "-m", "selfplay.cluster.guard", "--watch", str(watch), "--pidfile", pidfile,
            "--log", log, "--grace", str(grace), "--", *cmd]
    first = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    first.wait()  # the intermediate process exits right after the fork
    deadline = time.monotonic() + 60
    while read_pidfile(pidfile) is None:
        if time.monotonic() > deadline or first.returncode != 0:
            raise RuntimeError(f"the guard for {cmd[:3]} did not start (exit {first.returncode})")
        time.sleep(0.05)


def _run(args) -> int:
    stopping = {"since": None}

    def on_term(signum, frame):
        if stopping["since"] is None:
            stopping["since"] = time.monotonic()

    signal.pthread_sigmask(signal.SIG_SETMASK, [])  # Ray workers block SIGINT; children inherit masks
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the command's group
    signal.signal(signal.SIGTERM, on_term)
    pgid = os.getpgid(0)
    info = {"pid": os.getpid(), "pgid": pgid, "start": start_time(os.getpid()), "cmd": args.cmd}
    watch_start = start_time(args.watch)
    with open(args.log, "ab") as log:
        proc = subprocess.Popen(args.cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    info["child"] = proc.pid
    _write_pidfile(args.pidfile, info)
    if watch_start is None:  # the actor died before we started
        on_term(None, None)
    sent_int = killed = False
    while True:
        try:
            rc = proc.wait(POLL_S)
            break
        except subprocess.TimeoutExpired:
            pass
        if stopping["since"] is None and not process_alive(args.watch, watch_start):
            stopping["since"] = time.monotonic()
        if stopping["since"] is not None and not sent_int:
            try:
                proc.send_signal(signal.SIGINT)
            except ProcessLookupError:
                pass
            sent_int = True
        if sent_int and not killed and time.monotonic() - stopping["since"] > args.grace:
            _signal_group(pgid, signal.SIGKILL, but=os.getpid())
            killed = True
    # what the command left behind (e.g. servers or workers of a killed run): gone too
    deadline = time.monotonic() + 10
    while len(group_members(pgid)) > 1 and time.monotonic() < deadline:
        time.sleep(POLL_S)
    _signal_group(pgid, signal.SIGKILL, but=os.getpid())
    info["exit"] = rc
    _write_pidfile(args.pidfile, info)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m selfplay.cluster.guard", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--watch", type=int, required=True, help="pid of the actor to outlive never")
    ap.add_argument("--pidfile", required=True, help="JSON file: the guard's pid, pgid, start time, exit")
    ap.add_argument("--log", required=True, help="file that receives the command's stdout and stderr")
    ap.add_argument("--grace", type=float, default=180.0,
                    help="seconds between SIGINT and SIGKILL when stopping (180)")
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the command")
    args = ap.parse_args(argv)
    if args.cmd and args.cmd[0] == "--":
        args.cmd = args.cmd[1:]
    if not args.cmd:
        ap.error("no command given")
    if os.fork() > 0:  # the intermediate process: exit so that the guard is nobody's child
        os._exit(0)
    os.setsid()
    return _run(args)


if __name__ == "__main__":
    sys.exit(main())
