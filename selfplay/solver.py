"""Exact Connect Four solver (Pascal Pons's algorithm) for c4fast positions.

Scores follow Pons's convention, generalised from 42 cells to the ``C`` cells a stone
may occupy (``height * width``, minus one for a forbidden cell): the value is for the
side to move, a win with ``n`` stones on the board before the winning stone scores
``(C + 1 - n) // 2``, a loss is the negation of the opponent's win score, a draw is 0,
and ``score(P) = max over moves of -score(child)`` (negamax).  On the standard 6x7
board without a forbidden cell this is exactly the score of Pons's benchmark files.

Algorithm (blog.gamesolver.org, "Solving Connect 4", parts 2-12)
----------------------------------------------------------------
* Negamax with alpha-beta, called with null windows by :func:`_solve1`, which narrows
  ``[min, max]`` by a binary search biased towards 0 (Pons's iterative deepening).
* Non-losing moves only: if the opponent has an immediate win we must block it (two
  such threats: lost); never play directly under a cell where the opponent would win.
  With a forbidden cell "directly under" means the cell whose stone makes the opponent's
  winning cell the next landing cell of the column (the landing cell hops over the
  forbidden cell).
* Score bounds from the number of empty cells, a transposition table storing upper
  and lower bounds, and move ordering by the number of winning cells the move creates
  (ties: centre columns first).

Two engines share those rules:

* **one-word** (the fast path): Pons's compact layout, bit ``col * (height + 1) + row``
  of a single ``uint64``.  Used whenever ``(height + 1) * width <= 64`` (6x7 takes 49
  bits).  The key ``current + mask`` is exact and is stored with its 8-bit value in
  one ``uint64`` of a prime-sized table (index ``key % size``, low 56 key bits kept:
  unique by the Chinese remainder theorem), so a probe is one cache line.
* **multi-word** (any size up to 12x12): the three-word layout of
  :mod:`c4fast.bitboard`, keyed by the Zobrist hash of the record (64 bits).  The same
  search, depth-limited with a static evaluation at the horizon, is the engine of
  :class:`selfplay.bots.AlphaBetaPlayer`; with an unlimited depth it is exact.

Both run entirely in Numba ``njit`` code; Python only converts the root position.

Command line (the solver benchmark; one JSON line per file)::

    python -m selfplay.solver --file /work/shared/data/pons-connect4/Test_L3_R1 [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

import c4fast  # noqa: F401  (sets up the Numba cache directory)
from c4fast import bitboard as bb
from c4fast.game import Game

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U2 = np.uint64(2)
_U3 = np.uint64(3)
_U8 = np.uint64(8)
_U0xFF = np.uint64(0xFF)
_KEY56 = np.uint64((1 << 56) - 1)

# geometry vector of the one-word engine (uint64 array)
G_BOARD = 0  # cells a stone may occupy
G_BOTTOM = 1  # row 0 of every column
G_FBIT = 2  # the forbidden cell (0 if none)
G_S1 = 3  # shifts: 1 (vertical), H (diagonal down), H+1 (horizontal), H+2 (diagonal up)
G_SH = 4
G_SH1 = 5
G_SH2 = 6
G_CELLS = 7
G_WIDTH = 8
G_COLS = 9  # G_COLS + i: column mask of the i-th column in search order (centre first)
G_SIZE = G_COLS + bb.MAX_SIZE

DEFAULT_TT_LOG2 = 23


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    i = 2
    while i * i <= n:
        if n % i == 0:
            return False
        i += 1
    return True


def prime_below(n: int) -> int:
    """The largest prime <= n (n >= 2)."""
    while not _is_prime(n):
        n -= 1
    return n


def column_order(width: int) -> list[int]:
    """Columns centre first, then alternating outwards (left of centre first on ties)."""
    return sorted(range(width), key=lambda c: (abs(2 * c - (width - 1)), c))


# =========================================================================== one word
@njit(cache=True, inline="always")
def _winpos1(pos, empty, s1, sh, sh1, sh2):
    """Empty cells where one more stone of `pos` makes four (Pons's compute_winning_position)."""
    s2 = s1 + s1
    s3 = s2 + s1
    # vertical
    r = (pos << s1) & (pos << s2) & (pos << s3)
    # horizontal
    d2 = sh1 + sh1
    d3 = d2 + sh1
    p = (pos << sh1) & (pos << d2)
    r |= p & (pos << d3)
    r |= p & (pos >> sh1)
    p = (pos >> sh1) & (pos >> d2)
    r |= p & (pos << sh1)
    r |= p & (pos >> d3)
    # diagonal 1 (stride H)
    d2 = sh + sh
    d3 = d2 + sh
    p = (pos << sh) & (pos << d2)
    r |= p & (pos << d3)
    r |= p & (pos >> sh)
    p = (pos >> sh) & (pos >> d2)
    r |= p & (pos << sh)
    r |= p & (pos >> d3)
    # diagonal 2 (stride H+2)
    d2 = sh2 + sh2
    d3 = d2 + sh2
    p = (pos << sh2) & (pos << d2)
    r |= p & (pos << d3)
    r |= p & (pos >> sh2)
    p = (pos >> sh2) & (pos >> d2)
    r |= p & (pos << sh2)
    r |= p & (pos >> d3)
    return r & empty


@njit(cache=True, inline="always")
def _popcount64(x):
    x = x - ((x >> _U1) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> _U2) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(cache=True, inline="always")
def _under1(win, fbit, s1):
    """Cells whose stone would make a cell of `win` the next landing cell of its column."""
    if fbit == _U0:
        return win >> s1
    return ((win >> s1) & ~(fbit >> s1)) | ((win >> (s1 + s1)) & (fbit >> s1))


@njit(cache=True, inline="always")
def _tdiv2(x):
    """Integer division by 2 truncating towards zero (C semantics)."""
    return -((-x) // 2) if x < 0 else x // 2


@njit(cache=True, inline="always")
def _tt_get1(tt, key):
    e = tt[key % np.uint64(tt.shape[0])]
    if (e >> _U8) == (key & _KEY56):
        return np.int64(e & _U0xFF)
    return 0


@njit(cache=True, inline="always")
def _tt_put1(tt, key, val):
    tt[key % np.uint64(tt.shape[0])] = ((key & _KEY56) << _U8) | np.uint64(val)


@njit(cache=True)
def _negamax1(cur, mask, n, alpha, beta, geo, tt, buf, stats):
    """Pons's negamax. Precondition: the side to move cannot win at once.

    `cur`: stones of the side to move; `mask`: all stones plus the forbidden cell;
    `n`: stones on the board. Returns the exact score if it lies in (alpha, beta), an
    upper bound <= alpha, or a lower bound >= beta.
    """
    stats[0] += 1
    board = geo[G_BOARD]
    fbit = geo[G_FBIT]
    s1 = geo[G_S1]
    sh = geo[G_SH]
    sh1 = geo[G_SH1]
    sh2 = geo[G_SH2]
    cells = np.int64(geo[G_CELLS])
    empty = board & ~mask
    possible = (mask + geo[G_BOTTOM]) & board
    opp_win = _winpos1(cur ^ mask ^ fbit, empty, s1, sh, sh1, sh2)
    forced = possible & opp_win
    if forced != _U0:
        if forced & (forced - _U1):
            return -((cells - n) // 2)  # two threats: the opponent wins next move
        possible = forced
    nxt = possible & ~_under1(opp_win, fbit, s1)
    if nxt == _U0:
        return -((cells - n) // 2)
    if n >= cells - 2:
        return 0  # no win for us next move, none for the opponent after: draw
    lo = -((cells - 2 - n) // 2)  # the opponent cannot win at its next move
    if alpha < lo:
        alpha = lo
        if alpha >= beta:
            return alpha
    hi = (cells - 1 - n) // 2  # we cannot win at our next move
    if beta > hi:
        beta = hi
        if alpha >= beta:
            return beta
    min_score = -(cells // 2) + 3
    max_score = (cells + 1) // 2 - 3
    key = cur + mask
    val = _tt_get1(tt, key)
    if val != 0:
        if val > max_score - min_score + 1:  # lower bound
            lo = val + 2 * min_score - max_score - 2
            if alpha < lo:
                alpha = lo
                if alpha >= beta:
                    return alpha
        else:  # upper bound
            hi = val + min_score - 1
            if beta > hi:
                beta = hi
                if alpha >= beta:
                    return beta
    # order the non-losing moves: most winning cells created first, centre first on ties
    width = np.int64(geo[G_WIDTH])
    k = 0
    for i in range(width - 1, -1, -1):
        mv = nxt & geo[G_COLS + i]
        if mv != _U0:
            sc = _popcount64(_winpos1(cur | mv, empty & ~mv, s1, sh, sh1, sh2))
            j = k
            while j > 0 and buf[n, 2 * (j - 1) + 1] > sc:
                buf[n, 2 * j] = buf[n, 2 * (j - 1)]
                buf[n, 2 * j + 1] = buf[n, 2 * (j - 1) + 1]
                j -= 1
            buf[n, 2 * j] = np.int64(mv)
            buf[n, 2 * j + 1] = sc
            k += 1
    ocur = cur ^ mask ^ fbit  # the opponent's stones become the side to move's
    while k > 0:
        k -= 1
        mv = np.uint64(buf[n, 2 * k])
        score = -_negamax1(ocur, mask | mv, n + 1, -beta, -alpha, geo, tt, buf, stats)
        if score >= beta:
            _tt_put1(tt, key, score + max_score - 2 * min_score + 2)
            return score
        if score > alpha:
            alpha = score
    _tt_put1(tt, key, alpha - min_score + 1)
    return alpha


@njit(cache=True)
def _can_win_next1(cur, mask, geo):
    board = geo[G_BOARD]
    possible = (mask + geo[G_BOTTOM]) & board
    w = _winpos1(cur, board & ~mask, geo[G_S1], geo[G_SH], geo[G_SH1], geo[G_SH2])
    return (w & possible) != _U0


@njit(cache=True)
def _solve1(cur, mask, n, lo_in, hi_in, geo, tt, buf, stats):
    """Exact score of the position (clamped to [lo_in, hi_in]) by null-window searches."""
    cells = np.int64(geo[G_CELLS])
    if _can_win_next1(cur, mask, geo):
        return (cells + 1 - n) // 2
    lo = -((cells - n) // 2)
    hi = (cells + 1 - n) // 2
    if lo < lo_in:
        lo = lo_in
    if hi > hi_in:
        hi = hi_in
    while lo < hi:
        med = lo + (hi - lo) // 2
        if med <= 0 and _tdiv2(lo) < med:
            med = _tdiv2(lo)
        elif med >= 0 and _tdiv2(hi) > med:
            med = _tdiv2(hi)
        r = _negamax1(cur, mask, n, med, med + 1, geo, tt, buf, stats)
        if r <= med:
            hi = r
        else:
            lo = r
    return lo


@njit(cache=True)
def _solve1_batch(curs, masks, ns, geo, tt, buf, stats, out, nodes):
    for i in range(curs.shape[0]):
        before = stats[0]
        out[i] = _solve1(curs[i], masks[i], ns[i], -1000, 1000, geo, tt, buf, stats)
        nodes[i] = stats[0] - before


def fits_one_word(height: int, width: int) -> bool:
    return (height + 1) * width <= 64


def make_geometry(height: int, width: int, forbidden) -> np.ndarray:
    """The geometry vector of the one-word engine."""
    stride = height + 1
    geo = np.zeros(G_SIZE, dtype=np.uint64)
    col = (1 << height) - 1
    board = 0
    bottom = 0
    for c in range(width):
        board |= col << (c * stride)
        bottom |= 1 << (c * stride)
    fbit = 0
    cells = height * width
    if forbidden is not None:
        fbit = 1 << (forbidden[1] * stride + forbidden[0])
        board &= ~fbit
        cells -= 1
    geo[G_BOARD] = board
    geo[G_BOTTOM] = bottom
    geo[G_FBIT] = fbit
    geo[G_S1] = 1
    geo[G_SH] = height
    geo[G_SH1] = height + 1
    geo[G_SH2] = height + 2
    geo[G_CELLS] = cells
    geo[G_WIDTH] = width
    for i, c in enumerate(column_order(width)):
        geo[G_COLS + i] = (col << (c * stride)) & board
    return geo


@njit(cache=True)
def record_to_word(pos):
    """(cur, mask, n) of record `pos` in the one-word layout (mask includes the forbidden cell)."""
    h = np.int64(pos.height)
    stride = h + 1
    lane = (_U1 << np.uint64(h)) - _U1
    cur = _U0
    mask = _U0
    p = pos.ply & 1
    for c in range(pos.width):
        sh = np.uint64((c & 3) * bb.LANE_BITS)
        w = c >> 2
        off = np.uint64(c * stride)
        cur |= ((pos.stones[p, w] >> sh) & lane) << off
        mask |= ((pos.mask[w] >> sh) & lane) << off
    return cur, mask, np.int64(pos.ply)


# ========================================================================= multi word
# The three-word engine works on the record layout of c4fast.bitboard.  Exact values
# are encoded as WIN_BASE + pons_score (wins) and -(WIN_BASE + pons_score) (losses),
# 0 for a draw; heuristic values of the depth-limited search stay inside
# (-HEUR_LIMIT, HEUR_LIMIT).  TT entries: hash (uint64), then int64 data packed as
# value (low 32 bits, signed) | depth << 32 | flag << 48 | best column << 52.
WIN_BASE = 100_000
HEUR_LIMIT = 50_000
INF = 1_000_000
TT_EXACT = 1
TT_LOWER = 2
TT_UPPER = 3
UNLIMITED = 1_000  # depth larger than any number of empty cells


@njit(cache=True)
def pons_to_value(s):
    if s > 0:
        return WIN_BASE + s
    if s < 0:
        return -WIN_BASE + s
    return 0


@njit(cache=True)
def value_to_pons(v):
    if v >= WIN_BASE:
        return v - WIN_BASE
    if v <= -WIN_BASE:
        return v + WIN_BASE
    return 0


_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_TABLE = np.zeros(64, dtype=np.int64)
for _i in range(64):
    _DEBRUIJN_TABLE[((((1 << _i) * 0x03F79D71B4CB0A89) & 0xFFFFFFFFFFFFFFFF) >> 58)] = _i
del _i


@njit(cache=True, inline="always")
def _bit_index(b):
    """Index of the single set bit of uint64 `b`."""
    return _DEBRUIJN_TABLE[np.int64((b * _DEBRUIJN) >> np.uint64(58))]


@njit(cache=True, inline="always")
def _shl3(a0, a1, a2, s):
    t = np.uint64(64) - s
    return a0 << s, (a1 << s) | (a0 >> t), (a2 << s) | (a1 >> t)


@njit(cache=True, inline="always")
def _shr3(a0, a1, a2, s):
    t = np.uint64(64) - s
    return (a0 >> s) | (a1 << t), (a1 >> s) | (a2 << t), a2 >> s


@njit(cache=True, inline="always")
def _under3(w0, w1, w2, f0, f1, f2):
    """Multi-word `_under1`: cells below a cell of `w`, hopping over the forbidden cell."""
    u0, u1, u2 = _shr3(w0, w1, w2, _U1)
    if (f0 | f1 | f2) == _U0:
        return u0, u1, u2
    g0, g1, g2 = _shr3(f0, f1, f2, _U1)
    v0, v1, v2 = _shr3(w0, w1, w2, _U2)
    return (u0 & ~g0) | (v0 & g0), (u1 & ~g1) | (v1 & g1), (u2 & ~g2) | (v2 & g2)


@njit(cache=True, inline="always")
def _pop3(a0, a1, a2):
    return _popcount64(a0) + _popcount64(a1) + _popcount64(a2)
