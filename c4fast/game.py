"""The public single-game API: :class:`Game`, a thin object over one bitboard record.

Row 0 is the bottom; ``forbidden`` is ``(row, col)`` or ``None``. Player 1 moves
first. Every method validates its input: an illegal move raises :class:`IllegalMove`
and leaves the game unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from c4fast import bitboard as bb
from c4fast.board import RULES
from c4fast.encode import NUM_PLANES, encode_position

SAIBLO_SIDES = RULES.saiblo_sides  # Saiblo draws height and width each from 9..12
SAIBLO_SIZES = RULES.saiblo_sizes  # the 16 (H, W) boards
parse_sizes = RULES.parse_sizes


class IllegalMove(ValueError):
    """A column out of range, a full column, or a move after the game ended."""


def check_setup(height: int, width: int, forbidden) -> tuple[int, int, int, int]:
    """Validate a board setup; returns (height, width, forbidden_row, forbidden_col)."""
    height, width = RULES.check_size(height, width)
    if forbidden is None:
        return int(height), int(width), bb.NO_CELL, bb.NO_CELL
    try:
        cells = tuple(forbidden)
        if len(cells) != 2 or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in cells):
            raise TypeError
        frow, fcol = (int(x) for x in cells)
    except TypeError:
        raise ValueError(f"forbidden must be None or (row, col) integers, got {forbidden!r}") from None
    if not (0 <= frow < height and 0 <= fcol < width):
        raise ValueError(
            f"forbidden cell {(frow, fcol)} is off the {height}x{width} board "
            f"(rows 0..{height - 1}, cols 0..{width - 1})"
        )
    return int(height), int(width), frow, fcol


def outcome_for(result: int, ply: int) -> int:
    """A finished game's ``result`` (0 draw, else the winner, 1 or 2) for the side to move
    after ``ply`` stones (player ``ply % 2 + 1``): 0 win, 1 draw, 2 loss, the shards'
    ``outcome`` convention."""
    if result == 0:
        return 1
    return 0 if int(result) == int(ply) % 2 + 1 else 2


def to_saiblo(row: int, col: int, height: int) -> tuple[int, int]:
    """Our (row from the bottom, col) -> Saiblo's (x = row from the top, y = col)."""
    return height - 1 - row, col


def from_saiblo(x: int, y: int, height: int) -> tuple[int, int]:
    """Saiblo's (x = row from the top, y = col) -> our (row from the bottom, col)."""
    return height - 1 - x, y


def _mask_to_list(m: int) -> list[int]:
    return [c for c in range(bb.MAX_SIZE) if (m >> c) & 1]


def _cells_to_set(words, height: int, width: int) -> set[tuple[int, int]]:
    out = set()
    for c in range(width):
        lane = (int(words[c >> 2]) >> ((c & 3) * bb.LANE_BITS)) & 0xFFFF
        for r in range(height):
            if (lane >> r) & 1:
                out.add((r, c))
    return out


