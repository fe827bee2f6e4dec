"""Multiword bitboards for gravity Connect Four with one optional forbidden cell.

Layout
------
A cell ``(row, col)`` (row 0 is the bottom) is bit ``16 * col + row`` of a 192-bit
number stored as three ``uint64`` words, little-endian::

    word 0: columns 0..3    word 1: columns 4..7    word 2: columns 8..11
    inside a word, column c owns the 16-bit lane starting at bit 16 * (c % 4)

Rows ``height..15`` of every lane are always empty (at least four empty bits, since
``height <= 12``), so shifting a whole board by 1 (vertical), 16 (horizontal), 15 or
17 (diagonals) never lets a line of four wrap from one column into another.  The
forbidden cell is pre-set in the occupancy ``mask``: the landing cell of a column is
the lowest zero bit of its lane, ``(mask + bottom) & ~mask``, and the carry of that
addition hops over the forbidden cell.  No stone is ever placed on it, so it breaks
every line through it.

A position is one record of :data:`POSITION_DTYPE` (a numpy structured dtype that
Numba compiles to a plain struct); a batch of games is a 1-D array of records, so
every kernel works on struct-of-arrays data and never calls Python per game.

Conventions
-----------
* Players are 1 (moves first) and 2.  ``ply`` counts stones played; the side to move
  is player ``ply % 2 + 1`` and its stones are ``stones[ply % 2]``.
* ``result`` is :data:`RUNNING` (-1) while the game goes on, :data:`DRAW` (0), or
  the winner (1 or 2).
* Column masks are ``int64`` with bit ``c`` set for column ``c``.
* Every constant used with a ``uint64`` is itself a ``np.uint64``: mixed
  uint64/int64 arithmetic in Numba silently becomes int64 (or float64).
"""

from __future__ import annotations

import numpy as np
from numba import njit

MIN_SIZE = 4
MAX_SIZE = 12
LANE_BITS = 16
NUM_WORDS = 3
NUM_BITS = LANE_BITS * MAX_SIZE  # 192 bit positions (some are sentinel rows)

RUNNING = -1
DRAW = 0
NO_CELL = -1  # row/col value of an absent forbidden cell or an absent last move

POSITION_DTYPE = np.dtype(
    [
        ("stones", np.uint64, (2, NUM_WORDS)),  # [0]: player 1, [1]: player 2
        ("mask", np.uint64, (NUM_WORDS,)),  # occupied cells + the forbidden cell
        ("board", np.uint64, (NUM_WORDS,)),  # cells a stone may ever occupy
        ("hash", np.uint64),  # Zobrist hash (setup + stones)
        ("top", np.int8, (MAX_SIZE,)),  # landing row per column; == height when full
        ("last", np.int8, (2, 2)),  # (row, col) of the last and the previous move
        ("forbidden", np.int8, (2,)),  # (row, col), or (NO_CELL, NO_CELL)
        ("height", np.int8),
        ("width", np.int8),
        ("result", np.int8),  # RUNNING, DRAW, 1 or 2
        ("ply", np.int16),  # stones played so far
        ("cells", np.int16),  # cells a stone may occupy (draw when ply == cells)
    ],
    align=True,
)

# --------------------------------------------------------------------------- constants
_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U64 = np.uint64(64)
_LANE = np.uint64(0xFFFF)
_BOTTOM = np.uint64(0x0001000100010001)  # row 0 of every lane of a word
_S1 = np.uint64(1)  # vertical
_S15 = np.uint64(15)  # diagonal down-right
_S16 = np.uint64(16)  # horizontal
_S17 = np.uint64(17)  # diagonal up-right


def _splitmix64_table(n: int, seed: int) -> np.ndarray:
    """Deterministic pseudo-random uint64 keys (splitmix64), independent of numpy's RNG."""
    out = np.empty(n, dtype=np.uint64)
    x = seed & 0xFFFFFFFFFFFFFFFF
    m = 0xFFFFFFFFFFFFFFFF
    for i in range(n):
        x = (x + 0x9E3779B97F4A7C15) & m
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
        out[i] = z ^ (z >> 31)
    return out


# Zobrist keys: stones of each player per bit position, the forbidden cell per bit
# position (index NUM_BITS: none), and the board size.  Constants, not settings.
_KEYS = _splitmix64_table(2 * NUM_BITS + (NUM_BITS + 1) + 13 * 13, seed=0xC4FA57)
ZOBRIST_STONES = _KEYS[: 2 * NUM_BITS].reshape(2, NUM_BITS).copy()
ZOBRIST_FORBIDDEN = _KEYS[2 * NUM_BITS : 3 * NUM_BITS + 1].copy()
ZOBRIST_SIZE = _KEYS[3 * NUM_BITS + 1 :].reshape(13, 13).copy()


