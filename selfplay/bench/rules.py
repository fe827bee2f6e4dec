"""Benchmarks of the c4fast hot paths; each prints one JSON line.

    python -m selfplay.bench.rules rules     # moves/s, sensible moves/s, perft nodes/s, first call
    python -m selfplay.bench.rules search    # playouts/s of the batched MCTS and of MCGS
    python -m selfplay.bench.rules bots      # choose() calls/s of the baseline bots
    python -m selfplay.bench.rules solver    # exact 6x7 solver positions/s on Pons's files
    python -m selfplay.bench.rules endgame   # budgeted endgame solve time by empty cells (EndgameConfig.max_empty)

Figures are for one core (Numba kernels are single-threaded). Every line is a JSON
object whose ``"bench"`` key names it (the convention of every c4fast benchmark;
``python -m selfplay.bench`` lists and runs them all).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from c4fast import bitboard as bb
from c4fast.config import SearchConfig
from c4fast.evaluators import MeteredEvaluator, UniformEvaluator
from c4fast.game import Game
from c4fast.mcts import BatchedMCTS, run_search
from c4fast.rollout import make_rng, playouts_batch


def _random_setups(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.zeros(n, dtype=bb.POSITION_DTYPE)
    for i in range(n):
        g = Game.random(rng)
        out[i] = g.state[0]
    return out


def _first_call_seconds() -> float:
    """Wall time of a fresh interpreter that imports c4fast and runs every rules kernel once."""
    code = (
        "import time; t=time.perf_counter(); import c4fast; "
        "g=c4fast.Game(9,9,(0,4)); g.play(4); g.legal_moves(); g.sensible_moves(); "
        "g.winning_cells(1); g.planes(); g.mirror(); c4fast.perft(g, 2); "
        "print(time.perf_counter()-t)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)  # warm cache
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip())


def bench_rules(seconds: float, seed: int) -> dict:
    setups = _random_setups(256, seed)
    counts = np.zeros(3, dtype=np.int64)
    playouts_batch(setups[:2], 10, make_rng(seed), False, counts)  # compile
    playouts_batch(setups[:2], 10, make_rng(seed), True, counts)
    out: dict = {"bench": "rules", "boards": "random Saiblo (9..12 x 9..12, forbidden cell)"}
    for name, sensible in (("moves_per_s", False), ("sensible_moves_per_s", True)):
        target = 200_000
        rng = make_rng(seed)
        while True:  # grow the run until it lasts `seconds`
            counts[:] = 0
            t0 = time.perf_counter()
            moves, games = playouts_batch(setups, target, rng, sensible, counts)
            dt = time.perf_counter() - t0
            if dt >= seconds:
                break
            target = int(target * max(2.0, 1.2 * seconds / max(dt, 1e-3)))
        out[name] = round(moves / dt)
        out[name.replace("moves_per_s", "games")] = int(games)
        out[name.replace("moves_per_s", "mean_game_length")] = round(moves / games, 2)
    from c4fast.perft import perft_kernel

    g = Game(9, 9, (0, 4))
    perft_kernel(g.state[0], 2)
    t0 = time.perf_counter()
    nodes = perft_kernel(g.state[0], 6)
    dt = time.perf_counter() - t0
    out["perft_nodes_per_s"] = round(nodes / dt)
    out["perft_9x9_f04_depth6"] = int(nodes)
    out["first_call_s"] = round(_first_call_seconds(), 3)
    return out


BENCH_BOARD = (12, 12, (5, 6))


def _mcts_rate(games: int, playouts: int, leaves: int, seed: int) -> dict:
    """Playouts/s of :func:`c4fast.mcts.run_search` (the one search loop) on the bench board."""
    cfg = SearchConfig(leaves_per_step=leaves)
    mcts = BatchedMCTS(cfg, games, 12, 12, seed=seed, max_playouts=playouts)
    root = Game(*BENCH_BOARD).state
    planes = mcts.planes_buffer()
    for g in range(games):  # warm-up (compilation) on a tiny search
        mcts.set_position(g, root)
        mcts.start_search(g, 2)
    run_search(mcts, UniformEvaluator(), planes)
    for g in range(games):
        mcts.set_position(g, root)
        mcts.start_search(g, playouts, full=True)
    ev = MeteredEvaluator(UniformEvaluator())
    t0 = time.perf_counter()
    run_search(mcts, ev, planes)
    dt = time.perf_counter() - t0
    total = sum(mcts.root_playouts(g) for g in range(games))
    return {"playouts_per_s": round(total / dt), "playouts": int(total),
            "evaluator_leaves": int(ev.leaves), "mean_batch": round(ev.leaves / max(ev.calls, 1), 1),
            "seconds": round(dt, 3)}


def bench_search(seconds: float, seed: int) -> dict:
    """Batched MCTS playouts/s (1 and 8 leaves per step) and MCGS playouts/s; uniform
    evaluator, 256 games x 800 playouts on an empty 12x12 board with forbidden cell (5, 6),
    planes encoded to uint8 as for the inference server."""
    from c4fast.mcgs import bench_mcgs

    out: dict = {"bench": "search", "board": "12x12 forbidden (5,6)", "games": 256,
                 "playouts_per_move": 800, "evaluator": "uniform"}
    for leaves in (1, 8):
        out[f"leaves{leaves}"] = _mcts_rate(256, 800, leaves, seed)
    out["playouts_per_s"] = out["leaves8"]["playouts_per_s"]
    out.update(bench_mcgs(seed))
    return out


def bench_bots(seconds: float = 1.0, seed: int = 0) -> dict:
    """choose() calls/s of each baseline bot on random positions; greedy vs random games/s."""
    from c4fast.players.bots import (AlphaBetaPlayer, GreedyPlayer, RandomPlayer, UCTPlayer, play_game,
                                     random_positions)

    positions = random_positions(64, seed)
    out: dict = {"bench": "bots", "positions": "random Saiblo setups after random moves"}
    makers = {"random": lambda: RandomPlayer(seed), "greedy": lambda: GreedyPlayer(seed),
              "uct:500": lambda: UCTPlayer(500, seed=seed), "uct:2000": lambda: UCTPlayer(2000, seed=seed),
              "alphabeta:0.1": lambda: AlphaBetaPlayer(0.1, seed=seed)}
    calls = {}
    for spec, make in makers.items():
        p = make()
        p.choose(positions[0])  # compile / load kernels
        n = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            g = positions[n % len(positions)]
            p.reset(g)
            p.choose(g)
            n += 1
        calls[spec] = round(n / (time.perf_counter() - t0), 1)
    out["choose_per_s"] = calls
    rng = np.random.default_rng(seed)
    greedy, rand = GreedyPlayer(seed), RandomPlayer(seed + 1)
    play_game(greedy, rand, Game.random(rng))
    games = 0
    wins = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        first_greedy = games % 2 == 0
        pair = (greedy, rand) if first_greedy else (rand, greedy)
        g = play_game(*pair, Game.random(rng))
        wins += g.result == (1 if first_greedy else 2)
        games += 1
    dt = time.perf_counter() - t0
    out["greedy_vs_random_games_per_s"] = round(games / dt, 1)
    out["greedy_vs_random_score"] = round(wins / games, 3)
    return out


def bench_solver(seconds: float, seed: int, files=None, limit: int | None = 200) -> dict:
    """Exact-solver positions/s and correctness on Pons's 6x7 files (the repository's copy)."""
    from c4fast.players import solver as sv

    files = files or [os.path.join(sv.PONS_DIR, n) for n in ("Test_L3_R1", "Test_L2_R1")]
    solver = sv.Solver()
    out: dict = {"bench": "solver", "files": {}}
    sv._warm_up(solver)
    for path in files:
        out["files"][os.path.basename(path)] = sv.bench_file(solver, path, limit)
    return out


def bench_endgame(limit: int = 150, cap_nodes: int = 3_000_000) -> dict:
    """Seconds of the net player's exact endgame solve (:class:`EndgameSolver`, cold table)
    by empty cells, on Pons's balanced 6x7 positions: median, 90th percentile, maximum,
    and how many finished within `cap_nodes`. Chooses ``EndgameConfig.max_empty``."""
    from c4fast.players import solver as sv
    from c4fast.players.endgame import EndgameSolver, empty_cells

    es = EndgameSolver(20)
    es.solve(sv.pons_game("4455443"), nodes=cap_nodes)  # compile outside the timings
    rows: dict = {}
    for name in ("Test_L1_R1", "Test_L2_R1", "Test_L2_R2"):
        for moves, _ in sv.read_pons_file(sv.PONS_DIR / name, limit=limit):
            g = sv.pons_game(moves)
            es.clear()
            t0 = time.perf_counter()
            res = es.solve(g, nodes=cap_nodes)
            rows.setdefault(empty_cells(g) // 4 * 4, []).append((time.perf_counter() - t0, res is not None))
    out: dict = {"bench": "endgame", "cap_nodes": cap_nodes, "by_empty": {}}
    for b in sorted(rows):
        ts = sorted(t for t, _ in rows[b])
        out["by_empty"][f"{b}..{b + 3}"] = {
            "positions": len(ts), "finished": sum(ok for _, ok in rows[b]),
            "median_s": round(ts[len(ts) // 2], 4), "p90_s": round(ts[int(0.9 * (len(ts) - 1))], 4),
            "max_s": round(ts[-1], 4)}
    return out


BENCHES = {"rules": lambda a: bench_rules(a.seconds, a.seed), "search": lambda a: bench_search(a.seconds, a.seed),
           "bots": lambda a: bench_bots(a.seconds, a.seed), "solver": lambda a: bench_solver(a.seconds, a.seed),
           "endgame": lambda a: bench_endgame()}


def emit(result: dict) -> None:
    """Print one benchmark result as a JSON line (stdout, flushed)."""
    print(json.dumps(result), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m selfplay.bench.rules", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=sorted(BENCHES), help="which benchmark")
    ap.add_argument("--seconds", type=float, default=2.0, help="minimum timed seconds per figure")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.seconds <= 0:
        ap.error("--seconds must be > 0")
    emit(BENCHES[args.what](args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