class Game:
    """A Connect Four game on a height x width board with an optional forbidden cell."""

    __slots__ = ("_state", "_moves")

    def __init__(self, height: int, width: int, forbidden=None):
        h, w, fr, fc = check_setup(height, width, forbidden)
        self._state = np.zeros(1, dtype=bb.POSITION_DTYPE)
        bb.setup_position(self._state[0], h, w, fr, fc)
        self._moves: list[int] = []

    # ------------------------------------------------------------------ builders
    @classmethod
    def random(cls, rng: np.random.Generator | None = None) -> "Game":
        """A Saiblo setup (:meth:`c4fast.board.BoardRules.draw`): a uniform Saiblo size, a
        uniform forbidden cell."""
        rng = np.random.default_rng() if rng is None else rng
        return cls(*RULES.draw(rng))

    @classmethod
    def from_moves(cls, height: int, width: int, forbidden, moves: Iterable[int]) -> "Game":
        """Replay `moves` (columns) from the empty board; raises IllegalMove on the first bad one."""
        g = cls(height, width, forbidden)
        for i, c in enumerate(moves):
            try:
                g.play(c)
            except IllegalMove as e:
                raise IllegalMove(f"move {i} of the sequence: {e}") from None
        return g

    @classmethod
    def from_state(cls, state: np.ndarray, moves: Iterable[int] = ()) -> "Game":
        """Wrap a copy of one POSITION_DTYPE record (moves, if given, for the record only)."""
        g = cls.__new__(cls)
        g._state = np.array(state, dtype=bb.POSITION_DTYPE).reshape(1).copy()
        g._moves = list(moves)
        return g

    # ------------------------------------------------------------------ moves
    def play(self, col: int) -> None:
        """Drop a stone of the side to move into column `col`."""
        s = self._state[0]
        if s["result"] != bb.RUNNING:
            raise IllegalMove(f"column {col}: the game is over (result {self.result})")
        if isinstance(col, bool) or not isinstance(col, (int, np.integer)):
            raise IllegalMove(f"column must be an integer, got {col!r}")
        if not 0 <= col < self.width:
            raise IllegalMove(f"column {col} is off the board (columns 0..{self.width - 1})")
        if s["top"][col] >= s["height"]:
            raise IllegalMove(f"column {col} is full")
        bb.play(self._state[0], int(col))
        self._moves.append(int(col))

    def legal_moves(self) -> list[int]:
        return _mask_to_list(bb.legal_columns(self._state[0]))

    def sensible_moves(self) -> list[int]:
        """Winning columns if any; else columns that stop an opponent win; else all legal."""
        return _mask_to_list(bb.sensible_columns(self._state[0]))

    def winning_cells(self, player: int) -> set[tuple[int, int]]:
        """Empty cells (row, col) where a stone of `player` (1 or 2) would make four."""
        if player not in (1, 2):
            raise ValueError(f"player must be 1 or 2, got {player!r}")
        words = bb.winning_cells(self._state[0], player - 1)
        return _cells_to_set(words, self.height, self.width)

    # ------------------------------------------------------------------ views
    @property
    def height(self) -> int:
        return int(self._state[0]["height"])

    @property
    def width(self) -> int:
        return int(self._state[0]["width"])

    @property
    def forbidden(self) -> tuple[int, int] | None:
        r, c = (int(x) for x in self._state[0]["forbidden"])
        return None if r == bb.NO_CELL else (r, c)

    @property
    def result(self) -> int | None:
        """None while running, 0 for a draw, 1 or 2 for the winner."""
        r = int(self._state[0]["result"])
        return None if r == bb.RUNNING else r

    @property
    def to_move(self) -> int:
        """The player (1 or 2) whose turn it is."""
        return int(self._state[0]["ply"]) % 2 + 1

    @property
    def ply(self) -> int:
        return int(self._state[0]["ply"])

    @property
    def moves(self) -> list[int]:
        return list(self._moves)

    @property
    def hash(self) -> int:
        return int(self._state[0]["hash"])

    @property
    def state(self) -> np.ndarray:
        """A copy of the underlying POSITION_DTYPE record (shape (1,))."""
        return self._state.copy()

    def board(self) -> np.ndarray:
        """(height, width) int8: 0 empty, 1 / 2 stones, -1 the forbidden cell; row 0 bottom."""
        s = self._state[0]
        out = np.zeros((self.height, self.width), dtype=np.int8)
        for p in (1, 2):
            for r, c in _cells_to_set(s["stones"][p - 1], self.height, self.width):
                out[r, c] = p
        if self.forbidden is not None:
            out[self.forbidden] = -1
        return out

    def planes(self) -> np.ndarray:
        """Network input planes (NUM_PLANES, height, width) float32; see c4fast.encode."""
        out = np.zeros((NUM_PLANES, self.height, self.width), dtype=np.float32)
        encode_position(self._state[0], out)
        return out

    def copy(self) -> "Game":
        return Game.from_state(self._state, self._moves)

    def mirror(self) -> "Game":
        """The position with columns reversed (c -> width-1-c), forbidden cell included."""
        g = Game.from_state(self._state, [self.width - 1 - c for c in self._moves])
        bb.mirror_into(self._state[0], g._state[0])
        return g

    def __eq__(self, other) -> bool:
        if not isinstance(other, Game):
            return NotImplemented
        return (
            self.height == other.height
            and self.width == other.width
            and self.forbidden == other.forbidden
            and np.array_equal(self.board(), other.board())
        )

    def __hash__(self) -> int:
        return self.hash

    def __repr__(self) -> str:
        return (
            f"Game({self.height}, {self.width}, forbidden={self.forbidden}, "
            f"moves={self._moves}, result={self.result})"
        )

    def __str__(self) -> str:
        """The board, top row first: 'X' player 1, 'O' player 2, '#' forbidden, '.' empty."""
        marks = {0: ".", 1: "X", 2: "O", -1: "#"}
        b = self.board()
        rows = [" ".join(marks[int(v)] for v in b[r]) for r in range(self.height - 1, -1, -1)]
        rows.append(" ".join(str(c % 10) for c in range(self.width)))
        return "\n".join(rows)