# --------------------------------------------------------------------- 192-bit helpers
@njit(inline="always")
def _shr(a0, a1, a2, s):
    """(a >> s) for a 192-bit number, 0 < s < 64 (s is a uint64)."""
    t = _U64 - s
    return (a0 >> s) | (a1 << t), (a1 >> s) | (a2 << t), a2 >> s


@njit(inline="always")
def _shl(a0, a1, a2, s):
    """(a << s) for a 192-bit number, 0 < s < 64; bits above 191 are dropped."""
    t = _U64 - s
    return a0 << s, (a1 << s) | (a0 >> t), (a2 << s) | (a1 >> t)


@njit(inline="always")
def _four_in_dir(a0, a1, a2, s):
    m0, m1, m2 = _shr(a0, a1, a2, s)
    m0 &= a0
    m1 &= a1
    m2 &= a2
    n0, n1, n2 = _shr(m0, m1, m2, s + s)
    return ((m0 & n0) | (m1 & n1) | (m2 & n2)) != _U0


@njit(cache=True)
def has_four(a0, a1, a2):
    """True if the stone set (a0, a1, a2) contains four or more in a row."""
    return (
        _four_in_dir(a0, a1, a2, _S1)
        or _four_in_dir(a0, a1, a2, _S16)
        or _four_in_dir(a0, a1, a2, _S17)
        or _four_in_dir(a0, a1, a2, _S15)
    )


@njit(inline="always")
def _threats_dir(a0, a1, a2, s):
    """Cells that complete four with three stones of `a` along one line direction."""
    s2 = s + s
    s3 = s2 + s
    l10, l11, l12 = _shl(a0, a1, a2, s)
    l20, l21, l22 = _shl(a0, a1, a2, s2)
    l30, l31, l32 = _shl(a0, a1, a2, s3)
    r10, r11, r12 = _shr(a0, a1, a2, s)
    r20, r21, r22 = _shr(a0, a1, a2, s2)
    r30, r31, r32 = _shr(a0, a1, a2, s3)
    p0 = l10 & l20
    p1 = l11 & l21
    p2 = l12 & l22
    q0 = r10 & r20
    q1 = r11 & r21
    q2 = r12 & r22
    w0 = (p0 & (l30 | r10)) | (q0 & (r30 | l10))
    w1 = (p1 & (l31 | r11)) | (q1 & (r31 | l11))
    w2 = (p2 & (l32 | r12)) | (q2 & (r32 | l12))
    return w0, w1, w2


@njit(cache=True)
def threat_cells(a0, a1, a2, b0, b1, b2):
    """Cells of board `b` where one more stone of set `a` makes four in a row.

    Returns the three words; the caller removes occupied cells.
    """
    # vertical: only the cell directly above three stacked stones
    l10, l11, l12 = _shl(a0, a1, a2, _S1)
    l20, l21, l22 = _shl(a0, a1, a2, np.uint64(2))
    l30, l31, l32 = _shl(a0, a1, a2, np.uint64(3))
    w0 = l10 & l20 & l30
    w1 = l11 & l21 & l31
    w2 = l12 & l22 & l32
    h0, h1, h2 = _threats_dir(a0, a1, a2, _S16)
    d0, d1, d2 = _threats_dir(a0, a1, a2, _S17)
    e0, e1, e2 = _threats_dir(a0, a1, a2, _S15)
    return (w0 | h0 | d0 | e0) & b0, (w1 | h1 | d1 | e1) & b1, (w2 | h2 | d2 | e2) & b2


# ----------------------------------------------------------------- position kernels
@njit(cache=True)
def setup_position(pos, height, width, frow, fcol):
    """Reset record `pos` to the empty board. `frow, fcol` = NO_CELL for no forbidden cell.

    Arguments are assumed valid (the Python API validates them).
    """
    for p in range(2):
        for w in range(NUM_WORDS):
            pos.stones[p, w] = _U0
    for w in range(NUM_WORDS):
        pos.mask[w] = _U0
        pos.board[w] = _U0
    for c in range(width):
        lane = (_U1 << np.uint64(height)) - _U1
        pos.board[c >> 2] |= lane << np.uint64((c & 3) * LANE_BITS)
    h = ZOBRIST_SIZE[height, width]
    cells = height * width
    if frow != NO_CELL:
        fbit = _U1 << np.uint64((fcol & 3) * LANE_BITS + frow)
        pos.mask[fcol >> 2] |= fbit
        pos.board[fcol >> 2] &= ~fbit
        h ^= ZOBRIST_FORBIDDEN[fcol * LANE_BITS + frow]
        cells -= 1
    else:
        h ^= ZOBRIST_FORBIDDEN[NUM_BITS]
    pos.hash = h
    for c in range(MAX_SIZE):
        pos.top[c] = height
    for c in range(width):
        pos.top[c] = 1 if (c == fcol and frow == 0) else 0
    pos.last[0, 0] = NO_CELL
    pos.last[0, 1] = NO_CELL
    pos.last[1, 0] = NO_CELL
    pos.last[1, 1] = NO_CELL
    pos.forbidden[0] = frow
    pos.forbidden[1] = fcol
    pos.height = height
    pos.width = width
    pos.result = RUNNING
    pos.ply = 0
    pos.cells = cells


