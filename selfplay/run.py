"""`python -m selfplay.run`: multi-process self-play writing crash-safe HDF5 shards.

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
import os
import queue
import sys
import time

import numpy as np

from c4fast.cli import ConfigError, add_config_arguments, config_from_args, config_to_dict, load_config
from c4fast.encode import NUM_PLANES
from c4fast.runtime import (DirLock, LockedError, atomic_write_json, check_interrupt, forget_handled_interrupt,
                            ignore_interrupts, raise_on_interrupt, remove_stale_temps, setup_logging, start_resource_tracker)
from selfplay.config import RunConfig, default_node_tag

log = logging.getLogger("selfplay.run")


def build_parser() -> argparse.ArgumentParser:
    """Flags derived from :class:`RunConfig` (and its nested search / self-play configs)."""
    ap = argparse.ArgumentParser(prog="python -m selfplay.run", description=__doc__,
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


def default_workers(gpus: int) -> int:
    """Worker processes: 2 on the CPU; with GPUs every usable core (CPU affinity, not
    os.cpu_count) but one per GPU server."""
    if gpus == 0:
        return 2
    return max(1, len(os.sched_getaffinity(0)) - gpus)


def run(cfg: RunConfig) -> dict:
    """Run self-play as `cfg` says; returns the JSON summary (with ``error`` on failure)."""
    from nets import shm_queue as q
    from nets.server import ServerConfig, request_shutdown, start_server
    from selfplay.worker import SERVER_ERROR_EXIT, WorkerSpec, worker_main

    ctx = mp.get_context("spawn")
    start_resource_tracker()
    os.makedirs(cfg.out, exist_ok=True)
    lock = DirLock(cfg.out, "selfplay.run")  # one run per shard directory (LockedError otherwise)
    remove_stale_temps(cfg.out)  # under the lock, leftovers of a killed writer are never shards
    node_tag = cfg.node_tag or default_node_tag()
    # this invocation's identity on the node: seeds, game ids and shard names derive from it
    run_id = cfg.incarnation if cfg.incarnation is not None else int.from_bytes(os.urandom(4), "little")
    n_servers = max(1, cfg.gpus)
    workers = cfg.workers or default_workers(cfg.gpus)
    games = cfg.games_per_worker or (32 if cfg.gpus == 0 else 256)
    max_batch = games * cfg.search.leaves_per_step
    per_server = [[w for w in range(workers) if w % n_servers == s] for s in range(n_servers)]
    queues, servers = [], []
    for s in range(n_servers):
        sq = q.SharedQueue(ctx, max(1, len(per_server[s])), max_batch, NUM_PLANES)
        device = f"cuda:{s}" if cfg.gpus > 0 else "cpu"
        server_cfg = ServerConfig(device=device, model=cfg.model, preset=cfg.net_preset, seed=cfg.seed,
                                  threads=cfg.threads if cfg.gpus == 0 else 0,
                                  max_forward_batch=256 if cfg.gpus == 0 else max(max_batch, 1024),
                                  reload_interval=cfg.reload_interval, forward=cfg.forward,
                                  sizes=cfg.size_list if cfg.gpus > 0 else ())
        queues.append(sq)
        servers.append(start_server(ctx, sq.handles, server_cfg, name=f"c4fast-server-{s}"))
    stop = ctx.Event()
    stats_q = ctx.Queue()
    prefix = time.strftime("sp_%Y%m%d_%H%M%S")
    config_json = json.dumps(config_to_dict(cfg))
    specs = []
    for w in range(workers):
        s = w % n_servers
        specs.append(WorkerSpec(index=w, slot=per_server[s].index(w), out_dir=cfg.out,
                                sizes=cfg.size_list, games_per_worker=games, search=cfg.search,
                                policy=cfg.selfplay, seed=cfg.seed, run_prefix=prefix,
                                samples_per_shard=cfg.samples_per_shard, config_json=config_json,
                                node_tag=node_tag, incarnation=run_id, parent_pid=os.getpid(),
                                shard_seconds=cfg.shard_seconds, workers=workers))

    def spawn(w):
        p = ctx.Process(target=worker_main, args=(specs[w], queues[w % n_servers].handles, stop, stats_q),
                        name=f"c4fast-worker-{w}", daemon=False)
        p.start()
        started_at[w] = time.monotonic()
        return p

    started_at: dict[int, float] = {}
    procs = [spawn(w) for w in range(workers)]
    inc_stats: dict[tuple[int, int], dict] = {}  # (worker, restart) -> that incarnation's totals
    errors: list[str] = []
    failed: list[str] = []  # the errors of worker incarnations that failed (e.g. could not write)
    restart_at: dict[int, float] = {}  # worker -> when its back-off ends

    def handle(msg) -> None:
        """A worker's message: its running totals, or an error."""
        kind, w, incarnation, payload = msg
        if kind == "stats":
            inc_stats[(w, incarnation)] = payload
        elif kind == "error":  # the inference server failed or refused: fatal (see below)
            errors.append(f"worker {w}: {payload}")
        elif kind == "failed":  # an incarnation failed (it is restarted; the run will end with an error)
            failed.append(f"worker {w} (restart {incarnation}) failed: {payload}")
            log.error("%s", failed[-1])

    t0 = time.monotonic()
    next_status = t0 + cfg.status_every
    failure = None
    restarts = 0
    quick_failures = {w: 0 for w in range(workers)}

    def totals():
        keys = ("games", "samples", "moves", "evals", "playouts", "batches", "game_length_sum", "written_games",
                "written_samples")
        return {k: sum(st.get(k, 0) for st in inc_stats.values()) for k in keys}

    def server_counts():
        """(forward batches, positions, FLOPs, forward ns) summed over the servers."""
        c = [0, 0, 0, 0]
        for sq in queues:
            hdr = np.ndarray(q.GLOBAL_WORDS, np.int64, sq.shm.buf, 0)
            for i, k in enumerate((q.G_BATCHES, q.G_POSITIONS, q.G_FLOPS, q.G_BUSY_NS)):
                c[i] += int(hdr[k])
        return c

    def version():
        return int(np.ndarray(q.GLOBAL_WORDS, np.int64, queues[0].shm.buf, 0)[q.G_MODEL_VERSION])

    try:
        while True:
            check_interrupt()
            try:
                handle(stats_q.get(timeout=0.2))
            except queue.Empty:
                pass
            now = time.monotonic()
            tot = totals()
            if not stop.is_set() and (
                (cfg.max_games and tot["games"] >= cfg.max_games)
                or (cfg.max_samples and tot["samples"] >= cfg.max_samples)
                or (cfg.time and now - t0 >= cfg.time)
            ):
                stop.set()
            for s, p in enumerate(servers):
                if not p.is_alive() and failure is None:
                    failure = f"inference server {s} (pid {p.pid}) exited with code {p.exitcode}"
                    stop.set()
            for w, p in enumerate(procs):
                if p.is_alive() or p.exitcode == 0 or stop.is_set() or failure:
                    continue
                if w not in restart_at:  # just died: decide on a restart with back-off
                    spec = specs[w]
                    lived = now - started_at[w]
                    quick_failures[w] = quick_failures[w] + 1 if lived < 60 else 0
                    if p.exitcode == SERVER_ERROR_EXIT:  # the server failed or refused: restarting can't help
                        failure = (f"worker {w} (pid {p.pid}) lost the inference server"
                                   + (f": {errors[-1]}" if errors else f" (exit code {p.exitcode})"))
                    elif spec.restart >= cfg.max_restarts:
                        failure = (f"worker {w} died {spec.restart + 1} times (last exit code {p.exitcode}); "
                                   f"giving up (--max-restarts {cfg.max_restarts})")
                    if failure:
                        log.error("%s", failure)
                        stop.set()
                        continue
                    delay = min(30.0, 0.5 * 2 ** quick_failures[w]) if quick_failures[w] else 0.0
                    restart_at[w] = now + delay
                    log.warning("worker %d (pid %s, incarnation %d) died with code %s; its finished shards "
                                "are kept; restarting it in %.1f s", w, p.pid, spec.restart, p.exitcode, delay)
                if now >= restart_at[w]:
                    del restart_at[w]
                    restarts += 1
                    specs[w] = dataclasses.replace(specs[w], restart=specs[w].restart + 1)
                    procs[w] = spawn(w)
            if now >= next_status:
                counts = server_counts()
                log.info(_fmt_status(now - t0, tot, counts[:2], version()))
                if cfg.status_file:
                    el = max(now - t0, 1e-9)
                    atomic_write_json(cfg.status_file, {
                        "seconds": round(el, 1), "games": tot["games"], "samples": tot["samples"],
                        "samples_per_s": round(tot["samples"] / el, 2), "evals_per_s": round(counts[1] / el, 1),
                        "model_version": version(), "worker_restarts": restarts,
                        "worker_pids": [p.pid for p in procs], "server_pids": [p.pid for p in servers]})
                next_status = now + cfg.status_every
            if stop.is_set() and all(not p.is_alive() for p in procs):
                break
    except KeyboardInterrupt:
        log.info("interrupted: stopping workers (finished games are written)")
    finally:
        ignore_interrupts()  # a second signal must not cut the clean-up short
        stop.set()
        for p in procs:
            p.join(120)
            if p.is_alive():
                p.kill()
        while True:
            try:
                handle(stats_q.get_nowait())
            except queue.Empty:
                break
        counts = server_counts()
        for sq in queues:
            try:
                request_shutdown(sq.handles)
            except Exception:  # noqa: BLE001
                pass
        for p in servers:
            p.join(10)
            if p.is_alive():
                p.kill()
        for sq in queues:
            sq.close()
        lock.release()
    elapsed = time.monotonic() - t0
    tot = totals()
    try:
        all_shards = sorted(os.path.join(cfg.out, f) for f in os.listdir(cfg.out)
                            if f.startswith(prefix) and f"_{node_tag}_i{run_id}_" in f and f.endswith(".h5"))
    except OSError as e:  # the directory went away under the run
        all_shards = []
        failure = failure or f"--out {cfg.out!r} is gone: {e.strerror}"
    written = (tot["written_games"], tot["written_samples"])  # as the workers wrote them (a node's
    # spool may have handed some shards on already)
    summary = {
        # what the shards hold (games played but lost with a failed write are not counted)
        "games": written[0], "samples": written[1], "games_played": tot["games"], "moves": tot["moves"],
        "seconds": round(elapsed, 2),
        "samples_per_s": round(tot["samples"] / elapsed, 2),
        "moves_per_s": round(tot["moves"] / elapsed, 2),
        "evals_per_s": round(counts[1] / elapsed, 1),
        "playouts_per_s": round(tot["playouts"] / elapsed, 1),
        "mean_batch": round(counts[1] / counts[0], 1) if counts[0] else 0.0,
        # network arithmetic: FLOPs per evaluation (nets.fused.flops_per_eval, mean over the
        # positions served, so over the sizes played), achieved GFLOP/s over the wall time and
        # inside the server's forward calls, and the share of the wall time spent in them
        "flops_per_eval": round(counts[2] / counts[1]) if counts[1] else 0,
        "net_gflops": float(f"{counts[2] / elapsed / 1e9:.4g}"),
        "net_gflops_in_forward": float(f"{counts[2] / (counts[3] / 1e9) / 1e9:.4g}") if counts[3] else 0.0,
        "server_busy": round(counts[3] / 1e9 / elapsed / n_servers, 3),
        "mean_game_length": round(tot["game_length_sum"] / tot["games"], 2) if tot["games"] else 0.0,
        "workers": workers, "games_per_worker": games, "servers": n_servers,
        "device": "cpu" if cfg.gpus == 0 else f"{cfg.gpus} GPU(s)",
        "shards": all_shards, "worker_restarts": restarts, "node_tag": node_tag, "incarnation": run_id,
        "config": config_to_dict(cfg),
    }
    if failure or errors or failed:
        summary["error"] = failure or (errors[0] if errors else failed[-1])
        if failure and failed and failed[-1] not in failure:
            summary["error"] += f"; last worker error: {failed[-1]}"
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
