"""`python -m selfplay.generation.run`: multi-process self-play writing crash-safe HDF5 shards.

Starts one inference server per GPU (or one on the CPU with ``--gpus 0``) and W worker
processes; each worker plays G games at once through the batched MCTS, rotating over
the board sizes, and writes shards to ``--out``. Prints a status line every few seconds
and a final JSON summary. Ctrl-C stops cleanly (finished games are written).

Exit codes: 0 done, 1 failure while running (the server died, a worker failed, e.g. to
write a shard, even if its restart went on: the summary's ``error``), 2 bad arguments.
The summary's ``games`` and ``samples`` are what the run's shards hold.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import sys
import time

import numpy as np

from c4fast.cli import ConfigError, add_config_arguments, config_from_args, config_to_dict, load_config
from c4fast.encode import NUM_PLANES
from c4fast.runtime import (DirLock, LockedError, atomic_write_json, check_interrupt, deferred_interrupts,
                            forget_handled_interrupt, ignore_interrupts, raise_on_interrupt, remove_stale_temps,
                            setup_logging, start_resource_tracker)
from selfplay.evaluation.fill import FILL_BINS
from selfplay.generation.config import RunConfig, default_node_tag

log = logging.getLogger("selfplay.generation.run")


def build_parser() -> argparse.ArgumentParser:
    """Flags derived from :class:`RunConfig` (and its nested search / self-play configs)."""
    ap = argparse.ArgumentParser(prog="python -m selfplay.generation.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", metavar="FILE.json", default=None,
                    help="start from this RunConfig JSON (flags given as well override it)")
    add_config_arguments(ap, RunConfig)
    return ap


class UsageError(ValueError):
    pass


def config_from_argv(argv=None) -> RunConfig:
    """Parse the command line into a RunConfig; UsageError for a bad value or file."""
    args = build_parser().parse_args(argv)
    try:
        base = load_config(RunConfig, args.config) if args.config else RunConfig()
        return config_from_args(RunConfig, args, base)
    except ConfigError as e:
        raise UsageError(str(e)) from None


def validate(cfg: RunConfig) -> None:
    """Raise UsageError (exit code 2) for every setting the machine cannot honour, before
    anything is written: unknown preset, missing GPUs, an unloadable model, bad --out."""
    from nets.config import get_preset

    try:
        get_preset(cfg.net_preset)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if cfg.gpus > 0:
        import torch

        if not torch.cuda.is_available() or torch.cuda.device_count() < cfg.gpus:
            have = torch.cuda.device_count() if torch.cuda.is_available() else 0
            raise UsageError(f"--gpus {cfg.gpus} asked for, {have} CUDA device(s) available")
    if cfg.model is not None:
        from nets.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint

        if not os.path.exists(cfg.model):
            raise UsageError(f"--model {cfg.model!r} does not exist")
        path = latest_checkpoint(cfg.model) if os.path.isdir(cfg.model) else cfg.model
        if path is not None:
            try:
                _, net_config, _ = load_checkpoint(path)
            except CheckpointError as e:
                raise UsageError(f"--model: {e}") from None
            if cfg.preset is not None and cfg.preset != net_config.name:
                raise UsageError(f"--preset {cfg.preset} conflicts with --model, a {net_config.name!r} net "
                                 "(the checkpoint decides the net; drop --preset)")
    # --out must be creatable and writable; create nothing if it is not
    out = os.path.abspath(cfg.out)
    parent = out
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"--out {cfg.out!r} is not writable (a file is in the way or no permission)")
    if os.path.exists(out):
        if not os.path.isdir(out) or not os.access(out, os.W_OK | os.X_OK):
            raise UsageError(f"--out {cfg.out!r} is not a writable directory")


def _fmt_status(elapsed, totals, srv, version) -> str:
    games, samples = totals["games"], totals["samples"]
    mean_len = totals["game_length_sum"] / games if games else 0.0
    batches, positions = srv
    fill = positions / batches if batches else 0.0
    return (f"{elapsed:7.0f}s games {games}  samples {samples} "
            f"({samples / max(elapsed, 1e-9):.1f}/s)  evals {positions / max(elapsed, 1e-9):.0f}/s  "
            f"mean length {mean_len:.1f}  server batch {fill:.0f}  model v{version}")


def _status(elapsed: float, totals: dict, evals: int, version: int, forward, sup, server_procs,
            final: bool = False) -> dict:
    """The status file's JSON: progress so far (counts since this run started, rates per
    second of wall time), the solver's labels, and the processes (for the loop's core split).
    ``final`` marks the run's last write, made after its workers stopped."""
    el = max(elapsed, 1e-9)
    return {"seconds": round(elapsed, 1), "games": totals["games"], "samples": totals["samples"],
            "samples_per_s": round(totals["samples"] / el, 2), "evals_per_s": round(evals / el, 1),
            "model_version": version, "worker_restarts": sup.restarts,
            "solved_samples": totals["solved"], "solve_tries": totals["solve_tries"],
            "rescored_samples": totals["rescored"], "forward": forward, "final": final,
            "worker_pids": sup.pids, "server_pids": [p.pid for p in server_procs]}