@njit(cache=True)
def play(pos, col):
    """Drop a stone of the side to move into `col` and update result, hash, last moves.

    `col` must be legal (use :func:`legal_columns`); returns the new ``result``.
    """
    p = play_unchecked(pos, col)
    if has_four(pos.stones[p, 0], pos.stones[p, 1], pos.stones[p, 2]):
        pos.result = p + 1
    elif pos.ply == pos.cells:
        pos.result = DRAW
    return pos.result


@njit(cache=True)
def play_unchecked(pos, col):
    """`play` without the end-of-game check, for a move known not to end the game
    (the search knows from its tree). Returns the mover's player index (0 or 1)."""
    row = np.int64(pos.top[col])
    p = pos.ply & 1
    w = col >> 2
    off = (col & 3) * LANE_BITS + row
    bit = _U1 << np.uint64(off)
    pos.stones[p, w] |= bit
    pos.mask[w] |= bit
    pos.hash ^= ZOBRIST_STONES[p, col * LANE_BITS + row]
    nxt = row + 1
    if col == pos.forbidden[1] and nxt == pos.forbidden[0]:
        nxt += 1
    pos.top[col] = nxt
    pos.last[1, 0] = pos.last[0, 0]
    pos.last[1, 1] = pos.last[0, 1]
    pos.last[0, 0] = row
    pos.last[0, 1] = col
    pos.ply += 1
    return p


@njit(cache=True)
def legal_columns(pos):
    """Column mask of legal moves (0 once the game has ended)."""
    if pos.result != RUNNING:
        return 0
    m = 0
    h = pos.height
    for c in range(pos.width):
        if pos.top[c] < h:
            m |= 1 << c
    return m


@njit(cache=True)
def columns_of(c0, c1, c2, width):
    """Column mask of the columns that contain at least one bit of the cell set."""
    m = 0
    for c in range(width):
        w = c0 if c < 4 else (c1 if c < 8 else c2)
        if (w >> np.uint64((c & 3) * LANE_BITS)) & _LANE:
            m |= 1 << c
    return m


@njit(cache=True)
def playable_cells(pos):
    """The landing cell of every non-full column, as three words."""
    return (
        (pos.mask[0] + _BOTTOM) & ~pos.mask[0] & pos.board[0],
        (pos.mask[1] + _BOTTOM) & ~pos.mask[1] & pos.board[1],
        (pos.mask[2] + _BOTTOM) & ~pos.mask[2] & pos.board[2],
    )


@njit(cache=True)
def winning_cells(pos, p):
    """Empty cells where a stone of player index `p` (0: player 1) would make four."""
    s = pos.stones
    b0 = pos.board[0] & ~pos.mask[0]
    b1 = pos.board[1] & ~pos.mask[1]
    b2 = pos.board[2] & ~pos.mask[2]
    return threat_cells(s[p, 0], s[p, 1], s[p, 2], b0, b1, b2)


@njit(cache=True)
def sensible_columns(pos):
    """Column mask of sensible moves for the side to move.

    The columns that win at once if there are any; else, if the opponent threatens
    to win at once, the columns of those threats (all of them when there are
    several: the game is lost anyway); else every legal column.
    """
    if pos.result != RUNNING:
        return 0
    p = pos.ply & 1
    c0, c1, c2 = playable_cells(pos)
    w0, w1, w2 = winning_cells(pos, p)
    if (w0 & c0) | (w1 & c1) | (w2 & c2):
        return columns_of(w0 & c0, w1 & c1, w2 & c2, pos.width)
    o0, o1, o2 = winning_cells(pos, 1 - p)
    if (o0 & c0) | (o1 & c1) | (o2 & c2):
        return columns_of(o0 & c0, o1 & c1, o2 & c2, pos.width)
    return legal_columns(pos)


@njit(cache=True)
def compute_hash(pos):
    """Zobrist hash recomputed from scratch (equals the incrementally kept one)."""
    h = ZOBRIST_SIZE[pos.height, pos.width]
    if pos.forbidden[0] != NO_CELL:
        h ^= ZOBRIST_FORBIDDEN[pos.forbidden[1] * LANE_BITS + pos.forbidden[0]]
    else:
        h ^= ZOBRIST_FORBIDDEN[NUM_BITS]
    for p in range(2):
        for w in range(NUM_WORDS):
            x = pos.stones[p, w]
            for b in range(64):
                if (x >> np.uint64(b)) & _U1:
                    h ^= ZOBRIST_STONES[p, w * 64 + b]
    return h


