"""Benchmarks of the c4fast hot paths; each prints one JSON line.

    python -m c4fast.bench rules     # moves/s, sensible moves/s, perft nodes/s
    python -m c4fast.bench search    # playouts/s of the batched MCTS (see c4fast.mcts)

Figures are for one core (Numba kernels are single-threaded).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np

from c4fast import bitboard as bb
from c4fast.game import Game
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m c4fast.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["rules", "search"], help="which benchmark")
    ap.add_argument("--seconds", type=float, default=2.0, help="minimum timed seconds per figure")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.seconds <= 0:
        ap.error("--seconds must be > 0")
    if args.what == "rules":
        res = bench_rules(args.seconds, args.seed)
    else:
        from c4fast.search_bench import bench_search

        res = bench_search(args.seconds, args.seed)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
