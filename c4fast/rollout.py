"""Random playouts on bitboard records, and the small RNG the kernels share.

The RNG is xorshift64* kept in a caller-owned ``uint64`` array, so every kernel is
deterministic for a given seed and independent of numpy's global state.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from c4fast import bitboard as bb

_XS_MUL = np.uint64(0x2545F4914F6CDD1D)
_S12 = np.uint64(12)
_S25 = np.uint64(25)
_S27 = np.uint64(27)
_S11 = np.uint64(11)
_INV_2_53 = 1.0 / 9007199254740992.0


def make_rng(seed: int) -> np.ndarray:
    """A one-element uint64 RNG state for the kernels (never zero)."""
    x = (int(seed) * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & 0xFFFFFFFFFFFFFFFF
    return np.array([x or 1], dtype=np.uint64)


@njit(cache=True)
def next_u64(rng):
    x = rng[0]
    x ^= x >> _S12
    x ^= x << _S25
    x ^= x >> _S27
    rng[0] = x
    return x * _XS_MUL


@njit(cache=True)
def uniform(rng):
    """A float64 uniform in [0, 1)."""
    return np.float64(next_u64(rng) >> _S11) * _INV_2_53


@njit(cache=True)
def randbelow(rng, n):
    """An int uniform in [0, n) (n > 0; bias below 2**-50 for n <= 4096)."""
    return np.int64((next_u64(rng) >> _S11) % np.uint64(n))


@njit(cache=True)
def random_column(rng, colmask):
    """A uniformly random set bit of the column mask `colmask` (non-zero)."""
    return bb.nth_set_bit(colmask, randbelow(rng, bb.popcount16(colmask)))


@njit(cache=True)
def playout(pos, rng, sensible):
    """Play random (or random sensible) moves on record `pos` until the game ends.

    Modifies `pos`; returns the number of moves played.
    """
    n = 0
    while pos.result == bb.RUNNING:
        m = bb.sensible_columns(pos) if sensible else bb.legal_columns(pos)
        bb.play(pos, random_column(rng, m))
        n += 1
    return n


@njit(cache=True)
def playouts_batch(setups, min_moves, rng, sensible, results):
    """Random games on every setup record, round-robin, until `min_moves` moves are played.

    `setups` is left untouched (each game starts from a copy).  results[k] counts the
    games ended with result k (0 draw, 1, 2).  Returns (moves, games).
    """
    work = np.empty(1, dtype=bb.POSITION_DTYPE)
    moves = 0
    games = 0
    i = 0
    n = setups.shape[0]
    while moves < min_moves:
        bb.copy_into(setups[i], work[0])
        moves += playout(work[0], rng, sensible)
        results[work[0].result] += 1
        games += 1
        i += 1
        if i == n:
            i = 0
    return moves, games