@njit(inline="always")
def _mirror_words(src, dst, width):
    for w in range(NUM_WORDS):
        dst[w] = _U0
    for c in range(width):
        m = width - 1 - c
        lane = (src[c >> 2] >> np.uint64((c & 3) * LANE_BITS)) & _LANE
        dst[m >> 2] |= lane << np.uint64((m & 3) * LANE_BITS)


@njit(cache=True)
def mirror_into(src, dst):
    """Write the horizontal mirror of record `src` (column c -> width-1-c) into `dst`."""
    width = np.int64(src.width)
    dst.height = src.height
    dst.width = src.width
    dst.result = src.result
    dst.ply = src.ply
    dst.cells = src.cells
    for p in range(2):
        _mirror_words(src.stones[p], dst.stones[p], width)
    _mirror_words(src.mask, dst.mask, width)
    _mirror_words(src.board, dst.board, width)
    for c in range(MAX_SIZE):
        dst.top[c] = src.top[c]
    for c in range(width):
        dst.top[width - 1 - c] = src.top[c]
    dst.forbidden[0] = src.forbidden[0]
    dst.forbidden[1] = NO_CELL if src.forbidden[1] == NO_CELL else width - 1 - src.forbidden[1]
    for i in range(2):
        dst.last[i, 0] = src.last[i, 0]
        dst.last[i, 1] = NO_CELL if src.last[i, 1] == NO_CELL else width - 1 - src.last[i, 1]
    dst.hash = compute_hash(dst)


@njit(cache=True)
def copy_into(src, dst):
    """Copy record `src` into record `dst` field by field."""
    for p in range(2):
        for w in range(NUM_WORDS):
            dst.stones[p, w] = src.stones[p, w]
    for w in range(NUM_WORDS):
        dst.mask[w] = src.mask[w]
        dst.board[w] = src.board[w]
    dst.hash = src.hash
    for c in range(MAX_SIZE):
        dst.top[c] = src.top[c]
    for i in range(2):
        dst.last[i, 0] = src.last[i, 0]
        dst.last[i, 1] = src.last[i, 1]
        dst.forbidden[i] = src.forbidden[i]
    dst.height = src.height
    dst.width = src.width
    dst.result = src.result
    dst.ply = src.ply
    dst.cells = src.cells


@njit(cache=True)
def popcount16(m):
    n = 0
    while m:
        m &= m - 1
        n += 1
    return n


@njit(cache=True)
def nth_set_bit(m, k):
    """Index of the k-th (0-based) set bit of the non-negative int `m`."""
    i = 0
    while True:
        if m & 1:
            if k == 0:
                return i
            k -= 1
        m >>= 1
        i += 1


# -------------------------------------------------------------------- rebuild from storage
@njit(cache=True)
def rebuild_position(pos, height, width, frow, fcol, stones, last, ply):
    """Rebuild record `pos` from stored fields (as written to self-play shards).

    `stones` (2, 3) uint64 (player 1, player 2), `last` (2, 2) int8 (row, col) of the
    last and previous move, `ply` stones played. The result is RUNNING unless the
    stones contain a four or fill the board; returns the result.
    """
    setup_position(pos, height, width, frow, fcol)
    for p in range(2):
        for w in range(NUM_WORDS):
            pos.stones[p, w] = stones[p, w]
            pos.mask[w] |= stones[p, w]
    for c in range(width):
        lane = (pos.mask[c >> 2] >> np.uint64((c & 3) * LANE_BITS)) & _LANE
        r = 0
        while r < height and (lane >> np.uint64(r)) & _U1:
            r += 1
        pos.top[c] = r
    for i in range(2):
        pos.last[i, 0] = last[i, 0]
        pos.last[i, 1] = last[i, 1]
    pos.ply = ply
    pos.hash = compute_hash(pos)
    if has_four(stones[0, 0], stones[0, 1], stones[0, 2]):
        pos.result = 1
    elif has_four(stones[1, 0], stones[1, 1], stones[1, 2]):
        pos.result = 2
    elif ply == pos.cells:
        pos.result = DRAW
    return pos.result


@njit(cache=True)
def rebuild_batch(out, heights, widths, forbidden, stones, last, ply):
    """out[i] = rebuild_position(...) of row i of the stored arrays."""
    for i in range(out.shape[0]):
        rebuild_position(out[i], heights[i], widths[i], forbidden[i, 0], forbidden[i, 1],
                         stones[i], last[i], ply[i])
