"""Plain-Python reference of the Saiblo Connect Four rules, for differential tests.

Deliberately naive and independent of ``c4fast``: the board is a 2-D list
``cells[row][col]`` (row 0 is the bottom), every question is answered by
looking at the cells directly, and nothing is cached.  Speed is not a goal;
being obviously correct is.

Rules:

* ``height`` x ``width`` board, each in 4..12.
* An optional forbidden cell ``(row, col)`` never holds a stone.  A stone
  dropped into its column lands on the lowest free cell, passing over it; the
  forbidden cell also breaks any line through it.
* Player 1 moves first, then the players alternate.  Four or more in a row
  (horizontal, vertical, diagonal) wins at once; a full board without a win is
  a draw.
"""

from __future__ import annotations

import numpy as np

MIN_SIZE = 4
MAX_SIZE = 12
EMPTY = 0
FORBIDDEN = -1
NUM_PLANES = 9
# Directions of a line as (d_row, d_col); the opposite direction is implied.
LINE_DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))


class RefIllegalMove(ValueError):
    """A move the reference rules do not allow."""


class RefGame:
    """One game of Saiblo Connect Four, stored as a 2-D list of cells."""

    def __init__(self, height: int, width: int, forbidden: tuple[int, int] | None = None):
        for name, value in (("height", height), ("width", width)):
            if not MIN_SIZE <= value <= MAX_SIZE:
                raise ValueError(f"{name} must be in {MIN_SIZE}..{MAX_SIZE}, got {value}")
        self.height = height
        self.width = width
        self.cells = [[EMPTY] * width for _ in range(height)]
        if forbidden is not None:
            row, col = forbidden
            if not (0 <= row < height and 0 <= col < width):
                raise ValueError(f"forbidden cell {forbidden} is off the {height}x{width} board")
            self.cells[row][col] = FORBIDDEN
            forbidden = (row, col)
        self.forbidden = forbidden
        self.moves: list[int] = []  # column of every move, in order
        self.stones: list[tuple[int, int]] = []  # (row, col) of every move, in order
        self.result: int | None = None  # None running, 0 draw, 1 / 2 winner

    # ------------------------------------------------------------------ state
    @property
    def to_move(self) -> int:
        return 1 if len(self.moves) % 2 == 0 else 2

    def copy(self) -> "RefGame":
        other = RefGame.__new__(RefGame)
        other.height = self.height
        other.width = self.width
        other.forbidden = self.forbidden
        other.cells = [row[:] for row in self.cells]
        other.moves = self.moves[:]
        other.stones = self.stones[:]
        other.result = self.result
        return other

    def board(self) -> np.ndarray:
        """(H, W) int8: 0 empty, 1 / 2 stones, -1 forbidden; row 0 at the bottom."""
        return np.array(self.cells, dtype=np.int8).reshape(self.height, self.width)

    def key(self) -> tuple:
        """Hashable identity of the position (setup plus every cell)."""
        return (self.height, self.width, self.forbidden, tuple(tuple(row) for row in self.cells))

    # ------------------------------------------------------------------ moves
    def landing_row(self, col: int) -> int | None:
        """Row where a stone dropped into ``col`` comes to rest, or None if full."""
        for row in range(self.height):
            if self.cells[row][col] == EMPTY:
                return row
        return None

    def legal_moves(self) -> list[int]:
        if self.result is not None:
            return []
        return [col for col in range(self.width) if self.landing_row(col) is not None]

    def play(self, col: int) -> None:
        if self.result is not None:
            raise RefIllegalMove(f"game is over, cannot play column {col}")
        if not 0 <= col < self.width:
            raise RefIllegalMove(f"column {col} is off the board")
        row = self.landing_row(col)
        if row is None:
            raise RefIllegalMove(f"column {col} is full")
        player = self.to_move
        self.cells[row][col] = player
        self.moves.append(col)
        self.stones.append((row, col))
        if self.completes_line(row, col, player):
            self.result = player
        elif not any(EMPTY in row_cells for row_cells in self.cells):
            self.result = 0

    # ------------------------------------------------------------------ lines
    def _run(self, row: int, col: int, d_row: int, d_col: int, player: int) -> int:
        """Stones of ``player`` next to (row, col) going in direction (d_row, d_col)."""
        count = 0
        row, col = row + d_row, col + d_col
        while 0 <= row < self.height and 0 <= col < self.width and self.cells[row][col] == player:
            count += 1
            row, col = row + d_row, col + d_col
        return count

    def completes_line(self, row: int, col: int, player: int) -> bool:
        """Would a stone of ``player`` at (row, col) be part of four or more in a row?

        Only the neighbours are inspected, so this works both for a stone just
        placed there and for a hypothetical stone on an empty cell.
        """
        for d_row, d_col in LINE_DIRECTIONS:
            length = 1 + self._run(row, col, d_row, d_col, player) + self._run(row, col, -d_row, -d_col, player)
            if length >= 4:
                return True
        return False

    def winning_cells(self, player: int) -> set[tuple[int, int]]:
        """Empty, non-forbidden cells where a stone of ``player`` completes four in a row."""
        return {
            (row, col)
            for row in range(self.height)
            for col in range(self.width)
            if self.cells[row][col] == EMPTY and self.completes_line(row, col, player)
        }

    def immediate_wins(self, player: int) -> list[int]:
        """Legal columns where a stone of ``player`` would land and complete four."""
        return [col for col in self.legal_moves() if self.completes_line(self.landing_row(col), col, player)]

    def sensible_moves(self) -> list[int]:
        """Own immediate wins; else the opponent's immediate wins (blocks); else all legal moves."""
        own = self.immediate_wins(self.to_move)
        if own:
            return own
        blocks = self.immediate_wins(3 - self.to_move)
        if blocks:
            return blocks
        return self.legal_moves()

    # --------------------------------------------------------------- encoding
    def planes(self) -> np.ndarray:
        """Encoding version 1: (9, H, W) float32 from the side to move's perspective."""
        h, w = self.height, self.width
        me, opponent = self.to_move, 3 - self.to_move
        planes = np.zeros((NUM_PLANES, h, w), dtype=np.float32)
        for row in range(h):
            for col in range(w):
                cell = self.cells[row][col]
                if cell == me:
                    planes[0, row, col] = 1.0
                if cell == opponent:
                    planes[1, row, col] = 1.0
                if cell != FORBIDDEN:
                    planes[3, row, col] = 1.0
        for col in range(w):
            row = self.landing_row(col)
            if row is not None:
                planes[2, row, col] = 1.0
        if len(self.stones) >= 1:
            row, col = self.stones[-1]
            planes[4, row, col] = 1.0
        if len(self.stones) >= 2:
            row, col = self.stones[-2]
            planes[5, row, col] = 1.0
        for row, col in self.winning_cells(me):
            planes[6, row, col] = 1.0
        for row, col in self.winning_cells(opponent):
            planes[7, row, col] = 1.0
        if me == 1:
            planes[8, :, :] = 1.0
        return planes

    # --------------------------------------------------------------- symmetry
    def mirrored(self) -> "RefGame":
        """The same game with columns reversed (col -> width - 1 - col)."""
        forbidden = None
        if self.forbidden is not None:
            forbidden = (self.forbidden[0], self.width - 1 - self.forbidden[1])
        other = RefGame(self.height, self.width, forbidden)
        for col in self.moves:
            other.play(self.width - 1 - col)
        return other

    # ---------------------------------------------------------------- display
    def text_rows(self) -> list[str]:
        """Board rows as printed by ``str(game)``: top row first, marks X O # ."""
        marks = {EMPTY: ".", FORBIDDEN: "#", 1: "X", 2: "O"}
        return [" ".join(marks[cell] for cell in self.cells[row]) for row in reversed(range(self.height))]