def default_workers(gpus: int) -> int:
    """Worker processes: 2 on the CPU; with GPUs every usable core (CPU affinity, not
    os.cpu_count) but one per GPU server."""
    if gpus == 0:
        return 2
    from selfplay.generation.cores import usable_cores

    return max(1, usable_cores() - gpus)


class WorkerSupervisor:
    """The worker processes of one run: starts them, restarts one that dies (after a
    back-off that grows while it keeps dying within a minute; at most `max_restarts` times
    per worker; never once a worker lost the inference server, since a restart cannot
    help), and keeps each incarnation's running totals and errors from their messages.

    Incarnations: a worker's restart number is part of its :class:`WorkerSpec`, so its
    seeds, game ids and shard names differ from every earlier incarnation's.

    Reports: each incarnation writes its messages into a pipe of its own (no lock shared
    with other workers, so a worker killed mid-message harms only its own pipe, which ends
    with it). Messages are read and handled with signals held back
    (:func:`c4fast.runtime.deferred_interrupts`): an interrupt between a message's length
    and its body would leave the pipe out of step."""

    def __init__(self, ctx, specs: list, handles_of, stop, max_restarts: int):
        from selfplay.generation.worker import worker_main

        self._target = worker_main
        self.ctx, self.specs, self.handles_of, self.stop = ctx, list(specs), handles_of, stop
        self.max_restarts = max_restarts
        self.procs: list = []
        self.channels: list = []  # read ends of the incarnations' report pipes not yet at end of file
        self.started_at: dict[int, float] = {}
        self.restart_at: dict[int, float] = {}  # worker -> when its back-off ends
        self.quick_failures = {w: 0 for w in range(len(specs))}
        self.inc_stats: dict[tuple[int, int], dict] = {}  # (worker, restart) -> that incarnation's totals
        self.errors: list[str] = []  # a worker lost the inference server (fatal)
        self.failed: list[str] = []  # incarnations that failed, e.g. could not write (restarted)
        self.restarts = 0

    def _spawn(self, w: int):
        reader, writer = self.ctx.Pipe(duplex=False)
        p = self.ctx.Process(target=self._target, args=(self.specs[w], self.handles_of(w), self.stop, writer),
                             name=f"c4fast-worker-{w}", daemon=False)
        with deferred_interrupts():  # a start cut short would leave a child no one joins
            p.start()
        writer.close()  # the worker holds the only write end: its exit is the pipe's end of file
        self.channels.append(reader)
        self.started_at[w] = time.monotonic()
        return p

    def start(self) -> None:
        self.procs = [self._spawn(w) for w in range(len(self.specs))]

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def alive(self) -> bool:
        return any(p.is_alive() for p in self.procs)

    # -------------------------------------------------------------- messages
    def handle(self, msg) -> None:
        """A worker's message: its running totals, a lost server, or a failed incarnation."""
        kind, w, incarnation, payload = msg
        if kind == "stats":
            self.inc_stats[(w, incarnation)] = payload
        elif kind == "error":
            self.errors.append(f"worker {w}: {payload}")
        elif kind == "failed":
            self.failed.append(f"worker {w} (restart {incarnation}) failed: {payload}")
            log.error("%s", self.failed[-1])

    def receive(self, timeout: float) -> int:
        """Handle the messages waiting, waiting up to `timeout` seconds for the first; how
        many pipes were ready."""
        ready = mp_connection.wait(self.channels, timeout)
        for conn in ready:
            with deferred_interrupts():
                try:
                    msg = conn.recv()
                except (EOFError, OSError):  # the incarnation exited (or died mid-message)
                    self.channels.remove(conn)
                    conn.close()
                    continue
                self.handle(msg)
        return len(ready)

    def drain(self) -> None:
        """Handle every message already sent (call it once the workers have exited)."""
        while self.channels and self.receive(0):
            pass

    def totals(self) -> dict:
        keys = ("games", "samples", "moves", "evals", "playouts", "batches", "game_length_sum", "written_games",
                "written_samples", "forks", "solve_tries", "solved", "solve_nodes", "rescored", "fill_sum")
        out = {k: sum(st.get(k, 0) for st in self.inc_stats.values()) for k in keys}
        out["fill_hist"] = sum((np.asarray(st.get("fill_hist", 0), np.int64) for st in self.inc_stats.values()),
                               np.zeros(FILL_BINS, np.int64))
        return out

    # -------------------------------------------------------------- supervision
    def poll(self, now: float) -> str | None:
        """Restart workers that died (after their back-off); the run's fatal failure, if any."""
        from selfplay.generation.worker import SERVER_ERROR_EXIT

        for w, p in enumerate(self.procs):
            if p.is_alive() or p.exitcode == 0 or self.stop.is_set():
                continue
            if w not in self.restart_at:  # just died: decide on a restart with back-off
                spec = self.specs[w]
                self.quick_failures[w] = self.quick_failures[w] + 1 if now - self.started_at[w] < 60 else 0
                if p.exitcode == SERVER_ERROR_EXIT:
                    return (f"worker {w} (pid {p.pid}) lost the inference server"
                            + (f": {self.errors[-1]}" if self.errors else f" (exit code {p.exitcode})"))
                if spec.restart >= self.max_restarts:
                    return (f"worker {w} died {spec.restart + 1} times (last exit code {p.exitcode}); "
                            f"giving up (--max-restarts {self.max_restarts})")
                q = self.quick_failures[w]
                delay = min(30.0, 0.5 * 2 ** q) if q else 0.0
                self.restart_at[w] = now + delay
                log.warning("worker %d (pid %s, incarnation %d) died with code %s; its finished shards "
                            "are kept; restarting it in %.1f s", w, p.pid, spec.restart, p.exitcode, delay)
            if now >= self.restart_at[w]:
                del self.restart_at[w]
                self.restarts += 1
                self.specs[w] = dataclasses.replace(self.specs[w], restart=self.specs[w].restart + 1)
                self.procs[w] = self._spawn(w)
        return None

    def join(self, timeout: float) -> None:
        """Wait for every worker (they write their finished games), then kill stragglers."""
        for p in self.procs:
            p.join(timeout)
            if p.is_alive():
                p.kill()

    def error(self, failure: str | None) -> str | None:
        """The run's error for its summary: `failure`, else a lost server, else the last
        failed incarnation (the run went on, but data may be missing)."""
        if not (failure or self.errors or self.failed):
            return None
        out = failure or (self.errors[0] if self.errors else self.failed[-1])
        if failure and self.failed and self.failed[-1] not in failure:
            out += f"; last worker error: {self.failed[-1]}"
        return out


