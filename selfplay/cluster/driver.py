"""`python -m selfplay.cluster`: self-play on every node of a Ray cluster, one trainer.

Run the driver on the head node. It places, through Ray, one `TrainerActor` on its own
node (``nets.train --follow DIR/data --resume``) and one `SelfPlayActor` on every node
that carries a ``c4fast_node_TAG`` resource (``selfplay.generation.run --node-tag TAG`` with that
node's GPUs, or its CPUs, writing shards to the node-local spool
``DIR/nodes/TAG/spool`` and following checkpoints in ``DIR/nodes/TAG/models``). The
driver then moves bytes: finished shards from each spool into ``DIR/data`` (sha256
checked, idempotent, at most ``--max-inflight`` uploads in flight, the spool copy
deleted only after the trainer side acknowledged it) and every new checkpoint from
``DIR/train/models`` to each node (sha256 checked, atomic rename; ``selfplay.generation.run``
hot-reloads it). With ``--shared-fs`` (DIR is one filesystem mounted at the same path
on every node) nodes write straight into ``DIR/data/TAG`` and read ``DIR/train/models``.
Like ``selfplay.generation.loop`` it evaluates each new checkpoint against anchors in the arena
and fits Elo ratings. Head-node layout (as ``selfplay.generation.loop``)::

    DIR/data/  DIR/train/  DIR/arena/games.jsonl  DIR/ratings.json  DIR/elo_curve.csv
    DIR/cluster.json   settings, run time and evaluated checkpoints (for resuming; written
                       atomically at start, every --status-every seconds and at the end)
    DIR/trainer/       the trainer actor's logs and counters
    DIR/nodes/TAG/     on each self-play node: spool/, models/, logs/, counters

Failures: a killed self-play actor or trainer actor is restarted by Ray on its node
(up to ``--max-restarts``); the command it ran is stopped cleanly first (finished games
are written, the training state is saved), so only unfinished games are lost and the
trainer resumes from its saved state. A failed command is restarted by its actor, a
killed self-play worker by ``selfplay.generation.run``; the driver logs each restart as its next
status shows it. The head node (driver, trainer, DIR) is a
single point of failure: if it dies, stop everything and run the same command again,
which resumes (spooled shards are uploaded then). ``--address local`` starts a
throw-away Ray cluster on this machine (loopback only, usage stats off, small object
store) with ``--selfplay-nodes`` raylets, each node's disk emulated by DIR/nodes/TAG.

Ctrl-C stops cleanly; the same command resumes until ``--minutes`` of run time in
total. Prints a JSON summary: shards, samples, steps and latest checkpoint of DIR (all
runs so far), and this run's uploads, restarts, shards left in spools and self-play counts
(games and samples written, games played, the exact solver's labels; summed over this
run's self-play commands that printed their summary: one killed with SIGKILL has none,
and nodes whose stop failed are listed as unreported). Exit codes:
0 done, 1 failure, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import re
import sys
import time
import uuid

from c4fast.runtime import raise_on_interrupt, read_json
from nets.shards import list_shards
from selfplay.generation.orchestrator import Orchestrator, OrchestratorError

log = logging.getLogger("c4fast.cluster")

NODE_RESOURCE = "c4fast_node_"  # + TAG: the custom resource naming a self-play node
NODE_RESOURCE_RE = re.compile(r"^c4fast_node_([A-Za-z0-9-]{1,32})$")
SHARD_NODE_RE = re.compile(r"_p\d+_([A-Za-z0-9-]{1,32})_i\d+_r\d+_\d+\.h5$")  # selfplay.generation.run shard names
LIST_EVERY_S = 1.0  # seconds between spool listings of one node
MODEL_SYNC_S = 2.0  # seconds between checks for a new checkpoint
HEALTH_EVERY_S = 5.0  # seconds between actor status calls


def _opt(default, help_text: str):
    return dataclasses.field(default=default, metadata={"help": help_text})


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """Settings of one cluster run (each field is the command-line flag of the same name)."""

    address: str = _opt("local", "Ray address of a running cluster (HOST:6379 or 'auto'), or 'local': "
                                 "start a throw-away cluster on this machine (default local)")
    selfplay_nodes: int = _opt(0, "self-play nodes: how many to start with --address local (0: 2); on a "
                                  "cluster, wait for this many c4fast_node_TAG nodes (0: use all there are)")
    shared_fs: bool = _opt(False, "DIR is a filesystem every node mounts at the same path: nodes write "
                                  "shards straight into DIR/data/TAG (no uploads)")
    gpus_per_node: int = _opt(-1, "GPUs of each self-play node (-1: the preset's)")
    trainer_gpus: int = _opt(-1, "GPUs of the trainer (-1: 1 if the preset uses GPUs, else 0)")
    max_inflight: int = _opt(4, "shard uploads in flight over all nodes (back-pressure; default 4)")
    max_restarts: int = _opt(5, "restarts of each actor (Ray) and of each actor's command (default 5)")
    grace: float = _opt(180.0, "seconds a stopping command gets to write its data before SIGKILL (180)")
    object_store_mb: int = _opt(100, "--address local: object store of each raylet in MiB (100)")

    def __post_init__(self):
        for name in ("selfplay_nodes", "max_restarts"):
            if getattr(self, name) < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 0")
        for name in ("gpus_per_node", "trainer_gpus"):
            if getattr(self, name) < -1:
                raise ValueError(f"--{name.replace('_', '-')} must be >= -1")
        if self.max_inflight < 1 or self.object_store_mb < 75:
            raise ValueError("--max-inflight must be >= 1 and --object-store-mb >= 75")
        if not self.grace > 0:
            raise ValueError("--grace must be > 0")


class ClusterError(RuntimeError):
    """The cluster cannot go on (an actor is gone for good, a command keeps failing)."""


def _child_flags(cfg: ClusterConfig, run: Orchestrator, remaining_s: float) -> tuple[list, list, int, int]:
    """(selfplay.generation.run flags, nets.train flags, GPUs per self-play node, trainer GPUs): the
    run's child configs (:meth:`Orchestrator.child_configs`, the local loop's too) as inline
    JSON (``--config {...}``) with this placement's devices; the actors add only the
    node-local paths, the time limit and the node identity."""
    from c4fast.cli import config_to_dict

    sp, tr = run.child_configs(remaining_s)
    node_gpus = sp.gpus if cfg.gpus_per_node < 0 else cfg.gpus_per_node
    trainer_gpus = (1 if sp.gpus else 0) if cfg.trainer_gpus < 0 else cfg.trainer_gpus
    sp = dataclasses.replace(sp, gpus=node_gpus, status_file=None)  # a node's files are its own
    tr = dataclasses.replace(tr, train=dataclasses.replace(tr.train, device="cuda" if trainer_gpus else "cpu"))
    return (["--config", json.dumps(config_to_dict(sp))], ["--config", json.dumps(config_to_dict(tr))],
            node_gpus, trainer_gpus)


@contextlib.contextmanager
def ray_session(cfg: ClusterConfig, marker: str):
    """Connect to cfg.address, or start and tear down a local multi-raylet cluster."""
    if cfg.address != "local":
        import ray

        ray.init(address=cfg.address, log_to_driver=False, logging_level=logging.WARNING)
        try:
            yield
        finally:
            ray.shutdown()
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # keep every address on loopback (read at import)
    os.environ["C4FAST_CLUSTER_RUN"] = marker  # every process of the run carries it
    import ray
    from ray.cluster_utils import Cluster

    node = dict(num_cpus=0, object_store_memory=cfg.object_store_mb << 20, node_ip_address="127.0.0.1")
    cluster = Cluster(initialize_head=True, head_node_args=dict(node, include_dashboard=False))
    try:
        for i in range(cfg.selfplay_nodes or 2):
            cluster.add_node(**node, resources={f"{NODE_RESOURCE}n{i}": 1})
        ray.init(address=cluster.address, _node_ip_address="127.0.0.1", log_to_driver=False,
                 logging_level=logging.WARNING)
        yield
    finally:
        ray.shutdown()
        cluster.shutdown()


def discover_nodes(cfg: ClusterConfig, timeout: float = 120.0) -> list[str]:
    """Tags of the self-play nodes (``c4fast_node_TAG`` resources of live nodes), sorted."""
    import ray

    want = cfg.selfplay_nodes
    deadline = time.monotonic() + timeout
    while True:
        seen: dict[str, int] = {}
        for n in ray.nodes():
            if n.get("Alive"):
                for r in n.get("Resources", {}):
                    m = NODE_RESOURCE_RE.match(r)
                    if m:
                        seen[m.group(1)] = seen.get(m.group(1), 0) + 1
        twice = [t for t, k in seen.items() if k > 1]
        if twice:
            raise ClusterError(f"node tag(s) {twice} name more than one node: give each node its own tag")
        tags = sorted(seen)
        if tags and len(tags) >= want:
            return tags[:want] if want else tags
        if time.monotonic() > deadline:
            raise ClusterError(f"found {len(tags)} self-play node(s) {tags}, want {want or 1}: start each with "
                               f"ray start --address HEAD:6379 --resources '{{\"{NODE_RESOURCE}TAG\": 1}}'")
        time.sleep(1.0)


class RayPlacement:
    """The loop's processes on a Ray cluster (see the module docstring): a trainer actor on
    the head node, one self-play actor per tagged node, shards and checkpoints moved
    between them by this process."""

    state_file = "cluster.json"
    lock_name = "selfplay.cluster"

    def __init__(self, cfg: ClusterConfig):
        self.cfg = cfg
        self.run: Orchestrator | None = None
        self.dir = self.data = self.models = None  # the run's, from start()
        self.session = contextlib.ExitStack()
        self.trainer = None
        self.nodes: dict = {}  # tag -> SelfPlayActor handle
        self.inflight: dict = {}  # put ref -> (tag, name)
        self.acks: dict = {}  # ack ref -> (tag, name)
        self.listing: dict = {}  # ready() ref -> tag
        self.queue: dict = {}  # tag -> names to upload
        self.acked: set = set()
        self.last_list: dict = {}
        self.spooled: dict = {}  # tag -> shards in its spool at the last listing
        self.uploads = {"stored": 0, "duplicates": 0, "errors": 0}
        self.pause_until = 0.0  # no new uploads before (the trainer was restarting)
        self.down: set = set()  # actors seen unreachable and not yet back
        self.latest_ref = None
        self.latest: tuple | None = None
        self.last_model_check = 0.0
        self.installing: dict = {}  # install ref -> (tag, name)
        self.node_model: dict = {}
        self.status_refs: dict = {}  # ref -> tag ("trainer" for the trainer)
        self.statuses: dict = {}
        self.unstopped: list = []  # nodes whose stop failed: their last commands' counts are missing
        self.last_ok: dict = {}
        self.last_health = 0.0
        self._rate: tuple[float, int] | None = None  # (monotonic time, samples) of the last status

    # ------------------------------------------------------------ the Placement protocol
    def start(self, run: Orchestrator, remaining_s: float) -> None:
        self.run = run
        self.dir, self.data, self.models = run.dir, run.data, run.models
        run_id = f"{run.state['runs']}-{uuid.uuid4().hex[:8]}"
        marker = self.dir
        self.session.enter_context(ray_session(self.cfg, marker))
        self._start_actors(run, remaining_s, time.time() + remaining_s, run_id, marker)

    def poll(self) -> None:
        try:
            self._pump()
            self._sync_models()
            self._health()
        except ClusterError as e:
            raise OrchestratorError(str(e)) from None

    def stop(self) -> None:
        try:
            self._stop_all()
        finally:
            self.session.close()

    def progress(self) -> dict:
        samples = self.run.samples() if self.run else 0
        now, rate = time.monotonic(), None
        if self._rate is not None and now > self._rate[0]:
            rate = (samples - self._rate[1]) / (now - self._rate[0])
        self._rate = (now, samples)
        tr = self.statuses.get("trainer", {})
        step = next((s.get("steps") or s.get("step") for s in reversed(tr.get("summaries", [])) if s), 0)
        train_status = read_json(os.path.join(self.run.logs, "train_status.json")) if self.run else {}
        parts = [f"{t}: spool {self.spooled.get(t, '?')} model {self.node_model.get(t) or '-'}" for t in self.nodes]
        note = (f"shards stored {self.uploads['stored']} ({self.uploads['duplicates']} duplicates skipped); "
                f"trainer {self.latest[0] if self.latest else '-'}; " + "; ".join(parts))
        return {"samples": samples, "samples_per_s": rate or 0.0,
                "train_step": train_status.get("step", step or 0),
                "train_samples_per_s": train_status.get("samples_per_s", 0), "note": note}

    # ------------------------------------------------------------ actors
    def _start_actors(self, run: Orchestrator, remaining_s: float, deadline: float, run_id: str,
                      marker: str) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from selfplay.cluster.actors import SelfPlayActor, TrainerActor

        cfg = self.cfg
        sp_flags, tr_flags, node_gpus, trainer_gpus = _child_flags(cfg, run, remaining_s)
        tags = discover_nodes(cfg)
        head = ray.get_runtime_context().get_node_id()
        gpus = {n["NodeID"]: n["Resources"].get("GPU", 0) for n in ray.nodes() if n.get("Alive")}
        tag_gpus = {m.group(1): gpus[n["NodeID"]] for n in ray.nodes() if n.get("Alive")
                    for m in map(NODE_RESOURCE_RE.match, n["Resources"]) if m}
        if trainer_gpus > gpus.get(head, 0):
            raise ClusterError(f"the trainer wants {trainer_gpus} GPU(s), the head node has {gpus.get(head, 0)} "
                               "(--trainer-gpus)")
        short = [t for t in tags if tag_gpus[t] < node_gpus]
        if short:
            raise ClusterError(f"node(s) {short} have fewer than {node_gpus} GPU(s) (--gpus-per-node)")
        self.trainer = TrainerActor.options(
            max_restarts=cfg.max_restarts, num_gpus=trainer_gpus,
            scheduling_strategy=NodeAffinitySchedulingStrategy(head, soft=False),
        ).remote(self.dir, tr_flags, run_id, cfg.grace, cfg.max_restarts, marker)
        for tag in tags:
            node_dir = os.path.join(self.dir, "nodes", tag)
            shared = dict(out_dir=os.path.join(self.data, tag), model_dir=self.models) if cfg.shared_fs else {}
            self.nodes[tag] = SelfPlayActor.options(
                max_restarts=cfg.max_restarts, num_gpus=node_gpus, resources={NODE_RESOURCE + tag: 1},
            ).remote(node_dir, tag, sp_flags, deadline, run_id, cfg.grace, cfg.max_restarts, marker, **shared)
            self.queue[tag] = []
            self.last_list[tag] = 0.0
        now = time.monotonic()
        self.last_ok = {t: now for t in [*tags, "trainer"]}
        log.info("placed the trainer on the head node and self-play on %d node(s): %s", len(tags), ", ".join(tags))

    def _actor(self, tag):
        return self.trainer if tag == "trainer" else self.nodes[tag]

    # ------------------------------------------------------------ shards: node spool -> DIR/data
    def _pump(self) -> None:
        import ray
        from ray.exceptions import RayError

        if self.cfg.shared_fs:
            return
        now = time.monotonic()
        for ref in _ready(self.inflight):
            tag, name = self.inflight.pop(ref)
            try:
                res = ray.get(ref)
            except RayError as e:
                self.uploads["errors"] += 1
                if _actor_down(e):  # restarting: _health reports it once; wait a little
                    self.pause_until = now + 2.0
                    log.debug("upload of %s from %s: %s", name, tag, _short(e))
                else:
                    log.warning("upload of %s from %s failed (%s); it stays in the spool and is retried",
                                name, tag, _short(e))
                continue
            self.uploads["stored" if res["stored"] else "duplicates"] += 1
            if not res["stored"]:
                log.info("%s from %s was already stored: not stored twice", name, tag)
            self.acks[self.nodes[tag].ack.remote(name, res["sha256"])] = (tag, name)
        for ref in _ready(self.acks):
            tag, name = self.acks.pop(ref)
            try:
                ray.get(ref)
                self.acked.add((tag, name))
            except RayError as e:
                (log.debug if _actor_down(e) else log.warning)(
                    "ack of %s on %s failed (%s); the upload is repeated (a no-op)", name, tag, _short(e))
        busy = {*self.inflight.values(), *self.acks.values()}  # (tag, name) with an upload or ack under way
        for ref in _ready(self.listing):
            tag = self.listing.pop(ref)
            try:
                names = ray.get(ref)
            except RayError as e:
                log.debug("listing %s failed: %s", tag, _short(e))
                continue
            self.spooled[tag] = len(names)
            self.queue[tag] = [n for n in names if (tag, n) not in busy and (tag, n) not in self.acked]
        for tag, actor in self.nodes.items():
            if tag not in self.listing.values() and now - self.last_list[tag] >= LIST_EVERY_S:
                self.listing[actor.ready.remote()] = tag
                self.last_list[tag] = now
        while len(self.inflight) < self.cfg.max_inflight and any(self.queue.values()) and now >= self.pause_until:
            for tag in sorted(self.nodes, key=lambda t: sum(1 for v in self.inflight.values() if v[0] == t)):
                if self.queue[tag]:
                    name = self.queue[tag].pop(0)
                    blob = self.nodes[tag].read.remote(name)
                    self.inflight[self.trainer.put.remote(blob)] = (tag, name)
                    break

    def _drained(self) -> bool:
        return not (self.inflight or self.acks or any(self.queue.values()) or any(self.spooled.values()))

    # ------------------------------------------------------------ checkpoints: DIR/train/models -> nodes
    def _sync_models(self) -> None:
        import ray
        from ray.exceptions import RayError

        if self.cfg.shared_fs:
            return
        now = time.monotonic()
        if self.latest_ref is None and now - self.last_model_check >= MODEL_SYNC_S:
            self.latest_ref = self.trainer.latest_model.remote()
            self.last_model_check = now
        if self.latest_ref is not None and _ready({self.latest_ref: None}):
            try:
                self.latest = ray.get(self.latest_ref)
            except RayError:
                pass
            self.latest_ref = None
        for ref in _ready(self.installing):
            tag, name = self.installing.pop(ref)
            try:
                ray.get(ref)
                self.node_model[tag] = name
                log.debug("node %s now has %s", tag, name)
            except RayError as e:
                (log.debug if _actor_down(e) else log.warning)("sending %s to %s failed (%s); retrying",
                                                               name, tag, _short(e))
                self.node_model[tag] = None
        if self.latest:
            busy = {t for t, _ in self.installing.values()}
            for tag, actor in self.nodes.items():
                if tag not in busy and self.node_model.get(tag) != self.latest[0]:
                    self.installing[actor.install_model.remote(self.trainer.read_model.remote(self.latest[0]))] = \
                        (tag, self.latest[0])

    # ------------------------------------------------------------ health
    def _health(self) -> None:
        import ray
        from ray.exceptions import RayError

        now = time.monotonic()
        for ref in _ready(self.status_refs):
            tag = self.status_refs.pop(ref)
            try:
                st = ray.get(ref)
                self._log_restarts(tag, self.statuses.get(tag), st)
                self.statuses[tag] = st
                self.last_ok[tag] = now
                if tag in self.down:
                    log.warning("%s is back (incarnation %d)", tag, self.statuses[tag]["incarnation"])
                    self.down.discard(tag)
            except RayError as e:
                if tag not in self.down:
                    log.warning("%s is unreachable (%s); Ray restarts it", tag, _short(e))
                self.down.add(tag)
                if tag != "trainer":
                    self.node_model[tag] = None
        if now - self.last_health >= HEALTH_EVERY_S:
            self.last_health = now
            for tag in ["trainer", *self.nodes]:
                if tag not in self.status_refs.values():
                    self.status_refs[self._actor(tag).status.remote()] = tag
        for tag, t in self.last_ok.items():
            if now - t > self.cfg.grace + 120:
                raise ClusterError(f"{tag} has not answered for {now - t:.0f} s (restarts used up?)")
        for tag, st in self.statuses.items():
            c = st["child"]
            if not c["running"] and c["exit"] not in (None, 0) and st["process_restarts"] >= self.cfg.max_restarts:
                what = "the trainer" if tag == "trainer" else f"self-play on {tag}"
                raise ClusterError(f"{what} exited with code {c['exit']} after {st['process_restarts']} restarts; "
                                   f"see the logs in {st.get('logs_dir', 'its logs directory')}")

    @staticmethod
    def _log_restarts(tag: str, before: dict | None, now: dict) -> None:
        """Log each restart of `tag`'s actor (by Ray) and of its command as soon as a status shows it."""
        if before is None:
            return
        if now["actor_restarts"] > before["actor_restarts"]:
            log.warning("%s: actor restarted by Ray (incarnation %d; %d actor restart(s) so far)", tag,
                        now["incarnation"], now["actor_restarts"])
        if now["process_restarts"] > before["process_restarts"]:
            log.warning("%s: its command was restarted (%d restart(s) so far)", tag, now["process_restarts"])

    def _stop_all(self) -> None:
        """Stop self-play (finished games reach the spools), upload what is spooled, stop the
        trainer (it saves its state), then end the actors. Bounded by the grace period."""
        import ray
        from ray.exceptions import GetTimeoutError, RayError

        if self.trainer is None:
            return
        refs = {a.stop.remote(): t for t, a in self.nodes.items()}
        for ref, tag in refs.items():
            try:
                self.statuses[tag] = ray.get(ref, timeout=self.cfg.grace + 30)
            except (RayError, GetTimeoutError) as e:
                log.warning("stopping self-play on %s failed: %s", tag, _short(e))
                self.unstopped.append(tag)
        if not self.cfg.shared_fs:
            self.last_list = {t: 0.0 for t in self.nodes}
            self.spooled = {t: 1 for t in self.nodes}  # unknown until listed
            deadline = time.monotonic() + self.cfg.grace
            while not self._drained() and time.monotonic() < deadline:
                self._pump()
                time.sleep(0.05)
            if not self._drained():
                log.warning("shards left in spools: %s (the next run uploads them)", self.spooled)
        try:
            self.statuses["trainer"] = ray.get(self.trainer.stop.remote(), timeout=self.cfg.grace + 30)
        except (RayError, GetTimeoutError) as e:
            log.warning("stopping the trainer failed: %s", _short(e))
        for a in [self.trainer, *self.nodes.values()]:
            ray.kill(a, no_restart=True)

    def summary(self) -> dict:
        shards = list_shards([self.run.data]) if self.run else []
        per_node: dict = {}
        for p in shards:
            m = SHARD_NODE_RE.search(os.path.basename(p))
            tag = m.group(1) if m else "?"
            per_node[tag] = per_node.get(tag, 0) + 1
        sp = [s for t, s in self.statuses.items() if t != "trainer"]
        tr = self.statuses.get("trainer", {})
        restarts = {
            "selfplay_actors": sum(s["actor_restarts"] for s in sp),
            "selfplay_processes": sum(s["process_restarts"] for s in sp),
            "selfplay_workers": sum(x.get("worker_restarts", 0) for s in sp for x in s["summaries"]),
            "trainer_actor": tr.get("actor_restarts", 0),
            "trainer_processes": tr.get("process_restarts", 0),
        }
        ended = [x for s in sp for x in s["summaries"]]  # one per self-play command that printed its summary
        selfplay = {"commands": len(ended), **{k: sum(x.get(k, 0) for x in ended) for k in _SELFPLAY_COUNTS},
                    "unreported_nodes": sorted(self.unstopped)}
        return {"address": self.cfg.address, "nodes": sorted(self.nodes), "shards": len(shards),
                "shards_per_node": per_node, "restarts": restarts, "uploads": dict(self.uploads),
                "left_in_spools": {t: n for t, n in self.spooled.items() if n}, "selfplay": selfplay}


