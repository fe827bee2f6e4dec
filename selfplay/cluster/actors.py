"""The two Ray actors: one trainer on the head node, one self-play actor per node.

Each actor runs one existing command under a `selfplay.cluster.guard` (so the command
never outlives the actor and stops cleanly with it) and serves small, idempotent calls
that the driver strings together; bytes move between nodes as Ray objects (a
`transfer.Blob` returned by one actor is passed by reference to the other).

An actor that dies is restarted by Ray on the same node (its custom resource or node
affinity pins it there) and ``__init__`` runs again: it first waits for the guard of
its previous incarnation to stop the old command (which writes its finished games /
training state), then starts a fresh one. Per-run counters live on the node's disk
(``actor.json``) so that restarts are counted across incarnations.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time

import ray

from c4fast.runtime import atomic_write_json

from selfplay.cluster import guard
from selfplay.cluster.transfer import Blob, Spool, install_model, latest_model, read_blob, \
    remove_temporaries, sha256_file, store_blob

FAULT_TRAINER_EXIT_AFTER_STORE = "trainer_exit_after_store"  # test hook, see TrainerActor.put
logger = logging.getLogger(__name__)
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


#: the highest incarnation a command accepts (``--incarnation`` is below 2**63: it seeds a 64-bit stream)
MAX_INCARNATION = 2**63 - 1


def _is_count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_incarnation(v) -> bool:
    """A whole incarnation a command accepts (at most MAX_INCARNATION; at it, no further start)."""
    return _is_count(v) and v <= MAX_INCARNATION


def _keep_aside(path: str) -> None:
    """Move `path` to ``PATH.unreadable`` (``PATH.unreadable.N`` if that exists: an earlier
    bad file is never overwritten). Where it cannot be moved (an OSError, or 1,000 kept
    already) it stays, to be replaced by the next save."""
    for n in range(1000):
        target = path + ".unreadable" + (f".{n}" if n else "")
        if not os.path.lexists(target):
            try:
                os.replace(path, target)
            except OSError:
                pass
            return


def _valid_state(st, run_id: str) -> bool:
    """Whether `st` (read from ``actor.json``) is an actor's counters: a whole incarnation
    (optional in another run's file, whose counters are dropped anyway), and for this run
    whole restart counts and a list of log paths."""
    if not (isinstance(st, dict) and _is_incarnation(st.get("incarnation", 0))):
        return False
    if st.get("run_id") != run_id:
        return True
    return ("incarnation" in st and all(_is_count(st.get(k)) for k in ("actor_starts", "child_starts"))
            and isinstance(st.get("logs"), list) and all(isinstance(p, str) for p in st["logs"]))


def _child_env(run_marker: str) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1", C4FAST_CLUSTER_RUN=run_marker)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_REPO, env.get("PYTHONPATH", "")) if p)
    return env


def _last_json(path: str, chunk: int = 1 << 16, limit: int = 64 << 20) -> dict | None:
    """The last complete line of a log that parses as a JSON object (a command's summary),
    read backwards `chunk` bytes at a time, at most `limit` bytes from the end. A summary
    line may be longer than a chunk (a self-play run lists every shard it wrote): only
    lines whose start has been read are tried, so a long line's tail is never mistaken for
    the end of the log or skipped in favour of an older summary."""
    try:
        with open(path, "rb") as f:
            pos = f.seek(0, 2)
            end, head = pos, b""  # head: the first, possibly partial, line of what was read
            while pos > 0 and end - pos < limit:
                step = min(chunk, pos)
                pos -= step
                f.seek(pos)
                parts = (f.read(step) + head).split(b"\n")
                head = parts.pop(0) if pos > 0 else b""
                for line in reversed(parts):
                    if line.startswith(b"{"):
                        try:
                            value = json.loads(line.decode(errors="replace"))
                        except ValueError:
                            continue
                        if isinstance(value, dict):
                            return value
    except FileNotFoundError:
        return None
    return None


class _Supervisor:
    """One guarded command per actor, restarted (bounded, with back-off) if it fails."""

    def _setup(self, home: str, run_id: str, grace: float, max_restarts: int, run_marker: str):
        self.home = home
        self.run_id = run_id
        self.grace = grace
        self.max_restarts = max_restarts
        self.run_marker = run_marker
        self.logs = os.path.join(home, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.pidfile = os.path.join(home, "guard.json")
        self.state_path = os.path.join(home, "actor.json")
        self.state = self._load_state()
        self.state["actor_starts"] += 1
        self.state["pid"] = os.getpid()
        self._save_state()
        self.stopping = False
        self.last_start = 0.0
        guard.stop_guard(self.pidfile, grace)  # the command of an earlier incarnation, if any

    def _load_state(self) -> dict:
        """The node's counters (``actor.json``), fresh ones for a new run. The incarnation
        never goes back: it is at least the highest one with a log in ``logs/`` (an
        incarnation's seeds, game ids and shard names must differ from every earlier one's)
        and any whole incarnation the file still holds, so an unreadable file costs this
        run's restart counters, not a reused incarnation; it is kept as ``actor.json.unreadable``
        (``.unreadable.N`` after the first). An incarnation above MAX_INCARNATION, in the file
        or a log's name, is not one a command accepts: the file is unreadable, the log ignored;
        at MAX_INCARNATION itself the state loads and :meth:`_start` refuses to go past it."""
        floor = 0
        try:
            with open(self.state_path) as f:
                st = json.load(f)
            if isinstance(st, dict) and _is_incarnation(st.get("incarnation")):
                floor = st["incarnation"]
            if not _valid_state(st, self.run_id):
                raise ValueError(f"not the actor's counters: {str(st)[:80]}")
        except FileNotFoundError:
            st = {"incarnation": 0}
        except (OSError, ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError: ValueErrors
            logger.warning("%s: unreadable (%s); counters start again, the incarnation from the logs",
                           self.state_path, e)
            if not isinstance(e, OSError):  # the content is wrong: keep it aside
                _keep_aside(self.state_path)
            st = {"incarnation": 0}
        if st.get("run_id") != self.run_id:  # counters are per run; the incarnation is forever
            st = {"incarnation": st.get("incarnation", 0), "run_id": self.run_id, "actor_starts": 0,
                  "child_starts": 0, "logs": []}
        st["incarnation"] = max(st["incarnation"], floor, self._logged_incarnation())
        return st

    def _logged_incarnation(self) -> int:
        """The highest incarnation with a log of this actor's command in ``logs/`` (0: none)."""
        pattern = re.compile(rf"{re.escape(self.name)}_i(\d+)\.log")
        try:
            names = os.listdir(self.logs)
        except FileNotFoundError:
            return 0
        found = (int(m.group(1)) for m in map(pattern.fullmatch, names) if m)
        return max((i for i in found if i <= MAX_INCARNATION), default=0)

    def _save_state(self) -> None:
        atomic_write_json(self.state_path, self.state)

    def _start(self, cmd_of) -> None:
        """Start `cmd_of(incarnation)` under a guard watching this actor."""
        if self.state["incarnation"] >= MAX_INCARNATION:
            raise RuntimeError(f"{self.name}: incarnation {self.state['incarnation']} is the last a command "
                               f"accepts; clear {self.state_path} and {self.logs} to start the node afresh")
        self.state["incarnation"] += 1
        self.state["child_starts"] += 1
        inc = self.state["incarnation"]
        log = os.path.join(self.logs, f"{self.name}_i{inc}.log")
        self.state["logs"].append(log)
        self._save_state()
        guard.launch(cmd_of(inc), os.getpid(), self.pidfile, log, self.grace, env=_child_env(self.run_marker))
        self.last_start = time.monotonic()

    def _child(self) -> dict:
        info = guard.read_pidfile(self.pidfile) or {}
        running = bool(info) and "exit" not in info and guard.process_alive(int(info["pid"]), info.get("start"))
        return {"running": running, "exit": info.get("exit"), "pid": info.get("child")}

    def _supervise(self, cmd_of, done=lambda: False) -> None:
        """Restart the command if it ended with an error (not after stop(), not once `done()`)."""
        c = self._child()
        if c["running"] or self.stopping or done():
            return
        if c["exit"] == 0 and self.name == "selfplay":
            return  # self-play ran out its --time
        restarts = self.state["child_starts"] - self.state["actor_starts"]
        if restarts >= self.max_restarts:
            return
        if time.monotonic() - self.last_start < min(60.0, 5.0 * 2**restarts):
            return  # back off
        self._start(cmd_of)

    def _stop(self) -> None:
        self.stopping = True
        guard.stop_guard(self.pidfile, self.grace)

    def _status(self) -> dict:
        st = self.state
        return {"pid": os.getpid(), "actor_restarts": st["actor_starts"] - 1,
                "process_restarts": st["child_starts"] - st["actor_starts"], "incarnation": st["incarnation"],
                "child": self._child(), "summaries": [s for s in map(_last_json, st["logs"]) if s]}


@ray.remote(num_cpus=0)
class TrainerActor(_Supervisor):
    """Runs ``nets.train --follow DATA --resume`` and receives shards into DATA."""

    name = "train"

    def __init__(self, run_dir: str, train_args: list, run_id: str, grace: float, max_restarts: int,
                 run_marker: str):
        self.dir = run_dir
        self.data = os.path.join(run_dir, "data")
        self.train_dir = os.path.join(run_dir, "train")
        self.models = os.path.join(self.train_dir, "models")
        self.faults = os.path.join(run_dir, "faults")
        for d in (self.data, self.models):
            os.makedirs(d, exist_ok=True)
        remove_temporaries(self.data)
        self.train_args = list(train_args)
        self._sha_cache: dict = {}
        self._setup(os.path.join(run_dir, "trainer"), run_id, grace, max_restarts, run_marker)
        self._start(self._cmd)

    def _cmd(self, inc: int) -> list:
        return [sys.executable, "-m", "nets.train", "--follow", self.data, "--out", self.train_dir,
                "--resume", *self.train_args]

    def put(self, blob: Blob) -> dict:
        """Store one shard in DATA (idempotent); the reply is the sender's licence to delete it."""
        stored = store_blob(self.data, blob)
        fault = os.path.join(self.faults, FAULT_TRAINER_EXIT_AFTER_STORE)
        if stored and os.path.exists(fault):  # test hook: crash between storing and acknowledging
            os.replace(fault, fault + ".fired")
            os._exit(1)
        return {"name": blob.name, "sha256": blob.sha256, "stored": stored}

    def latest_model(self) -> tuple | None:
        """(name, sha256) of the newest checkpoint, or None."""
        name = latest_model(self.models)
        if name is None:
            return None
        if name not in self._sha_cache:
            self._sha_cache[name] = sha256_file(os.path.join(self.models, name))
        return name, self._sha_cache[name]

    def read_model(self, name: str) -> Blob:
        return read_blob(self.models, name)

    def status(self) -> dict:
        self._supervise(self._cmd)
        return self._status()

    def stop(self) -> dict:
        """Stop the trainer (it saves its state and a checkpoint); returns the status."""
        self._stop()
        return self._status()


@ray.remote(num_cpus=0)
class SelfPlayActor(_Supervisor):
    """Runs ``selfplay.generation.run`` on its node into a node-local spool and serves the spool."""

    name = "selfplay"

    def __init__(self, node_dir: str, tag: str, selfplay_args: list, deadline: float, run_id: str,
                 grace: float, max_restarts: int, run_marker: str, out_dir: str | None = None,
                 model_dir: str | None = None):
        self.tag = tag
        self.node_dir = node_dir
        self.spool = Spool(out_dir or os.path.join(node_dir, "spool"))
        self.models = model_dir or os.path.join(node_dir, "models")
        os.makedirs(self.models, exist_ok=True)
        remove_temporaries(self.models)
        self.args = list(selfplay_args)
        self.deadline = deadline
        self._setup(node_dir, run_id, grace, max_restarts, run_marker)
        if not self._done():
            self._start(self._cmd)

    def _done(self) -> bool:
        return time.time() >= self.deadline - 1

    def _cmd(self, inc: int) -> list:
        remaining = max(1, int(self.deadline - time.time()) + 30)  # the driver stops it first
        return [sys.executable, "-m", "selfplay.generation.run", "--out", self.spool.dir, "--model", self.models,
                "--node-tag", self.tag, "--incarnation", str(inc), "--time", str(remaining), *self.args]

    def ready(self) -> list:
        """Finished shards waiting in the spool."""
        return self.spool.ready()

    def read(self, name: str) -> Blob:
        return self.spool.read(name)

    def ack(self, name: str, sha256: str) -> bool:
        return self.spool.ack(name, sha256)

    def install_model(self, blob: Blob) -> str:
        install_model(self.models, blob)
        return blob.name

    def model(self) -> str | None:
        return latest_model(self.models)

    def status(self) -> dict:
        self._supervise(self._cmd, self._done)
        return {**self._status(), "tag": self.tag, "spool": len(self.spool.ready()), "model": self.model()}

    def stop(self) -> dict:
        """Stop self-play (finished games are written to the spool); returns the status."""
        self._stop()
        return {**self._status(), "tag": self.tag, "spool": len(self.spool.ready())}
