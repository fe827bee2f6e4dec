"""Exact endgame solving under a budget, for players that search otherwise (the net player).

:class:`EndgameSolver` runs the multi-word alpha-beta engine of
:mod:`c4fast.players.solver` to the end of the game (exact on every board size, 4..12)
from the root, under a node budget or a deadline, and either returns the exact result
(the optimal columns in Pons's sense, fastest win / slowest loss, and what is known of
every column) or ``None`` when the budget ran out. Under a deadline it runs rounds with
growing node budgets (the first small, the next ones sized from the measured nodes per
second), keeping the transposition table between rounds, so an abandoned round costs at
most the time it was given. Values are for the side to move.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from c4fast import bitboard as bb
from c4fast.game import Game
from c4fast.players import solver as sv

#: node budget of the first round under a deadline (sizes the nodes-per-second estimate)
FIRST_ROUND_NODES = 20_000


class EndgameResult(NamedTuple):
    score: int  # Pons score of the position for the side to move (> 0 win, 0 draw, < 0 loss)
    best: list[int]  # the optimal columns (all of them)
    proven: dict[int, str]  # {column: 'win' | 'draw' | 'loss'} where known, side to move
    nodes: int  # nodes searched (all rounds)


def empty_cells(game: Game) -> int:
    return game.height * game.width - (game.forbidden is not None) - game.ply


def score_result(score: int, ply: int, cells: int) -> tuple[int, int]:
    """The exact result of a Pons `score` (side to move, :mod:`c4fast.players.solver`'s
    convention) of a position with `ply` stones on a board of `cells` playable cells:
    ``(outcome, plies)``, outcome 0 win, 1 draw, 2 loss for the side to move (the shards'
    encoding) and plies the number of moves to the end of the game under perfect play
    (the fastest win, the slowest loss; a draw fills the board), the last move included.

    A win whose last stone is played with ``n`` stones on the board scores
    ``(cells + 1 - n) // 2``; of the two ``n`` with that score the one of the winner's
    parity (the side to move's is ``ply``'s) is meant, and ``plies = n - ply + 1``."""
    if not 0 <= ply < cells:
        raise ValueError(f"ply {ply} outside 0..{cells - 1}")
    if score == 0:
        return 1, cells - ply
    s = abs(score)
    mover = ply if score > 0 else ply + 1  # parity of the stone count when the winner moves
    n = cells + 1 - 2 * s
    if (n - mover) % 2:
        n -= 1
    if not ply <= n < cells:
        raise ValueError(f"score {score} is impossible at ply {ply} of {cells} cells")
    return (0 if score > 0 else 2), n - ply + 1


def _verdict(v: int) -> str:
    return "win" if v > 0 else ("loss" if v < 0 else "draw")


class EndgameSolver:
    """Budgeted exact solver; its transposition table (2**tt_log2 entries, 16 bytes each)
    lives across calls (keys are Zobrist hashes, which include the board setup)."""

    def __init__(self, tt_log2: int = 20):
        self._ttk = np.zeros(1 << tt_log2, np.uint64)
        self._ttd = np.zeros(1 << tt_log2, np.int64)
        self._buf = np.zeros((bb.MAX_SIZE * bb.MAX_SIZE + 2, sv.BUF_STRIDE), np.int64)
        self._stats = np.zeros(4, np.int64)
        self._vals = np.zeros(bb.MAX_SIZE, np.int64)
        self._exact = np.zeros(bb.MAX_SIZE, np.int64)

    def clear(self) -> None:
        self._ttk[:] = 0
        self._ttd[:] = 0

    def solve(self, game: Game, nodes: int | None = None,
              seconds: float | None = None) -> EndgameResult | None:
        """The exact result of running `game`, or None if `nodes` (one round) or `seconds`
        (rounds until the deadline) ran out first. Give exactly one of the two."""
        if (nodes is None) == (seconds is None):
            raise ValueError("give exactly one of nodes and seconds")
        if game.result is not None:
            raise ValueError("the game is over: nothing to solve")
        cells = game.height * game.width - (game.forbidden is not None)
        n = game.ply
        legal = game.legal_moves()
        wins = []
        for c in legal:
            g2 = game.copy()
            g2.play(c)
            if g2.result == game.to_move:
                wins.append(c)
        if wins:  # the engine's root assumes no immediate win
            return EndgameResult((cells + 1 - n) // 2, wins, {c: "win" for c in wins}, 0)
        geo = sv.geometry3(game.height, game.width, game.forbidden)
        words = sv.record_to_words3(game.state[0])
        t0 = time.perf_counter()
        budget = int(nodes) if nodes is not None else FIRST_ROUND_NODES
        total = 0
        while True:
            self._stats[:] = 0
            self._stats[1] = budget
            sv._root3(*words, np.int64(sv.UNLIMITED), geo, self._ttk, self._ttd, self._buf,
                      self._stats, self._vals, self._exact)
            total += int(self._stats[0])
            if not self._stats[2]:
                break
            if seconds is None:
                return None
            elapsed = time.perf_counter() - t0
            remaining = seconds - elapsed
            if remaining <= 0.002:
                return None
            rate = total / max(elapsed, 1e-6)
            budget = max(FIRST_ROUND_NODES, int(0.9 * rate * remaining))
        vals = {c: int(self._vals[c]) for c in legal}
        best_v = max(vals.values())
        best = [c for c in legal if self._exact[c] == 1 and vals[c] == best_v]
        proven = {}
        for c in legal:
            v = vals[c]
            if self._exact[c] == 1:
                proven[c] = _verdict(v)
            elif v < 0:  # an upper bound below a draw: a loss
                proven[c] = "loss"
        return EndgameResult(int(sv.value_to_pons(best_v)), best, proven, total)