class _Servers:
    """The inference server processes and their shared queues (counters in the global header)."""

    def __init__(self, queues: list, procs: list):
        self.queues, self.procs = queues, procs

    def _headers(self) -> list[np.ndarray]:
        """Each server's global header (nets.shm_queue, int64 words): fresh views, dropped by
        the caller (a view kept would pin the block at close)."""
        from nets import shm_queue as q

        return [np.ndarray(q.GLOBAL_WORDS, np.int64, sq.shm.buf, 0) for sq in self.queues]

    def counts(self) -> list[int]:
        """(forward batches, positions, FLOPs, forward ns) summed over the servers."""
        from nets import shm_queue as q

        hdrs = self._headers()
        return [sum(int(hdr[k]) for hdr in hdrs) for k in (q.G_BATCHES, q.G_POSITIONS, q.G_FLOPS, q.G_BUSY_NS)]

    def batch_hist(self) -> list[int]:
        """Forward batches by size, summed over the servers: bin i holds 2**i..2**(i+1)-1
        positions, the last every larger batch (nets.shm_queue.batch_bin)."""
        from nets import shm_queue as q

        out = np.zeros(q.BATCH_HIST_BINS, np.int64)
        for hdr in self._headers():
            out += hdr[q.G_BATCH_HIST:q.G_BATCH_HIST + q.BATCH_HIST_BINS]
        return out.tolist()

    def forward(self) -> str | None:
        """The forward the first server serves (a nets.backends kind: a CPU engine, or a CUDA
        server's "fused", "compiled" or "eager" graphs), None before it loaded."""
        from nets import shm_queue as q
        from nets.backends import BACKENDS

        k = int(self._headers()[0][q.G_FORWARD])
        return BACKENDS[k - 1] if 0 < k <= len(BACKENDS) else None

    def version(self) -> int:
        from nets import shm_queue as q

        return int(self._headers()[0][q.G_MODEL_VERSION])

    def dead(self) -> str | None:
        for s, p in enumerate(self.procs):
            if not p.is_alive():
                return f"inference server {s} (pid {p.pid}) exited with code {p.exitcode}"
        return None

    def shutdown(self) -> None:
        from nets.server import request_shutdown

        for sq in self.queues:
            try:
                request_shutdown(sq.handles)
            except Exception:  # noqa: BLE001
                pass
        for p in self.procs:
            p.join(10)
            if p.is_alive():
                p.kill()
        for sq in self.queues:
            sq.close()


