"""`python -m nets.bench`: network and inference-server figures, one JSON line each.

* model lines (from :mod:`nets.bench_model`): evals/s by preset, board size and batch on
  the CPU with 2 threads, and the torch-free numpy forward pass;
* server lines: round-trip latency and throughput through the shared-memory queue with
  a no-op model, and a real model through the server vs a direct in-process call;
* GPU lines when CUDA is available: eager vs CUDA graphs, fp32 vs bf16, server path
  (the full GPU acceptance check with self-play and trainer figures is
  ``python -m nets.gpucheck``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time

import numpy as np
import torch

import c4fast
from nets import shm_queue as q
from nets.bench_model import _time
from nets.server import ServerConfig, load_model, request_shutdown, start_server


def _emit(d: dict) -> None:
    print(json.dumps(d), flush=True)


def bench_server(cfg: ServerConfig, label: str, batches, size=(12, 12), seconds=1.0, clients=1):
    ctx = mp.get_context("spawn")
    max_batch = max(batches)
    sq = q.SharedQueue(ctx, clients, max_batch, c4fast.NUM_PLANES)
    proc = start_server(ctx, sq.handles, cfg)
    try:
        c = q.InferenceClient(sq.handles, 0)
        h, w = size
        rng = np.random.default_rng(0)
        for b in batches:
            x = (rng.random((b, c4fast.NUM_PLANES, h, w)) < 0.3).astype(np.uint8)
            buf = c.planes_buffer(h, w)[:b]
            buf[...] = x
            n, dt = _time(lambda: c.evaluate(buf), seconds)
            _emit({"bench": "server", "model": label, "device": cfg.device, "board": f"{h}x{w}",
                   "batch": b, "round_trip_us": round(dt / n * 1e6, 1),
                   "evals_per_s": round(n * b / dt)})
        c.close()
    finally:
        request_shutdown(sq.handles)
        proc.join(10)
        if proc.is_alive():
            proc.kill()
        sq.close()


def bench_direct(cfg: ServerConfig, label: str, batches, size=(12, 12), seconds=1.0):
    device = torch.device(cfg.device)
    model, _, _ = load_model(cfg, device)
    h, w = size
    rng = np.random.default_rng(0)
    for b in batches:
        x = (rng.random((b, c4fast.NUM_PLANES, h, w)) < 0.3).astype(np.uint8)

        def call():
            with torch.inference_mode():
                pol, val = model(torch.from_numpy(x).to(device).float())
                return pol.cpu().numpy(), torch.softmax(val, 1).cpu().numpy()

        n, dt = _time(call, seconds)
        _emit({"bench": "direct", "model": label, "device": cfg.device, "board": f"{h}x{w}",
               "batch": b, "call_us": round(dt / n * 1e6, 1), "evals_per_s": round(n * b / dt)})


def bench_search_share(preset: str = "cpu_small", games: int = 64, playouts: int = 200,
                       size=(12, 12), threads: int = 2) -> dict:
    """Share of self-play time in the search vs the evaluator: BatchedMCTS with a real net
    evaluated in-process (one core for the search, `threads` for torch)."""
    from c4fast.config import SearchConfig
    from c4fast.game import Game
    from c4fast.mcts import BatchedMCTS
    from nets.config import get_preset
    from nets.evaluator import TorchEvaluator
    from nets.model import build_model

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    ev = TorchEvaluator(build_model(get_preset(preset)))
    h, w = size
    mcts = BatchedMCTS(SearchConfig(), games, h, w, seed=0, max_playouts=playouts)
    planes = mcts.planes_buffer()
    for g in range(games):
        mcts.set_position(g, Game(h, w, (h // 2, w // 2)).state)
        mcts.start_search(g, 2, full=True)
    while not mcts.all_done():  # warm-up: compile and first torch calls
        n = mcts.select(planes)
        if n:
            mcts.expand_and_backup(n, *ev.evaluate(planes[:n], None))
    for g in range(games):
        mcts.set_position(g, Game(h, w, (h // 2, w // 2)).state)
        mcts.start_search(g, playouts, full=True)
    t_search = t_eval = 0.0
    evals = 0
    while not mcts.all_done():
        t0 = time.perf_counter()
        n = mcts.select(planes)
        t1 = time.perf_counter()
        if n:
            logits, wdl = ev.evaluate(planes[:n], None)
            t2 = time.perf_counter()
            mcts.expand_and_backup(n, logits, wdl)
            t3 = time.perf_counter()
            t_search += (t1 - t0) + (t3 - t2)
            t_eval += t2 - t1
            evals += n
        else:
            t_search += t1 - t0
    total = t_search + t_eval
    return {"bench": "search_share", "preset": preset, "board": f"{h}x{w}", "games": games,
            "playouts": playouts, "evals": evals, "search_share": round(t_search / total, 4),
            "evaluator_share": round(t_eval / total, 4), "seconds": round(total, 2),
            "evals_per_s": round(evals / total, 1)}


def bench_gpu(seconds: float):
    """Eager vs CUDA graph, fp32 vs bf16, and the server path, for b3c128nbt on 12x12."""
    for precision in ("fp32", "bf16"):
        for graphs in (False, True):
            cfg = ServerConfig(device="cuda", preset="b3c128nbt", precision=precision,
                               cuda_graphs=graphs, max_forward_batch=8192, sizes=((12, 12),))
            bench_server(cfg, f"b3c128nbt {precision} {'graphs' if graphs else 'eager'}",
                         [256, 1024, 4096], seconds=seconds)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nets.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skip-model", action="store_true", help="skip the per-preset model lines")
    ap.add_argument("--seconds", type=float, default=1.0, help="timed seconds per figure")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    args = ap.parse_args(argv)
    if args.seconds <= 0:
        ap.error("--seconds must be > 0")
    if args.threads < 1:
        ap.error("--threads must be >= 1")
    torch.set_num_threads(args.threads)
    if not args.skip_model:
        from nets import bench_model

        bench_model.main(["--seconds", str(min(args.seconds, 0.5))])
    _emit(bench_search_share(threads=args.threads))
    noop = ServerConfig(noop=True, threads=args.threads)
    bench_server(noop, "noop", [1, 64, 2048], seconds=args.seconds)
    small = ServerConfig(preset="cpu_small", threads=args.threads)
    bench_server(small, "cpu_small", [1, 256, 1024], seconds=args.seconds)
    bench_direct(small, "cpu_small", [1, 256, 1024], seconds=args.seconds)
    if torch.cuda.is_available():
        bench_gpu(args.seconds)
    else:
        _emit({"bench": "gpu", "available": False, "note": "no CUDA device: GPU figures skipped"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