def ref_from_moves(height: int, width: int, forbidden, moves) -> RefGame:
    game = RefGame(height, width, forbidden)
    for col in moves:
        game.play(col)
    return game


def ref_perft(game: RefGame, depth: int) -> int:
    """Number of sequences of exactly ``depth`` legal moves from ``game``."""
    if depth == 0:
        return 1
    total = 0
    for col in game.legal_moves():  # empty once the game is over
        child = game.copy()
        child.play(col)
        total += ref_perft(child, depth - 1)
    return total


def ref_solve(game: RefGame, memo: dict | None = None) -> tuple[int, int]:
    """Exact ``(outcome, plies)`` of a running game by plain minimax (no pruning, memoised
    on the position): outcome 0 win, 1 draw, 2 loss for the side to move, plies the moves
    to the end under perfect play (the fastest win, the slowest loss), the last included."""
    if game.result is not None:
        raise ValueError("the game is over")
    memo = {} if memo is None else memo
    key = game.key()
    if key in memo:
        return memo[key]
    best = None
    for col in game.legal_moves():
        child = game.copy()
        child.play(col)
        if child.result is not None:
            out = (1 if child.result == 0 else 0, 1)  # the move ends the game: a draw or our win
        else:
            o, d = ref_solve(child, memo)
            out = (2 - o, d + 1)
        rank = (out[0], out[1] if out[0] != 2 else -out[1])  # win soonest, draw, loss latest
        if best is None or rank < best[0]:
            best = (rank, out)
    memo[key] = best[1]
    return best[1]