def _arithmetic(cfg: RunConfig, forward: str | None, net_gflops: float) -> dict:
    """The forward a run served (a GPU run: that alone, "cuda" before its server loaded);
    for a CPU run also the engine's precision, the machine's matmul peaks at the
    server's threads (nets.precision.roofline, measured now, at the run's end: a virtual
    machine's arithmetic can change within a session — the AMX machine's 2-thread bf16 peak
    measured 2,040 GFLOP/s and 783 an hour later — so a cached peak would misstate the
    fractions) and the run's net GFLOP/s as a fraction of the served precision's peak
    (``of_peak``) and of the highest (``of_best_peak``)."""
    if cfg.gpus > 0 or forward is None:
        return {"forward": forward or ("cuda" if cfg.gpus > 0 else None)}
    from nets.precision import PRECISION_OF, roofline

    threads = cfg.threads or os.cpu_count() or 1
    roof = roofline(threads, seconds=0.5)
    prec = PRECISION_OF[forward]
    peak = roof["peak_gflops"].get(prec)
    return {"forward": forward, "precision": prec, "peak_gflops": roof["peak_gflops"], "peak_threads": threads,
            "of_peak": round(net_gflops / peak, 3) if peak else None,
            "of_best_peak": round(net_gflops / roof["best_peak"], 3), "cpu_model": roof["cpu_model"]}


#: A canvas GPU server's largest forward batch: requests of every worker and size merge into it
CANVAS_FORWARD_BATCH = 8192


