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
  :class:`c4fast.players.bots.AlphaBetaPlayer`; with an unlimited depth it is exact.

Both run entirely in Numba ``njit`` code; Python only converts the root position.

Command line (the solver benchmark; one JSON line per file)::

    python -m c4fast.players.solver --file data/pons-connect4/Test_L3_R1 [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import lru_cache
from pathlib import Path

import numpy as np
from numba import njit

import c4fast  # noqa: F401  (sets up the Numba cache directory)
from c4fast import bitboard as bb
from c4fast.game import Game

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U2 = np.uint64(2)
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
def _winpos1_line(pos, d1):
    """Cells completing four with three stones of `pos` along one line of stride d1."""
    d2 = d1 + d1
    d3 = d2 + d1
    p = (pos << d1) & (pos << d2)
    r = (p & (pos << d3)) | (p & (pos >> d1))
    p = (pos >> d1) & (pos >> d2)
    return r | (p & (pos << d1)) | (p & (pos >> d3))


@njit(cache=True, inline="always")
def _winpos1(pos, empty, s1, sh, sh1, sh2):
    """Empty cells where one more stone of `pos` makes four (Pons's compute_winning_position)."""
    s2 = s1 + s1
    s3 = s2 + s1
    r = (pos << s1) & (pos << s2) & (pos << s3)  # vertical: only upwards
    r |= _winpos1_line(pos, sh1)  # horizontal
    r |= _winpos1_line(pos, sh)  # diagonal 1 (stride H)
    r |= _winpos1_line(pos, sh2)  # diagonal 2 (stride H+2)
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
# are encoded as WIN_BASE + pons_score (wins) and pons_score - WIN_BASE (losses),
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


# geometry vector of the multi-word engine (uint64 array)
M_BOARD = 0  # 3 words
M_FBIT = 3  # 3 words
M_GOOD = 6  # 3 words per player index: cells of "good" parity for player 1, then player 2
M_CELLS = 12
M_WIDTH = 13
M_ORDER = 14  # M_ORDER + i: the i-th column in search order (centre first)
M_SIZE = M_ORDER + bb.MAX_SIZE
BUF_STRIDE = 2 * bb.MAX_SIZE + 2


def make_geometry3(height: int, width: int, forbidden) -> np.ndarray:
    """The geometry vector of the multi-word engine (record layout)."""
    geo = np.zeros(M_SIZE, dtype=np.uint64)
    board = 0
    fbit = 0
    good = [0, 0]
    cells = height * width
    if forbidden is not None:
        fbit = 1 << (16 * forbidden[1] + forbidden[0])
        cells -= 1
    for c in range(width):
        k = 0  # fill index of the cell in its column (the forbidden cell is skipped)
        for r in range(height):
            if forbidden is not None and (r, c) == tuple(forbidden):
                continue
            bit = 1 << (16 * c + r)
            board |= bit
            # player 1 gets the odd-numbered cells of a column (fill index 0, 2, ...)
            good[k & 1] |= bit
            k += 1
    for w in range(3):
        geo[M_BOARD + w] = (board >> (64 * w)) & 0xFFFFFFFFFFFFFFFF
        geo[M_FBIT + w] = (fbit >> (64 * w)) & 0xFFFFFFFFFFFFFFFF
        geo[M_GOOD + w] = (good[0] >> (64 * w)) & 0xFFFFFFFFFFFFFFFF
        geo[M_GOOD + 3 + w] = (good[1] >> (64 * w)) & 0xFFFFFFFFFFFFFFFF
    geo[M_CELLS] = cells
    geo[M_WIDTH] = width
    for i, c in enumerate(column_order(width)):
        geo[M_ORDER + i] = c
    return geo


@lru_cache(maxsize=4096)
def geometry3(height: int, width: int, forbidden) -> np.ndarray:
    """:func:`make_geometry3` made once per board, shared by every engine user (the kernels
    only read it); `forbidden` is ``(row, col)`` (row 0 = bottom) or None."""
    return make_geometry3(height, width, forbidden)


_BOTTOM_W = np.uint64(0x0001000100010001)
_LANE = np.uint64(0xFFFF)
_LOW32 = np.int64(0xFFFFFFFF)


@njit(cache=True, inline="always")
def _tt_get3(ttk, ttd, h):
    i = np.int64(h & np.uint64(ttk.shape[0] - 1))
    if ttk[i] == h:
        return ttd[i]
    return np.int64(-1)


@njit(cache=True, inline="always")
def _tt_put3(ttk, ttd, h, val, depth, flag, col):
    i = np.int64(h & np.uint64(ttk.shape[0] - 1))
    ttk[i] = h
    ttd[i] = (val & _LOW32) | (depth << 32) | (flag << 48) | ((col + 1) << 52)


@njit(cache=True, inline="always")
def _unpack_val(d):
    v = d & _LOW32
    if v >= 0x80000000:
        v -= 0x100000000
    return v


@njit(cache=True)
def _window_count(o0, o1, o2, e0, e1, e2, s):
    """Windows of four along shift `s` free of the opponent (`e` = own or empty cells)
    holding at least two stones of `o`, and those holding three."""
    s2 = s + s
    s3 = s2 + s
    f0, f1, f2 = _shr3(e0, e1, e2, s)
    g0, g1, g2 = _shr3(e0, e1, e2, s2)
    k0, k1, k2 = _shr3(e0, e1, e2, s3)
    st0 = e0 & f0 & g0 & k0
    st1 = e1 & f1 & g1 & k1
    st2 = e2 & f2 & g2 & k2
    b0, b1, b2 = _shr3(o0, o1, o2, s)
    c0, c1, c2 = _shr3(o0, o1, o2, s2)
    d0, d1, d2 = _shr3(o0, o1, o2, s3)
    # at least two of (o, b, c, d); at least three
    p0 = o0 & b0
    q0 = o0 ^ b0
    r0 = c0 & d0
    t0 = c0 ^ d0
    ge2_0 = p0 | r0 | (q0 & t0)
    ge3_0 = (p0 & (c0 | d0)) | (r0 & q0)
    p1 = o1 & b1
    q1 = o1 ^ b1
    r1 = c1 & d1
    t1 = c1 ^ d1
    ge2_1 = p1 | r1 | (q1 & t1)
    ge3_1 = (p1 & (c1 | d1)) | (r1 & q1)
    p2 = o2 & b2
    q2 = o2 ^ b2
    r2 = c2 & d2
    t2 = c2 ^ d2
    ge2_2 = p2 | r2 | (q2 & t2)
    ge3_2 = (p2 & (c2 | d2)) | (r2 & q2)
    n2 = _pop3(st0 & ge2_0, st1 & ge2_1, st2 & ge2_2)
    n3 = _pop3(st0 & ge3_0, st1 & ge3_1, st2 & ge3_2)
    return n2, n3


@njit(cache=True)
def _side_score(o0, o1, o2, x0, x1, x2, e0, e1, e2, q0, q1, q2, t0, t1, t2, w0, w1, w2):
    """Static score of one side: `o` its stones, `x` the other side's, `e` empty cells,
    `q` cells of good parity for it, `t` its winning cells, `w` the other side's."""
    f0 = (e0 | o0)
    f1 = (e1 | o1)
    f2 = (e2 | o2)
    n2 = 0
    n3 = 0
    a, b = _window_count(o0, o1, o2, f0, f1, f2, np.uint64(1))
    n2 += a
    n3 += b
    a, b = _window_count(o0, o1, o2, f0, f1, f2, np.uint64(16))
    n2 += a
    n3 += b
    a, b = _window_count(o0, o1, o2, f0, f1, f2, np.uint64(17))
    n2 += a
    n3 += b
    a, b = _window_count(o0, o1, o2, f0, f1, f2, np.uint64(15))
    n2 += a
    n3 += b
    # winning cells: more if of good parity, more if not blocked by the other side's
    # winning cell right below, a lot for two stacked ones (a near-certain win)
    threats = _pop3(t0, t1, t2)
    good = _pop3(t0 & q0, t1 & q1, t2 & q2)
    b0, b1, b2 = _shl3(w0, w1, w2, _U1)  # cells directly above the other's winning cells
    shadowed = _pop3(t0 & b0, t1 & b1, t2 & b2)
    u0, u1, u2 = _shl3(t0, t1, t2, _U1)
    stacked = _pop3(t0 & u0, t1 & u1, t2 & u2)
    return 2 * n2 + 3 * n3 + 24 * threats + 16 * good - 12 * shadowed + 60 * stacked


@njit(cache=True)
def _evaluate3(c0, c1, c2, m0, m1, m2, n, geo):
    """Heuristic value for the side to move (inside +-HEUR_LIMIT)."""
    f0 = geo[M_FBIT]
    f1 = geo[M_FBIT + 1]
    f2 = geo[M_FBIT + 2]
    e0 = geo[M_BOARD] & ~m0
    e1 = geo[M_BOARD + 1] & ~m1
    e2 = geo[M_BOARD + 2] & ~m2
    o0 = c0 ^ m0 ^ f0
    o1 = c1 ^ m1 ^ f1
    o2 = c2 ^ m2 ^ f2
    t0, t1, t2 = bb.threat_cells(c0, c1, c2, e0, e1, e2)
    w0, w1, w2 = bb.threat_cells(o0, o1, o2, e0, e1, e2)
    p = n & 1
    gm = M_GOOD + 3 * p
    go = M_GOOD + 3 * (1 - p)
    mine = _side_score(
        c0, c1, c2, o0, o1, o2, e0, e1, e2, geo[gm], geo[gm + 1], geo[gm + 2],
        t0, t1, t2, w0, w1, w2,
    )
    theirs = _side_score(
        o0, o1, o2, c0, c1, c2, e0, e1, e2, geo[go], geo[go + 1], geo[go + 2],
        w0, w1, w2, t0, t1, t2,
    )
    return mine - theirs


@njit(cache=True)
def _ab3(c0, c1, c2, m0, m1, m2, h, n, depth, alpha, beta, geo, ttk, ttd, buf, stats):
    """Depth-limited negamax on three-word bitboards (record layout).

    Precondition: the side to move cannot win at once.  `c`: stones of the side to
    move; `m`: all stones plus the forbidden cell; `h`: Zobrist hash; `n`: stones on
    the board.  Values: see WIN_BASE.  stats[0] counts nodes; once it exceeds stats[1]
    the search sets stats[2] = 1 and unwinds (the result is then meaningless).
    """
    stats[0] += 1
    if stats[0] > stats[1]:
        stats[2] = 1
        return 0
    cells = np.int64(geo[M_CELLS])
    bo0 = geo[M_BOARD]
    bo1 = geo[M_BOARD + 1]
    bo2 = geo[M_BOARD + 2]
    f0 = geo[M_FBIT]
    f1 = geo[M_FBIT + 1]
    f2 = geo[M_FBIT + 2]
    e0 = bo0 & ~m0
    e1 = bo1 & ~m1
    e2 = bo2 & ~m2
    p0 = (m0 + _BOTTOM_W) & bo0 & ~m0
    p1 = (m1 + _BOTTOM_W) & bo1 & ~m1
    p2 = (m2 + _BOTTOM_W) & bo2 & ~m2
    o0 = c0 ^ m0 ^ f0
    o1 = c1 ^ m1 ^ f1
    o2 = c2 ^ m2 ^ f2
    w0, w1, w2 = bb.threat_cells(o0, o1, o2, e0, e1, e2)
    x0 = p0 & w0
    x1 = p1 & w1
    x2 = p2 & w2
    forced = False
    if (x0 | x1 | x2) != _U0:
        if _pop3(x0, x1, x2) > 1:
            return -(WIN_BASE + (cells - n) // 2)
        p0 = x0
        p1 = x1
        p2 = x2
        forced = True
    u0, u1, u2 = _under3(w0, w1, w2, f0, f1, f2)
    p0 &= ~u0
    p1 &= ~u1
    p2 &= ~u2
    if (p0 | p1 | p2) == _U0:
        return -(WIN_BASE + (cells - n) // 2)
    if n >= cells - 2:
        return 0
    lo = pons_to_value(-((cells - 2 - n) // 2))
    if alpha < lo:
        alpha = lo
        if alpha >= beta:
            return alpha
    hi = pons_to_value((cells - 1 - n) // 2)
    if beta > hi:
        beta = hi
        if alpha >= beta:
            return beta
    tt_col = -1
    d = _tt_get3(ttk, ttd, h)
    if d >= 0:
        tt_col = np.int64((d >> 52) & 0xF) - 1
        sdepth = (d >> 32) & 0xFFFF
        if sdepth >= depth:
            flag = (d >> 48) & 0xF
            v = _unpack_val(d)
            if flag == TT_EXACT:
                return v
            if flag == TT_LOWER:
                if v > alpha:
                    alpha = v
                    if alpha >= beta:
                        return alpha
            elif v < beta:
                beta = v
                if alpha >= beta:
                    return beta
    if depth <= 0:
        return _evaluate3(c0, c1, c2, m0, m1, m2, n, geo)
    # order: TT move first, then most winning cells created, centre first on ties
    width = np.int64(geo[M_WIDTH])
    k = 0
    for i in range(width - 1, -1, -1):
        col = np.int64(geo[M_ORDER + i])
        lsh = np.uint64((col & 3) * 16)
        wi = col >> 2
        pw = p0 if wi == 0 else (p1 if wi == 1 else p2)
        mv = pw & (_LANE << lsh)
        if mv == _U0:
            continue
        if col == tt_col:
            sc = 1000
        else:
            a0 = c0
            a1 = c1
            a2 = c2
            b0 = e0
            b1 = e1
            b2 = e2
            if wi == 0:
                a0 |= mv
                b0 &= ~mv
            elif wi == 1:
                a1 |= mv
                b1 &= ~mv
            else:
                a2 |= mv
                b2 &= ~mv
            t0, t1, t2 = bb.threat_cells(a0, a1, a2, b0, b1, b2)
            sc = _pop3(t0, t1, t2)
        j = k
        while j > 0 and buf[n, 2 * (j - 1) + 1] > sc:
            buf[n, 2 * j] = buf[n, 2 * (j - 1)]
            buf[n, 2 * j + 1] = buf[n, 2 * (j - 1) + 1]
            j -= 1
        buf[n, 2 * j] = col
        buf[n, 2 * j + 1] = sc
        k += 1
    # a forced reply costs no depth; exact mode (UNLIMITED) never counts depth down
    nd = depth if (forced or depth >= UNLIMITED) else depth - 1
    alpha0 = alpha
    pl = n & 1
    best = -INF
    best_col = -1
    while k > 0:
        k -= 1
        col = buf[n, 2 * k]
        lsh = np.uint64((col & 3) * 16)
        wi = col >> 2
        pw = p0 if wi == 0 else (p1 if wi == 1 else p2)
        mv = pw & (_LANE << lsh)
        nm0 = m0
        nm1 = m1
        nm2 = m2
        if wi == 0:
            nm0 |= mv
        elif wi == 1:
            nm1 |= mv
        else:
            nm2 |= mv
        nh = h ^ bb.ZOBRIST_STONES[pl, wi * 64 + _bit_index(mv)]
        score = -_ab3(o0, o1, o2, nm0, nm1, nm2, nh, n + 1, nd, -beta, -alpha,
                      geo, ttk, ttd, buf, stats)
        if stats[2] != 0:
            return 0
        if score > best:
            best = score
            best_col = col
        if score >= beta:
            sd = UNLIMITED if score >= WIN_BASE else depth
            _tt_put3(ttk, ttd, h, score, sd, TT_LOWER, col)
            return score
        if score > alpha:
            alpha = score
    if best > alpha0:
        sd = UNLIMITED if (best >= WIN_BASE or best <= -WIN_BASE) else depth
        _tt_put3(ttk, ttd, h, best, sd, TT_EXACT, best_col)
    else:
        sd = UNLIMITED if best <= -WIN_BASE else depth
        _tt_put3(ttk, ttd, h, best, sd, TT_UPPER, best_col)
    return best


@njit(cache=True)
def _move_bit3(p0, p1, p2, col):
    """(word index, bit) of the landing cell of `col` in the playable-cell words `p`."""
    wi = col >> 2
    pw = p0 if wi == 0 else (p1 if wi == 1 else p2)
    return wi, pw & (_LANE << np.uint64((col & 3) * 16))


@njit(cache=True)
def _can_win_next3(c0, c1, c2, m0, m1, m2, geo):
    e0 = geo[M_BOARD] & ~m0
    e1 = geo[M_BOARD + 1] & ~m1
    e2 = geo[M_BOARD + 2] & ~m2
    t0, t1, t2 = bb.threat_cells(c0, c1, c2, e0, e1, e2)
    p0 = (m0 + _BOTTOM_W) & e0
    p1 = (m1 + _BOTTOM_W) & e1
    p2 = (m2 + _BOTTOM_W) & e2
    return ((t0 & p0) | (t1 & p1) | (t2 & p2)) != _U0


@njit(cache=True)
def _root3(c0, c1, c2, m0, m1, m2, h, n, depth, geo, ttk, ttd, buf, stats, vals, exact):
    """Search every legal move of the root to `depth`: vals[c] is the value of column c
    for the side to move, exact[c] 1 if exact, 0 if only an upper bound, -1 if illegal.
    Assumes the side to move has no immediate win. Returns the best column (-1 if the
    node budget ran out: then stats[2] == 1)."""
    cells = np.int64(geo[M_CELLS])
    width = np.int64(geo[M_WIDTH])
    for c in range(vals.shape[0]):
        vals[c] = -INF
        exact[c] = -1
    e0 = geo[M_BOARD] & ~m0
    e1 = geo[M_BOARD + 1] & ~m1
    e2 = geo[M_BOARD + 2] & ~m2
    p0 = (m0 + _BOTTOM_W) & e0
    p1 = (m1 + _BOTTOM_W) & e1
    p2 = (m2 + _BOTTOM_W) & e2
    f0 = geo[M_FBIT]
    f1 = geo[M_FBIT + 1]
    f2 = geo[M_FBIT + 2]
    o0 = c0 ^ m0 ^ f0
    o1 = c1 ^ m1 ^ f1
    o2 = c2 ^ m2 ^ f2
    tt_col = -1
    d = _tt_get3(ttk, ttd, h)
    if d >= 0:
        tt_col = np.int64((d >> 52) & 0xF) - 1
    pl = n & 1
    best = -INF
    best_col = -1
    for i in range(-1, width):
        if i < 0:
            col = tt_col
            if col < 0:
                continue
        else:
            col = np.int64(geo[M_ORDER + i])
            if col == tt_col:
                continue
        wi, mv = _move_bit3(p0, p1, p2, col)
        if mv == _U0:
            continue
        nm0 = m0
        nm1 = m1
        nm2 = m2
        if wi == 0:
            nm0 |= mv
        elif wi == 1:
            nm1 |= mv
        else:
            nm2 |= mv
        if n + 1 >= cells:
            v = 0
            ex = 1
        elif _can_win_next3(o0, o1, o2, nm0, nm1, nm2, geo):
            v = -pons_to_value((cells - n) // 2)
            ex = 1
        else:
            nh = h ^ bb.ZOBRIST_STONES[pl, wi * 64 + _bit_index(mv)]
            alpha = best - 1 if best > -INF else -INF
            nd = depth if depth >= UNLIMITED else depth - 1
            v = -_ab3(o0, o1, o2, nm0, nm1, nm2, nh, np.int64(n + 1), np.int64(nd),
                      np.int64(-INF), np.int64(-alpha),
                      geo, ttk, ttd, buf, stats)
            if stats[2] != 0:
                return -1
            ex = 1 if v > alpha else 0
        vals[col] = v
        exact[col] = ex
        if v > best:
            best = v
            best_col = col
    _tt_put3(ttk, ttd, h, best, depth, TT_EXACT, best_col)
    return best_col


@njit(cache=True)
def _solve3(c0, c1, c2, m0, m1, m2, h, n, geo, ttk, ttd, buf, stats):
    """Exact Pons score by null-window searches of the multi-word engine."""
    cells = np.int64(geo[M_CELLS])
    if _can_win_next3(c0, c1, c2, m0, m1, m2, geo):
        return (cells + 1 - n) // 2
    lo = -((cells - n) // 2)
    hi = (cells + 1 - n) // 2
    while lo < hi:
        med = lo + (hi - lo) // 2
        if med <= 0 and _tdiv2(lo) < med:
            med = _tdiv2(lo)
        elif med >= 0 and _tdiv2(hi) > med:
            med = _tdiv2(hi)
        r = value_to_pons(_ab3(c0, c1, c2, m0, m1, m2, h, n, np.int64(UNLIMITED),
                               pons_to_value(med), pons_to_value(med + 1),
                               geo, ttk, ttd, buf, stats))
        if r <= med:
            hi = r
        else:
            lo = r
    return lo


@njit(cache=True)
def _at_least3(c0, c1, c2, m0, m1, m2, h, n, s, geo, ttk, ttd, buf, stats):
    """True if the exact score of the position is >= s."""
    cells = np.int64(geo[M_CELLS])
    if _can_win_next3(c0, c1, c2, m0, m1, m2, geo):
        return (cells + 1 - n) // 2 >= s
    r = _ab3(c0, c1, c2, m0, m1, m2, h, n, np.int64(UNLIMITED), pons_to_value(s - 1),
             pons_to_value(s), geo, ttk, ttd, buf, stats)
    return value_to_pons(r) >= s


@njit(cache=True)
def _at_least1(cur, mask, n, s, geo, tt, buf, stats):
    """True if the exact score of the position is >= s."""
    cells = np.int64(geo[G_CELLS])
    if _can_win_next1(cur, mask, geo):
        return (cells + 1 - n) // 2 >= s
    return _negamax1(cur, mask, n, s - 1, s, geo, tt, buf, stats) >= s


def record_to_words3(state) -> tuple:
    """(c0, c1, c2, m0, m1, m2, hash, n) of a record for the multi-word engine."""
    p = int(state["ply"]) & 1
    st = state["stones"][p]
    m = state["mask"]
    return (
        np.uint64(st[0]), np.uint64(st[1]), np.uint64(st[2]),
        np.uint64(m[0]), np.uint64(m[1]), np.uint64(m[2]),
        np.uint64(state["hash"]), int(state["ply"]),
    )


# ============================================================================ Python API
class Solver:
    """Exact solver whose transposition tables live across calls.

    ``tt_log2``: about 2**tt_log2 entries for each table (8 bytes each for the one-word
    table, 16 for the multi-word one); tables are allocated on first use.  One-word
    keys do not encode the board setup, so that table is cleared whenever the setup
    changes; multi-word keys are Zobrist hashes, which do.  ``engine``: "auto" (the
    one-word engine whenever ``(height + 1) * width <= 64``), "one-word" or
    "multi-word" (to cross-check the two).
    """

    ENGINES = ("auto", "one-word", "multi-word")

    def __init__(self, tt_log2: int = DEFAULT_TT_LOG2, engine: str = "auto"):
        if isinstance(tt_log2, bool) or not isinstance(tt_log2, (int, np.integer)) \
                or not 10 <= tt_log2 <= 30:
            raise ValueError(f"tt_log2 must be an integer in 10..30, got {tt_log2!r}")
        if engine not in self.ENGINES:
            raise ValueError(f"engine must be one of {self.ENGINES}, got {engine!r}")
        self.tt_log2 = int(tt_log2)
        self.engine = engine
        self._tt1 = None
        self._setup1 = None
        self._geo1 = None
        self._tt3k = None
        self._tt3d = None
        self._buf = np.zeros((bb.MAX_SIZE * bb.MAX_SIZE + 2, BUF_STRIDE), dtype=np.int64)
        self._stats = np.zeros(4, dtype=np.int64)
        self.nodes = 0  # nodes of the last call

    # ------------------------------------------------------------------ internals
    def _use_one_word(self, game: Game) -> bool:
        fits = fits_one_word(game.height, game.width)
        if self.engine == "one-word" and not fits:
            raise ValueError(
                f"the one-word engine needs (height + 1) * width <= 64, "
                f"got {game.height}x{game.width}"
            )
        return fits and self.engine != "multi-word"

    def _one_word(self, game: Game):
        setup = (game.height, game.width, game.forbidden)
        if self._tt1 is None:
            self._tt1 = np.empty(prime_below(1 << self.tt_log2), dtype=np.uint64)
            self._tt1.fill(0)  # touch every page now, not inside the timed search
        if setup != self._setup1:
            if self._setup1 is not None:
                self._tt1[:] = 0
            self._setup1 = setup
            self._geo1 = make_geometry(*setup)
        return self._geo1

    def _multi_word(self, game: Game):
        setup = (game.height, game.width, game.forbidden)
        if self._tt3k is None:
            self._tt3k = np.empty(1 << self.tt_log2, dtype=np.uint64)
            self._tt3d = np.empty(1 << self.tt_log2, dtype=np.int64)
            self._tt3k.fill(0)
            self._tt3d.fill(0)
        return geometry3(*setup)

    def _prepare(self, game: Game):
        if game.result is not None:
            raise ValueError(f"the game is over (result {game.result}): nothing to solve")
        self._stats[:] = 0
        self._stats[1] = np.iinfo(np.int64).max

    def clear(self) -> None:
        """Forget everything the tables hold."""
        if self._tt1 is not None:
            self._tt1[:] = 0
        if self._tt3k is not None:
            self._tt3k[:] = 0
            self._tt3d[:] = 0

    # ------------------------------------------------------------------ API
    def solve(self, game: Game) -> int:
        """The exact score of `game` for the side to move (Pons's convention)."""
        self._prepare(game)
        st = game.state[0]
        if self._use_one_word(game):
            geo = self._one_word(game)
            cur, mask, n = record_to_word(st)
            r = _solve1(cur, mask, n, -1000, 1000, geo, self._tt1, self._buf, self._stats)
        else:
            geo = self._multi_word(game)
            r = _solve3(*record_to_words3(st), geo, self._tt3k, self._tt3d, self._buf,
                        self._stats)
        self.nodes = int(self._stats[0])
        return int(r)

    def at_least(self, game: Game, s: int) -> bool:
        """True if the exact score of `game` is >= s (one null-window search)."""
        self._prepare(game)
        st = game.state[0]
        if self._use_one_word(game):
            geo = self._one_word(game)
            cur, mask, n = record_to_word(st)
            r = _at_least1(cur, mask, n, int(s), geo, self._tt1, self._buf, self._stats)
        else:
            geo = self._multi_word(game)
            r = _at_least3(*record_to_words3(st), int(s), geo, self._tt3k, self._tt3d,
                           self._buf, self._stats)
        self.nodes = int(self._stats[0])
        return bool(r)

    def _cells(self, game: Game) -> int:
        return game.height * game.width - (game.forbidden is not None)

    def move_scores(self, game: Game) -> dict[int, int]:
        """Exact score of every legal column: {col: score for the side to move}."""
        if game.result is not None:
            raise ValueError(f"the game is over (result {game.result}): nothing to solve")
        out = {}
        cells = self._cells(game)
        n = game.ply
        for c in game.legal_moves():
            g2 = game.copy()
            g2.play(c)
            if g2.result is None:
                out[c] = -self.solve(g2)
            elif g2.result == 0:
                out[c] = 0
            else:
                out[c] = (cells + 1 - n) // 2
        return out

    def best_moves(self, game: Game) -> list[int]:
        """All optimal columns (those whose score equals the position's score)."""
        s = self.solve(game)
        cells = self._cells(game)
        n = game.ply
        out = []
        for c in game.legal_moves():
            g2 = game.copy()
            g2.play(c)
            if g2.result is None:
                # -score(child) >= s  <=>  score(child) <= -s  <=>  not (score(child) >= 1 - s)
                ok = not self.at_least(g2, 1 - s)
            elif g2.result == 0:
                ok = s == 0
            else:
                ok = (cells + 1 - n) // 2 == s
            if ok:
                out.append(c)
        return out


    def outcome_moves(self, game: Game) -> list[int]:
        """All columns that keep the position's game-theoretic result (win, draw or loss).

        A weaker criterion than :meth:`best_moves`: a slower win still counts, and in a
        lost position every column does.  It is the criterion of AlphaZero.jl's Pons
        benchmark (a move is correct when ``sign`` of its score is the best sign).
        """
        if game.result is not None:
            raise ValueError(f"the game is over (result {game.result}): nothing to solve")
        if self.at_least(game, 1):
            want = 1
        elif self.at_least(game, 0):
            want = 0
        else:
            return sorted(game.legal_moves())  # lost: every column keeps the result
        out = []
        for c in game.legal_moves():
            g2 = game.copy()
            g2.play(c)
            if g2.result is None:
                # our sign is -sign(score(child))
                if want == 1:
                    ok = not self.at_least(g2, 0)  # score(child) <= -1
                else:
                    ok = self.at_least(g2, 0) and not self.at_least(g2, 1)  # score(child) == 0
            else:
                ok = (1 if g2.result != 0 else 0) == want  # a move that ends the game wins or draws
            if ok:
                out.append(c)
        return out


_DEFAULT_SOLVER: Solver | None = None


def _default_solver() -> Solver:
    global _DEFAULT_SOLVER
    if _DEFAULT_SOLVER is None:
        _DEFAULT_SOLVER = Solver()
    return _DEFAULT_SOLVER


def solve(game: Game) -> int:
    """Exact score of `game` for the side to move (Pons's convention; shared solver)."""
    return _default_solver().solve(game)


def best_moves(game: Game) -> list[int]:
    """All optimal columns of `game` (shared solver)."""
    return _default_solver().best_moves(game)


# ============================================================================ benchmark
#: Pons's 6x7 benchmark files shipped with the repository (see its README for provenance).
PONS_DIR = Path(__file__).resolve().parents[2] / "data" / "pons-connect4"


class PonsFileError(ValueError):
    """A missing or malformed Pons benchmark file."""


def read_pons_file(path, limit: int | None = None) -> list[tuple[str, int]]:
    """[(moves, score)] of a Pons benchmark file (``<moves> <score>`` per line)."""
    p = Path(path)
    if not p.is_file():
        raise PonsFileError(f"{p}: no such file")
    out = []
    with p.open() as f:
        for lineno, line in enumerate(f, 1):
            if limit is not None and len(out) >= limit:
                break
            line = line.strip()
            if not line:
                continue
            parts = line.split()
            if (
                len(parts) != 2
                or not parts[0].isdigit()
                or any(ch not in "1234567" for ch in parts[0])
                or not parts[1].lstrip("-").isdigit()
            ):
                raise PonsFileError(
                    f"{p}:{lineno}: expected '<moves 1..7> <score>', got {line[:60]!r}"
                )
            out.append((parts[0], int(parts[1])))
    return out


def pons_game(moves: str) -> Game:
    """The 6x7 game of a Pons move string ('4455': columns 1..7, leftmost 1)."""
    g = Game.from_moves(6, 7, None, [int(ch) - 1 for ch in moves])
    if g.result is not None:
        raise ValueError(f"{moves}: the game is already over")
    return g


def bench_file(solver: Solver, path, limit: int | None = None) -> dict:
    """Solve every position of a Pons file with the one-word engine; the JSON record."""
    entries = read_pons_file(path, limit)
    curs = np.zeros(len(entries), dtype=np.uint64)
    masks = np.zeros(len(entries), dtype=np.uint64)
    ns = np.zeros(len(entries), dtype=np.int64)
    expected = np.array([s for _, s in entries], dtype=np.int64)
    for i, (moves, _) in enumerate(entries):
        try:
            g = pons_game(moves)
        except ValueError as e:
            raise PonsFileError(f"{path}: position {i + 1}: {e}") from None
        curs[i], masks[i], ns[i] = record_to_word(g.state[0])
    geo = solver._one_word(Game(6, 7))
    out = np.zeros(len(entries), dtype=np.int64)
    nodes = np.zeros(len(entries), dtype=np.int64)
    solver._stats[:] = 0
    t0 = time.perf_counter()
    _solve1_batch(curs, masks, ns, geo, solver._tt1, solver._buf, solver._stats, out, nodes)
    dt = time.perf_counter() - t0
    n = len(entries)
    return {
        "file": Path(path).name,
        "positions": n,
        "correct": int((out == expected).sum()),
        "positions_per_s": round(n / dt, 1) if dt > 0 else None,
        "mean_nodes": round(float(nodes.mean()), 1) if n else 0.0,
        "nodes_per_s": round(float(nodes.sum()) / dt, 1) if dt > 0 else None,
        "seconds": round(dt, 4),
    }


def _warm_up(solver: Solver) -> None:
    """Compile (or load) the kernels outside the timed region."""
    g = pons_game("4455")
    geo = solver._one_word(g)
    cur, mask, n = record_to_word(g.state[0])
    a = np.array([cur], dtype=np.uint64)
    b = np.array([mask], dtype=np.uint64)
    c = np.array([n], dtype=np.int64)
    o = np.zeros(1, dtype=np.int64)
    _solve1_batch(a, b, c, geo, solver._tt1, solver._buf, solver._stats, o, o.copy())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m c4fast.players.solver",
        description=(
            "Solve Pascal Pons's Connect Four benchmark files exactly and check the scores. "
            "Prints one JSON line per file: positions, correct, positions_per_s, mean_nodes."
        ),
    )
    ap.add_argument("--file", action="append", required=True, metavar="PATH",
                    help="a Pons file (lines '<moves> <score>'); repeat for several")
    ap.add_argument("--limit", type=int, default=None, metavar="N",
                    help="solve only the first N positions of each file")
    ap.add_argument("--tt-log2", type=int, default=DEFAULT_TT_LOG2,
                    help=f"transposition table of about 2**N entries (default {DEFAULT_TT_LOG2})")
    ap.add_argument("--fresh-table", action="store_true",
                    help="clear the transposition table before each file (default: keep it)")
    args = ap.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        print("error: --limit must be >= 1", file=sys.stderr)
        return 2
    try:
        solver = Solver(args.tt_log2)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        for path in args.file:  # validate every file before the long run
            read_pons_file(path, args.limit)
        _warm_up(solver)
        for path in args.file:
            if args.fresh_table:
                solver.clear()
            print(json.dumps(bench_file(solver, path, args.limit)), flush=True)
    except PonsFileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
