"""Network-free evaluators: the contract every evaluator (network or not) fulfils.

``evaluate(planes, positions) -> (logits, wdl)``:

* ``planes``: float32 ``(B, NUM_PLANES, H, W)`` from :mod:`c4fast.encode`;
* ``positions``: the ``B`` POSITION_DTYPE records of the same leaves (network
  evaluators ignore them);
* ``logits``: float32 ``(B, H, W)`` policy logits over cells (only the landing cells
  of legal columns are read);
* ``wdl``: float32 ``(B, 3)`` probabilities of win, draw, loss for the side to move.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from c4fast import bitboard as bb
from c4fast.rollout import make_rng, playout


class UniformEvaluator:
    """Uniform policy and an even value (win = draw = loss = 1/3). Returns views of
    cached read-only arrays (no allocation per call)."""

    def __init__(self):
        self._logits = np.zeros((0, 0, 0), np.float32)
        self._wdl = np.zeros((0, 3), np.float32)

    def evaluate(self, planes: np.ndarray, positions: np.ndarray):
        b, _, h, w = planes.shape
        if self._logits.shape[0] < b or self._logits.shape[1:] != (h, w):
            self._logits = np.zeros((max(b, 1), h, w), np.float32)
            self._wdl = np.full((max(b, 1), 3), 1.0 / 3.0, np.float32)
            self._logits.flags.writeable = False
            self._wdl.flags.writeable = False
        return self._logits[:b], self._wdl[:b]


@njit(cache=True)
def _rollout_values(positions, rollouts, rng, sensible, wdl):
    work = np.empty(1, dtype=bb.POSITION_DTYPE)
    for i in range(positions.shape[0]):
        me = positions[i].ply % 2 + 1
        wins = 0
        draws = 0
        for _ in range(rollouts):
            bb.copy_into(positions[i], work[0])
            playout(work[0], rng, sensible)
            r = work[0].result
            if r == me:
                wins += 1
            elif r == bb.DRAW:
                draws += 1
        wdl[i, 0] = wins / rollouts
        wdl[i, 1] = draws / rollouts
        wdl[i, 2] = (rollouts - wins - draws) / rollouts


class RolloutEvaluator:
    """Uniform policy; value = outcome frequencies of random playouts from the leaf."""

    def __init__(self, rollouts: int = 1, seed: int = 0, sensible: bool = False):
        if rollouts < 1:
            raise ValueError(f"rollouts must be >= 1, got {rollouts}")
        self.rollouts = int(rollouts)
        self.sensible = bool(sensible)
        self.rng = make_rng(seed)

    def evaluate(self, planes: np.ndarray, positions: np.ndarray):
        b, _, h, w = planes.shape
        wdl = np.zeros((b, 3), np.float32)
        _rollout_values(positions, self.rollouts, self.rng, self.sensible, wdl)
        return np.zeros((b, h, w), np.float32), wdl
