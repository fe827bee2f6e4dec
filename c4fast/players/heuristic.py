"""The alpha-beta's static evaluation as evaluator help for a network's search.

:class:`HeuristicBlend` wraps any :class:`c4fast.protocols.Evaluator` and mixes the
static evaluation of :class:`c4fast.players.bots.AlphaBetaPlayer` (open twos and threes,
winning cells weighted by row parity, shadowed and stacked threats:
:func:`c4fast.players.solver._evaluate3`) into each leaf's win/draw/loss: with weight
``b`` and ``s = 1 / (1 + exp(-v / 100))`` (the alpha-beta player's own mapping of a value
``v`` to an expected score, side to move)::

    win' = (1 - b) * win + b * s,   draw' = (1 - b) * draw,   loss' = (1 - b) * loss + b * (1 - s)

The policy logits pass through unchanged. Torch-free (layer c4fast).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from c4fast import bitboard as bb
from c4fast.players import solver as sv

#: alpha-beta value units per logit of the expected score (AlphaBetaPlayer's mapping)
VALUE_SCALE = 100.0


@njit(cache=True)
def _heuristic_scores(positions, geo, out):
    """out[i]: expected score (0..1) of the static evaluation for the side to move."""
    for i in range(positions.shape[0]):
        p = positions[i].ply & 1
        st = positions[i].stones[p]
        m = positions[i].mask
        v = sv._evaluate3(st[0], st[1], st[2], m[0], m[1], m[2], np.int64(positions[i].ply), geo)
        out[i] = 1.0 / (1.0 + np.exp(-v / VALUE_SCALE))


def heuristic_scores(positions: np.ndarray) -> np.ndarray:
    """Expected score (float64, 0..1, side to move) of the static evaluation of each
    ``POSITION_DTYPE`` record; the records must share one board (size, forbidden cell)."""
    out = np.empty(len(positions))
    if len(positions):
        r = positions[0]
        fr, fc = int(r["forbidden"][0]), int(r["forbidden"][1])
        geo = sv.geometry3(int(r["height"]), int(r["width"]), None if fr == bb.NO_CELL else (fr, fc))
        _heuristic_scores(positions, geo, out)
    return out


class HeuristicBlend:
    """`inner`'s evaluation with the static evaluation mixed into its value at `weight`
    (0..1; see the module docstring). Fulfils :class:`c4fast.protocols.Evaluator`."""

    def __init__(self, inner, weight: float):
        if not (isinstance(weight, (int, float)) and 0.0 <= weight <= 1.0):
            raise ValueError(f"blend weight must be in 0..1, got {weight!r}")
        self.inner = inner
        self.weight = float(weight)

    def evaluate(self, planes: np.ndarray, positions: np.ndarray):
        logits, wdl = self.inner.evaluate(planes, positions)
        s = heuristic_scores(positions)
        b = self.weight
        out = np.empty((len(s), 3), np.float32)
        out[:, 0] = (1 - b) * wdl[:, 0] + b * s
        out[:, 1] = (1 - b) * wdl[:, 1]
        out[:, 2] = (1 - b) * wdl[:, 2] + b * (1 - s)
        return logits, out
