"""`python -m selfplay.run`: multi-process self-play writing crash-safe HDF5 shards.

Starts one inference server per GPU (or one on the CPU with ``--gpus 0``) and W worker
processes; each worker plays G games at once through the batched MCTS, rotating over
the board sizes, and writes shards to ``--out``. Prints a status line every few seconds
and a final JSON summary. Ctrl-C stops cleanly (finished games are written).

Exit codes: 0 done, 1 failure while running (the server died, or failed or refused a
request: workers are not restarted then, the summary says why), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import sys
import time

import numpy as np

from c4fast.config import SearchConfig
from selfplay.interrupt import raise_on_interrupt
from selfplay.policy import SelfPlayConfig, parse_sizes


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m selfplay.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=0, help="GPUs to use, one server each (0: CPU server)")
    ap.add_argument("--workers", type=int, default=None,
                    help="worker processes (default: 2 on the CPU, usable cores - GPUs with GPUs)")
    ap.add_argument("--games-per-worker", type=int, default=None,
                    help="games each worker plays at once (default: 32 on the CPU, 256 on GPUs)")
    ap.add_argument("--model", default=None,
                    help="checkpoint file, or a directory followed for newer checkpoints "
                         "(default: a fresh net of --preset seeded with --seed)")
    ap.add_argument("--out", default="data/selfplay", help="directory for the shards (default data/selfplay)")
    ap.add_argument("--max-games", type=int, default=0, help="stop after this many games (0: no limit)")
    ap.add_argument("--max-samples", type=int, default=0, help="stop after this many samples (0: no limit)")
    ap.add_argument("--time", type=float, default=0.0, help="stop after this many seconds (0: no limit)")
    ap.add_argument("--preset", default=None,
                    help="network preset for a fresh net (default cpu_small; b3c128nbt with --gpus)")
    ap.add_argument("--seed", type=int, default=0, help="seed of games and of a fresh net (default 0)")
    ap.add_argument("--sizes", default="saiblo",
                    help="board sizes: 'saiblo' (the 16 sizes 9..12 x 9..12) or a list like 6x7,9x9")
    ap.add_argument("--no-forbidden", action="store_true", help="boards without a forbidden cell")
    ap.add_argument("--full-playouts", type=int, default=800, help="playouts of a full search (800)")
    ap.add_argument("--fast-playouts", type=int, default=160, help="playouts of a fast search (160)")
    ap.add_argument("--full-prob", type=float, default=0.25, help="probability of a full search (0.25)")
    ap.add_argument("--leaves", type=int, default=8, help="leaves per game per step (8)")
    ap.add_argument("--samples-per-shard", type=int, default=20000, help="samples per shard file (20000)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads of a CPU server (0: all cores)")
    ap.add_argument("--reload-interval", type=float, default=5.0,
                    help="seconds between checks for a newer checkpoint in --model DIR (5)")
    ap.add_argument("--status-every", type=float, default=5.0, help="seconds between status lines (5)")
    return ap


class UsageError(ValueError):
    pass


def default_preset(gpus: int) -> str:
    """Network preset of a fresh net: the GPU-sized b3c128nbt with GPUs, cpu_small without."""
    return "b3c128nbt" if gpus > 0 else "cpu_small"


def default_workers(gpus: int) -> int:
    """Worker processes: 2 on the CPU; with GPUs every usable core (CPU affinity, not
    os.cpu_count) but one per GPU server."""
    if gpus == 0:
        return 2
    return max(1, len(os.sched_getaffinity(0)) - gpus)


def validate(args) -> None:
    """Raise UsageError (exit code 2) for every bad flag, before anything is written."""
    for name in ("gpus", "max_games", "max_samples", "samples_per_shard", "threads"):
        if getattr(args, name) < 0:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    for name in ("workers", "games_per_worker"):
        v = getattr(args, name)
        if v is not None and v < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 1, got {v}")
    if args.time < 0 or args.status_every <= 0 or args.reload_interval <= 0:
        raise UsageError("--time must be >= 0, --status-every and --reload-interval > 0")
    if args.samples_per_shard < 1:
        raise UsageError("--samples-per-shard must be >= 1")
    try:
        args.size_list = parse_sizes(args.sizes)
        args.search = SearchConfig(full_playouts=args.full_playouts, fast_playouts=args.fast_playouts,
                                   full_probability=args.full_prob, leaves_per_step=args.leaves)
        args.policy = SelfPlayConfig(forbidden_cell=not args.no_forbidden)
    except ValueError as e:
        raise UsageError(str(e)) from None
    from nets.config import get_preset

    if args.preset is None:
        args.preset = default_preset(args.gpus)
    try:
        get_preset(args.preset)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.gpus > 0:
        import torch

        if not torch.cuda.is_available() or torch.cuda.device_count() < args.gpus:
            have = torch.cuda.device_count() if torch.cuda.is_available() else 0
            raise UsageError(f"--gpus {args.gpus} asked for, {have} CUDA device(s) available")
    if args.model is not None:
        from nets.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint

        if not os.path.exists(args.model):
            raise UsageError(f"--model {args.model!r} does not exist")
        path = latest_checkpoint(args.model) if os.path.isdir(args.model) else args.model
        if path is not None:
            try:
                load_checkpoint(path)
            except CheckpointError as e:
                raise UsageError(f"--model: {e}") from None
    # --out must be creatable and writable; create nothing if it is not
    out = os.path.abspath(args.out)
    parent = out
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"--out {args.out!r} is not writable")
    if os.path.exists(out):
        if not os.path.isdir(out) or not os.access(out, os.W_OK | os.X_OK):
            raise UsageError(f"--out {args.out!r} is not a writable directory")


def _fmt_status(elapsed, totals, srv, version) -> str:
    games, samples = totals["games"], totals["samples"]
    mean_len = totals["game_length_sum"] / games if games else 0.0
    batches, positions = srv
    fill = positions / batches if batches else 0.0
    return (f"[selfplay {elapsed:7.0f}s] games {games}  samples {samples} "
            f"({samples / max(elapsed, 1e-9):.1f}/s)  evals {positions / max(elapsed, 1e-9):.0f}/s  "
            f"mean length {mean_len:.1f}  server batch {fill:.0f}  model v{version}")


def run(args) -> dict:
    from nets import shm_queue as q
    from nets.server import ServerConfig, request_shutdown, start_server
    from selfplay.worker import SERVER_ERROR_EXIT, WorkerSpec, worker_main

    ctx = mp.get_context("spawn")
    os.makedirs(args.out, exist_ok=True)
    for name in os.listdir(args.out):  # leftovers of a killed writer are never shards
        if name.endswith(".h5.tmp"):
            os.remove(os.path.join(args.out, name))
    n_servers = max(1, args.gpus)
    workers = args.workers or default_workers(args.gpus)
    games = args.games_per_worker or (32 if args.gpus == 0 else 256)
    max_batch = games * args.leaves
    per_server = [[w for w in range(workers) if w % n_servers == s] for s in range(n_servers)]
    queues, servers = [], []
    for s in range(n_servers):
        sq = q.SharedQueue(ctx, max(1, len(per_server[s])), max_batch, 9)
        device = f"cuda:{s}" if args.gpus > 0 else "cpu"
        cfg = ServerConfig(device=device, model=args.model, preset=args.preset, seed=args.seed,
                           threads=args.threads if args.gpus == 0 else 0,
                           max_forward_batch=256 if args.gpus == 0 else max(max_batch, 1024),
                           reload_interval=args.reload_interval,
                           sizes=args.size_list if args.gpus > 0 else ())
        queues.append(sq)
        servers.append(start_server(ctx, sq.handles, cfg, name=f"c4fast-server-{s}"))
    stop = ctx.Event()
    stats_q = ctx.Queue()
    prefix = time.strftime("sp_%Y%m%d_%H%M%S")
    config_json = json.dumps({"search": args.search.to_dict(), "selfplay": args.policy.to_dict(),
                              "preset": args.preset, "model": args.model, "seed": args.seed})
    specs = []
    for w in range(workers):
        s = w % n_servers
        specs.append(WorkerSpec(index=w, slot=per_server[s].index(w), out_dir=args.out,
                                sizes=args.size_list, games_per_worker=games, search=args.search,
                                policy=args.policy, seed=args.seed, run_prefix=prefix,
                                samples_per_shard=args.samples_per_shard, config_json=config_json))

    def spawn(w):
        p = ctx.Process(target=worker_main, args=(specs[w], queues[w % n_servers].handles, stop, stats_q),
                        name=f"c4fast-worker-{w}", daemon=False)
        p.start()
        return p

    procs = [spawn(w) for w in range(workers)]
    worker_stats = {w: {} for w in range(workers)}
    banked = {w: {} for w in range(workers)}  # stats of earlier incarnations of a restarted worker
    errors: list[str] = []

    def handle(msg) -> None:
        """A worker's message: its running totals, or an error (fatal: see below)."""
        nonlocal failure
        kind, w, payload = msg
        if kind == "stats":
            worker_stats[w] = payload
        elif kind == "error":  # the inference server failed or refused: restarting can't help
            errors.append(f"worker {w}: {payload}")
            if failure is None:
                failure = f"worker {w} lost the inference server: {payload}"
            stop.set()

    t0 = time.monotonic()
    next_status = t0 + args.status_every
    failure = None
    restarts = 0

    def totals():
        keys = ("games", "samples", "moves", "evals", "playouts", "batches", "game_length_sum")
        return {k: sum(worker_stats[w].get(k, 0) + banked[w].get(k, 0) for w in worker_stats) for k in keys}

    def server_counts():
        b = p = 0
        for sq in queues:
            hdr = np.ndarray(q.GLOBAL_WORDS, np.int64, sq.shm.buf, 0)
            b += int(hdr[q.G_BATCHES])
            p += int(hdr[q.G_POSITIONS])
        return b, p

    def version():
        return int(np.ndarray(q.GLOBAL_WORDS, np.int64, queues[0].shm.buf, 0)[q.G_MODEL_VERSION])

    try:
        while True:
            try:
                handle(stats_q.get(timeout=0.2))
            except queue.Empty:
                pass
            now = time.monotonic()
            tot = totals()
            if not stop.is_set() and (
                (args.max_games and tot["games"] >= args.max_games)
                or (args.max_samples and tot["samples"] >= args.max_samples)
                or (args.time and now - t0 >= args.time)
            ):
                stop.set()
            for s, p in enumerate(servers):
                if not p.is_alive() and failure is None:
                    failure = f"inference server {s} (pid {p.pid}) exited with code {p.exitcode}"
                    stop.set()
            for w, p in enumerate(procs):
                if p.is_alive() or p.exitcode == 0:
                    continue
                if stop.is_set() or failure:
                    continue
                if p.exitcode == SERVER_ERROR_EXIT:  # its "error" message may still be queued
                    failure = f"worker {w} (pid {p.pid}) lost the inference server (exit code {p.exitcode})"
                    stop.set()
                    continue
                restarts += 1
                print(f"[selfplay] worker {w} (pid {p.pid}) died with code {p.exitcode}; "
                      f"its finished shards are kept, restarting it", file=sys.stderr, flush=True)
                for k, v in worker_stats[w].items():
                    banked[w][k] = banked[w].get(k, 0) + v
                worker_stats[w] = {}
                procs[w] = spawn(w)
            if now >= next_status:
                print(_fmt_status(now - t0, tot, server_counts(), version()), flush=True)
                next_status = now + args.status_every
            if stop.is_set() and all(not p.is_alive() for p in procs):
                break
    except KeyboardInterrupt:
        print("[selfplay] interrupted: stopping workers (finished games are written)", file=sys.stderr, flush=True)
    finally:
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
    elapsed = time.monotonic() - t0
    tot = totals()
    all_shards = sorted(os.path.join(args.out, f) for f in os.listdir(args.out)
                        if f.startswith(prefix) and f.endswith(".h5"))
    summary = {
        "games": tot["games"], "samples": tot["samples"], "moves": tot["moves"],
        "seconds": round(elapsed, 2),
        "samples_per_s": round(tot["samples"] / elapsed, 2),
        "moves_per_s": round(tot["moves"] / elapsed, 2),
        "evals_per_s": round(counts[1] / elapsed, 1),
        "playouts_per_s": round(tot["playouts"] / elapsed, 1),
        "mean_batch": round(counts[1] / counts[0], 1) if counts[0] else 0.0,
        "mean_game_length": round(tot["game_length_sum"] / tot["games"], 2) if tot["games"] else 0.0,
        "workers": workers, "games_per_worker": games, "servers": n_servers,
        "device": "cpu" if args.gpus == 0 else f"{args.gpus} GPU(s)",
        "shards": all_shards, "worker_restarts": restarts,
    }
    if failure or errors:
        summary["error"] = failure or errors[0]
    return summary


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    raise_on_interrupt()
    try:
        validate(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    summary = run(args)
    print(json.dumps(summary), flush=True)
    if "error" in summary:
        print(f"error: {summary['error']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