# counts of a selfplay.generation.run summary that add up over nodes and incarnations: games and
# samples written to shards, games played, and the solver's labels (over the games played)
_SELFPLAY_COUNTS = ("games", "samples", "games_played", "solved_samples", "solve_tries", "rescored_samples")


def _ready(refs: dict) -> list:
    import ray

    if not refs:
        return []
    done, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
    return done


def _actor_down(e: BaseException) -> bool:
    """The error says an actor is dead or restarting (directly or as a task's cause)."""
    from ray.exceptions import ActorUnavailableError, RayActorError

    kinds = (RayActorError, ActorUnavailableError)
    return isinstance(e, kinds) or isinstance(getattr(e, "cause", None), kinds)


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[-1] if text else ''}"[:300]


def build_parser() -> argparse.ArgumentParser:
    """``--preset``/``--dir``, every :class:`selfplay.generation.loop.LoopConfig` knob (``--train.lr``,
    ``--eval.pairs``, ...: the local loop's flags) and one flag per ClusterConfig field."""
    from c4fast.cli import add_config_arguments
    from selfplay.generation.loop import LOOP_MANAGED, PRESETS, LoopConfig

    ap = argparse.ArgumentParser(prog="python -m selfplay.cluster", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default=None, choices=sorted(PRESETS),
                    help="loop preset for a new run (default cpu; a resumed run keeps its own)")
    ap.add_argument("--dir", default="runs/cluster", help="run directory on the head node; nodes use "
                                                          "DIR/nodes/TAG (default runs/cluster)")
    group = ap.add_argument_group("cluster placement")
    for f in dataclasses.fields(ClusterConfig):
        flag = "--" + f.name.replace("_", "-")
        if isinstance(f.default, bool):
            group.add_argument(flag, action="store_true", help=f.metadata["help"])
        else:
            group.add_argument(flag, type=type(f.default), default=f.default, help=f.metadata["help"])
    add_config_arguments(ap, LoopConfig, base=PRESETS["cpu"], skip=LOOP_MANAGED)
    return ap


def main(argv=None) -> int:
    from c4fast.cli import ConfigError
    from c4fast.runtime import LockedError
    from selfplay.generation.loop import PRESETS, LoopConfig
    from selfplay.generation.orchestrator import run_config

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[cluster %(asctime)s] %(message)s", datefmt="%H:%M:%S")
    raise_on_interrupt()
    try:
        ccfg = ClusterConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ClusterConfig)})
        cfg = run_config(LoopConfig, args, PRESETS, RayPlacement.state_file)
        run = Orchestrator(cfg, args.dir, RayPlacement(ccfg))
        run.open()
        run.state["cluster"] = dataclasses.asdict(ccfg)
    except (ConfigError, ValueError, OSError, LockedError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    summary = run.run()
    print(json.dumps(summary), flush=True)
    if "error" in summary:
        print(f"error: {summary['error']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