def run(cfg: RunConfig) -> dict:
    """Run self-play as `cfg` says; returns the JSON summary (with ``error`` on failure)."""
    from nets import shm_queue as q
    from nets.server import ServerConfig, start_server
    from selfplay.generation.worker import WorkerSpec

    ctx = mp.get_context("spawn")
    start_resource_tracker()
    os.makedirs(cfg.out, exist_ok=True)
    lock = DirLock(cfg.out, "selfplay.generation.run")  # one run per shard directory (LockedError otherwise)
    remove_stale_temps(cfg.out)  # under the lock, leftovers of a killed writer are never shards
    node_tag = cfg.node_tag or default_node_tag()
    # this invocation's identity on the node: seeds, game ids and shard names derive from it
    run_id = cfg.incarnation if cfg.incarnation is not None else int.from_bytes(os.urandom(4), "little")
    n_servers = max(1, cfg.gpus)
    workers = cfg.workers or default_workers(cfg.gpus)
    games = cfg.games_per_worker or (32 if cfg.gpus == 0 else 256)
    populations = min(games, cfg.populations or (2 if cfg.gpus > 0 else 1))
    max_batch = -(-games // populations) * cfg.search.leaves_per_step  # one population's leaves
    per_server = [[w for w in range(workers) if w % n_servers == s] for s in range(n_servers)]
    queues, server_procs = [], []
    for s in range(n_servers):
        sq = q.SharedQueue(ctx, max(1, len(per_server[s])) * populations, max_batch, NUM_PLANES)
        device = f"cuda:{s}" if cfg.gpus > 0 else "cpu"
        server_cfg = ServerConfig(device=device, model=cfg.model, preset=cfg.net_preset, seed=cfg.seed,
                                  threads=cfg.threads if cfg.gpus == 0 else 0,
                                  max_forward_batch=256 if cfg.gpus == 0 else max(
                                      max_batch, CANVAS_FORWARD_BATCH if cfg.canvas else 1024),
                                  reload_interval=cfg.reload_interval, forward=cfg.forward,
                                  sizes=cfg.size_list, canvas=cfg.canvas)
        queues.append(sq)
        server_procs.append(start_server(ctx, sq.handles, server_cfg, name=f"c4fast-server-{s}"))
    servers = _Servers(queues, server_procs)
    stop = ctx.Event()
    prefix = time.strftime("sp_%Y%m%d_%H%M%S")
    config_json = json.dumps(config_to_dict(cfg))
    specs = [WorkerSpec(index=w, slot=per_server[w % n_servers].index(w), out_dir=cfg.out,
                        sizes=cfg.size_list, games_per_worker=games, search=cfg.search,
                        policy=cfg.selfplay, seed=cfg.seed, run_prefix=prefix,
                        samples_per_shard=cfg.samples_per_shard, config_json=config_json,
                        node_tag=node_tag, incarnation=run_id, parent_pid=os.getpid(),
                        shard_seconds=cfg.shard_seconds, workers=workers, populations=populations)
             for w in range(workers)]
    sup = WorkerSupervisor(ctx, specs, lambda w: queues[w % n_servers].handles, stop, cfg.max_restarts)
    sup.start()
    t0 = time.monotonic()
    next_status = t0 + cfg.status_every
    status_failed = False
    failure = None
    try:
        while True:
            check_interrupt()
            sup.receive(0.2)
            now = time.monotonic()
            tot = sup.totals()
            if not stop.is_set() and (
                (cfg.max_games and tot["games"] >= cfg.max_games)
                or (cfg.max_samples and tot["samples"] >= cfg.max_samples)
                or (cfg.time and now - t0 >= cfg.time)
            ):
                stop.set()
            if failure is None:
                failure = servers.dead() or sup.poll(now)
                if failure:
                    log.error("%s", failure)
                    stop.set()
            if now >= next_status:
                counts = servers.counts()
                log.info(_fmt_status(now - t0, tot, counts[:2], servers.version()))
                if cfg.status_file:
                    try:
                        atomic_write_json(cfg.status_file, _status(now - t0, tot, counts[1], servers.version(),
                                                                   servers.forward(), sup, server_procs))
                        status_failed = False
                    except OSError as e:  # self-play goes on; warned once per failing stretch
                        if not status_failed:
                            log.warning("could not write the status to %s: %s (self-play goes on)",
                                        cfg.status_file, e)
                        status_failed = True
                next_status = now + cfg.status_every
            if stop.is_set() and not sup.alive():
                break
    except KeyboardInterrupt:
        log.info("interrupted: stopping workers (finished games are written)")
    finally:
        ignore_interrupts()  # a second signal must not cut the clean-up short
        stop.set()
        try:
            sup.join(120)
            sup.drain()
        finally:  # the servers wait for this process: never leave them running
            counts = servers.counts()
            batch_hist = servers.batch_hist()
            forward = servers.forward()
            version = servers.version()
            servers.shutdown()
            elapsed = time.monotonic() - t0
            tot = sup.totals()
            try:  # the last status holds the final counts, written before the lock goes: a later
                # run on this directory (it needs the lock) never reads this run's status as its own
                if cfg.status_file:
                    atomic_write_json(cfg.status_file, _status(elapsed, tot, counts[1], version, forward, sup,
                                                               server_procs, final=True))
            except OSError as e:  # the summary below still reports everything
                log.warning("could not write the final status to %s: %s", cfg.status_file, e)
            finally:
                lock.release()
    try:
        all_shards = sorted(os.path.join(cfg.out, f) for f in os.listdir(cfg.out)
                            if f.startswith(prefix) and f"_{node_tag}_i{run_id}_" in f and f.endswith(".h5"))
    except OSError as e:  # the directory went away under the run
        all_shards = []
        failure = failure or f"--out {cfg.out!r} is gone: {e.strerror}"
    summary = {
        # what the workers wrote into shards (games lost with a failed write are not counted;
        # a node's spool may have handed some shards on already)
        "games": tot["written_games"], "samples": tot["written_samples"], "games_played": tot["games"],
        "moves": tot["moves"], "seconds": round(elapsed, 2),
        "samples_per_s": round(tot["samples"] / elapsed, 2),
        "moves_per_s": round(tot["moves"] / elapsed, 2),
        "evals_per_s": round(counts[1] / elapsed, 1),
        "playouts_per_s": round(tot["playouts"] / elapsed, 1),
        "mean_batch": round(counts[1] / counts[0], 1) if counts[0] else 0.0,
        # forward batches by size: bin i holds batches of 2**i to 2**(i+1) - 1 positions, the last all larger
        "batch_hist": batch_hist,
        # network arithmetic: FLOPs per evaluation (nets.fused.flops_per_eval, mean over the
        # positions served, so over the sizes played), achieved GFLOP/s over the wall time and
        # inside the server's forward calls, and the share of the wall time spent in them
        "flops_per_eval": round(counts[2] / counts[1]) if counts[1] else 0,
        "net_gflops": float(f"{counts[2] / elapsed / 1e9:.4g}"),
        "net_gflops_in_forward": float(f"{counts[2] / (counts[3] / 1e9) / 1e9:.4g}") if counts[3] else 0.0,
        "server_busy": round(counts[3] / 1e9 / elapsed / n_servers, 3),
        "mean_game_length": round(tot["game_length_sum"] / tot["games"], 2) if tot["games"] else 0.0,
        # final board fill of the games played (stones / playable cells; selfplay.evaluation.fill)
        "mean_fill": round(tot["fill_sum"] / tot["games"], 4) if tot["games"] else 0.0,
        "fill_hist": tot["fill_hist"].tolist(),
        # switches of SelfPlayConfig: games from a mid-game fork, samples the exact solver labelled
        # (of those it was asked to; the rest were over the node budget) and its nodes, and the
        # earlier samples relabelled from them (solve_rescore)
        "forked_games": tot["forks"], "solved_samples": tot["solved"], "solve_tries": tot["solve_tries"],
        "solve_nodes": tot["solve_nodes"], "rescored_samples": tot["rescored"],
        **_arithmetic(cfg, forward, counts[2] / elapsed / 1e9),
        "workers": workers, "games_per_worker": games, "populations": populations, "servers": n_servers,
        "device": "cpu" if cfg.gpus == 0 else f"{cfg.gpus} GPU(s)",
        "shards": all_shards, "worker_restarts": sup.restarts, "node_tag": node_tag, "incarnation": run_id,
        "config": config_to_dict(cfg),
    }
    error = sup.error(failure)
    if error:
        summary["error"] = error
    return summary


def main(argv=None) -> int:
    setup_logging()
    raise_on_interrupt()
    try:
        cfg = config_from_argv(argv)
        validate(cfg)
    except UsageError as e:
        log.error("%s", e)
        return 2
    try:
        summary = run(cfg)
    except LockedError as e:
        log.error("%s", e)
        return 2
    print(json.dumps(summary), flush=True)
    forget_handled_interrupt()
    if "error" in summary:
        log.error("%s", summary["error"])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
