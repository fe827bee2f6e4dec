"""Perft: count the move sequences of an exact length (a move-generator checksum).

``perft(game, d)`` is the number of sequences of exactly ``d`` legal moves from
``game``; a line whose game ends before ``d`` moves contributes nothing deeper.
``perft(game, 0) == 1``.

Command line::

    python -m c4fast.perft --height 9 --width 9 --forbidden 0,4 --depth 6
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from numba import njit

from c4fast import bitboard as bb
from c4fast.game import Game


@njit(cache=True)
def perft_kernel(root, depth):
    """Perft of record `root` by an explicit-stack depth-first walk (no recursion)."""
    if depth == 0:
        return 1
    if root.result != bb.RUNNING:
        return 0
    stack = np.empty(depth, dtype=bb.POSITION_DTYPE)
    todo = np.zeros(depth, dtype=np.int64)  # column mask still to try at each level
    bb.copy_into(root, stack[0])
    todo[0] = bb.legal_columns(stack[0])
    level = 0
    total = 0
    while level >= 0:
        if level == depth - 1:
            # bulk count: every legal move completes a sequence of exactly `depth`
            total += bb.popcount16(todo[level])
            level -= 1
            continue
        m = todo[level]
        if m == 0:
            level -= 1
            continue
        c = bb.nth_set_bit(m, 0)
        todo[level] = m & (m - 1)
        child = stack[level + 1]
        bb.copy_into(stack[level], child)
        bb.play(child, c)
        todo[level + 1] = bb.legal_columns(child)  # 0 when the game ended
        level += 1
    return total


def perft(game: Game, depth: int) -> int:
    """Number of sequences of exactly `depth` legal moves from `game`."""
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 0:
        raise ValueError(f"depth must be a non-negative integer, got {depth!r}")
    return int(perft_kernel(game.state[0], int(depth)))


def _parse_cell(text: str) -> tuple[int, int] | None:
    if text.lower() in ("", "none"):
        return None
    try:
        r, c = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected ROW,COL (row 0 = bottom), got {text!r}") from None
    return r, c


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m c4fast.perft",
        description="Count move sequences of exactly DEPTH moves (prints one JSON line).",
    )
    ap.add_argument("--height", type=int, default=6, help="rows, 4..12 (default 6)")
    ap.add_argument("--width", type=int, default=7, help="columns, 4..12 (default 7)")
    ap.add_argument("--forbidden", type=_parse_cell, default=None,
                    help="forbidden cell ROW,COL with row 0 at the bottom (default: none)")
    ap.add_argument("--moves", default="", help="columns already played, e.g. 3,3,4 (0-based)")
    ap.add_argument("--depth", type=int, required=True, help="sequence length, >= 0")
    args = ap.parse_args(argv)
    try:
        moves = [int(x) for x in args.moves.split(",") if x.strip()]
        game = Game.from_moves(args.height, args.width, args.forbidden, moves)
        if args.depth < 0:
            raise ValueError(f"--depth must be >= 0, got {args.depth}")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    n = perft(game, args.depth)
    dt = time.perf_counter() - t0
    print(json.dumps({"height": args.height, "width": args.width,
                      "forbidden": args.forbidden, "moves": moves, "depth": args.depth,
                      "perft": n, "seconds": round(dt, 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
