"""Network input planes for a batch of positions (encoding version 1).

Every plane is 0/1 ``float32`` indexed ``[plane, row, col]`` with row 0 at the bottom,
seen from the side to move ("own" = the player whose turn it is):

==  ==========================================================================
0   own stones
1   opponent stones
2   playable cells: the landing cell of every non-full column
3   on board and not forbidden (all ones except the forbidden cell)
4   the cell of the most recent move (zero at ply 0)
5   the cell of the move before that (zero at ply <= 1)
6   own winning cells: empty cells where an own stone would make four (playable or not)
7   opponent winning cells
8   all ones if the side to move is player 1 (the first player), else zero
==  ==========================================================================

Changing any plane means a new :data:`ENCODING_VERSION`; checkpoints and data files
record the version they were made with. (Version 2 appended two parity planes; it lost
its ablation and was removed after commit 0f5c532, docs/ABLATIONS.md.)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from numba.cpython.unsafe.numbers import trailing_zeros

from c4fast.bitboard import NO_CELL, playable_cells, winning_cells

_U1 = np.uint64(1)

ENCODING_VERSION = 1
PLANE_NAMES = (
    "own_stones",
    "opponent_stones",
    "playable",
    "on_board",
    "last_move",
    "previous_move",
    "own_wins",
    "opponent_wins",
    "first_player_to_move",
)
NUM_PLANES = len(PLANE_NAMES)


@njit(inline="always")
def _scatter(out, plane, c0, c1, c2):
    """Set out[plane, row, col] = 1 for every cell of the three-word set."""
    for w in range(3):
        x = c0 if w == 0 else (c1 if w == 1 else c2)
        while x:
            b = trailing_zeros(x)
            x &= x - _U1
            col = w * 4 + (b >> 4)
            out[plane, b & 15, col] = 1.0


@njit(cache=True)
def encode_position(pos, out):
    """Write the planes of record `pos` into `out` of shape (NUM_PLANES, H, W).

    `out` may be larger than the board (H >= height, W >= width); cells outside
    the board are set to zero in every plane.
    """
    out[:] = 0.0
    p = pos.ply & 1
    h = pos.height
    w = pos.width
    s = pos.stones
    _scatter(out, 0, s[p, 0], s[p, 1], s[p, 2])
    _scatter(out, 1, s[1 - p, 0], s[1 - p, 1], s[1 - p, 2])
    c0, c1, c2 = playable_cells(pos)
    _scatter(out, 2, c0, c1, c2)
    out[3, :h, :w] = 1.0
    if pos.forbidden[0] != NO_CELL:
        out[3, pos.forbidden[0], pos.forbidden[1]] = 0.0
    if pos.last[0, 0] != NO_CELL:
        out[4, pos.last[0, 0], pos.last[0, 1]] = 1.0
    if pos.last[1, 0] != NO_CELL:
        out[5, pos.last[1, 0], pos.last[1, 1]] = 1.0
    m0, m1, m2 = winning_cells(pos, p)
    _scatter(out, 6, m0, m1, m2)
    o0, o1, o2 = winning_cells(pos, 1 - p)
    _scatter(out, 7, o0, o1, o2)
    if p == 0:
        out[8, :h, :w] = 1.0


@njit(cache=True)
def encode_batch(states, out):
    """out[i] = planes of states[i]; `out` is a preallocated (B, NUM_PLANES, H, W) array."""
    for i in range(states.shape[0]):
        encode_position(states[i], out[i])
