"""`python -m c4fast.bench search`: playouts/s of the batched MCTS and of the graph search.

Setup: one core, uniform evaluator, empty 12x12 board with a forbidden cell (5, 6),
256 games x 800 playouts per move, reported for 1 and 8 leaves per game per step.
The evaluator's own time (returning constant arrays) is included; every leaf's planes
are encoded into a uint8 buffer (the dtype the inference server's shared memory carries).
"""

from __future__ import annotations

import time


from c4fast.config import SearchConfig
from c4fast.evaluators import UniformEvaluator
from c4fast.game import Game
from c4fast.mcts import BatchedMCTS, run_search

BENCH_BOARD = (12, 12, (5, 6))


def _mcts_rate(games: int, playouts: int, leaves: int, seed: int) -> dict:
    cfg = SearchConfig(leaves_per_step=leaves)
    mcts = BatchedMCTS(cfg, games, 12, 12, seed=seed, max_playouts=playouts)
    root = Game(*BENCH_BOARD).state
    ev = UniformEvaluator()
    planes = mcts.planes_buffer()
    # warm-up (compilation) on a tiny search
    for g in range(games):
        mcts.set_position(g, root)
        mcts.start_search(g, 2)
    run_search(mcts, ev, planes)
    for g in range(games):
        mcts.set_position(g, root)
        mcts.start_search(g, playouts, full=True)
    t0 = time.perf_counter()
    calls = 0
    evals = 0
    while not mcts.all_done():
        n = mcts.select(planes)
        if n:
            logits, wdl = ev.evaluate(planes[:n], mcts.leaf_positions(n))
            mcts.expand_and_backup(n, logits, wdl)
            evals += n
            calls += 1
    dt = time.perf_counter() - t0
    total = sum(mcts.root_playouts(g) for g in range(games))
    return {"playouts_per_s": round(total / dt), "playouts": int(total),
            "evaluator_leaves": int(evals), "mean_batch": round(evals / max(calls, 1), 1),
            "seconds": round(dt, 3)}


def bench_search(seconds: float, seed: int) -> dict:
    out: dict = {"bench": "search", "board": "12x12 forbidden (5,6)", "games": 256,
                 "playouts_per_move": 800, "evaluator": "uniform"}
    for leaves in (1, 8):
        r = _mcts_rate(256, 800, leaves, seed)
        out[f"leaves{leaves}"] = r
    out["playouts_per_s"] = out["leaves8"]["playouts_per_s"]
    try:
        from c4fast.mcgs import bench_mcgs
    except ImportError:
        pass
    else:
        out.update(bench_mcgs(seed))
    return out
