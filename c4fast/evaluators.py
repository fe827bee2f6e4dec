"""Network-free evaluators and the small helpers every evaluator and player shares.

The evaluator contract is :class:`c4fast.protocols.Evaluator`. Here: the uniform and
rollout evaluators, a metering wrapper for benchmarks, and the two conversions written
once for the whole code base: column -> landing cell (:func:`landing_row`,
:func:`column_plane`) and logits -> probabilities (:func:`column_probabilities`,
:func:`softmax_rows`).
"""

from __future__ import annotations

import time

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


class MeteredEvaluator:
    """Wraps an evaluator and counts its calls, leaves and seconds (for benchmarks).

    ``seconds`` is wall time spent inside the wrapped ``evaluate``; the rest of a search's
    time is the search itself.
    """

    def __init__(self, inner):
        self.inner = inner
        self.calls = 0
        self.leaves = 0
        self.seconds = 0.0

    def evaluate(self, planes: np.ndarray, positions: np.ndarray):
        t0 = time.perf_counter()
        out = self.inner.evaluate(planes, positions)
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        self.leaves += planes.shape[0]
        return out


def column_probabilities(logits: np.ndarray, record, cols) -> np.ndarray:
    """Softmax over `cols` of the policy logits ``(H, W)`` at each column's landing cell.

    `record` is the position's ``POSITION_DTYPE`` record; returns float64 ``(len(cols),)``.
    """
    scores = np.array([logits[landing_row(record, c), c] for c in cols], np.float64)
    p = np.exp(scores - scores.max())
    return p / p.sum()


def landing_row(record, col: int) -> int:
    """The row (0 = bottom) a stone dropped into `col` lands on (the forbidden cell hopped)."""
    return int(record["top"][col])


def column_plane(values, record, height: int, width: int, dtype=np.float32) -> np.ndarray:
    """An ``(H, W)`` plane holding ``values[c]`` at the landing cell of each column with a
    nonzero value (the policy-target layout of shards and the net's policy head)."""
    out = np.zeros((height, width), dtype)
    for c in range(width):
        if values[c] > 0:
            out[landing_row(record, c), c] = values[c]
    return out


def softmax_rows(x: np.ndarray) -> np.ndarray:
    """Row-wise softmax of a ``(B, K)`` array, as float32 (e.g. WDL logits -> probabilities)."""
    v = x - x.max(axis=1, keepdims=True)
    e = np.exp(v)
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
