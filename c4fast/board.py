"""The board rules as one object: side range, Saiblo sizes, size lists, drawing a board.

Every other module asks :data:`RULES` (or a :class:`BoardRules` of its own) instead of
retyping ``4..12`` or ``9..12``. Conventions: sizes are ``(height, width)``; a forbidden
cell is ``(row, col)`` with row 0 at the bottom, or ``None``.

Drawing is part of the contract because saved games are reproduced from seeds (the
arena's paired boards, the loop's evaluation): :meth:`BoardRules.draw` consumes its
generator in one fixed order (size index, then the cell's row, then its column — the
cell is drawn even when the board has none), and that order must never change.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from c4fast import bitboard as bb

Size = tuple[int, int]
Cell = tuple[int, int]


@dataclasses.dataclass(frozen=True)
class BoardRules:
    """Which boards exist and how a random one is drawn.

    ============== ============ ====================================================
    field          default      meaning
    ============== ============ ====================================================
    min_side       4            smallest height or width the bitboards support
    max_side       12           largest (16-bit column lanes, 3 words per player)
    saiblo_sides   9, 10, 11,   Saiblo draws height and width each from these
                   12
    ============== ============ ====================================================
    """

    min_side: int = bb.MIN_SIZE
    max_side: int = bb.MAX_SIZE
    saiblo_sides: tuple[int, ...] = (9, 10, 11, 12)

    def __post_init__(self):
        if not bb.MIN_SIZE <= self.min_side <= self.max_side <= bb.MAX_SIZE:
            raise ValueError(f"BoardRules: sides must lie within {bb.MIN_SIZE}..{bb.MAX_SIZE}, "
                             f"got {self.min_side}..{self.max_side}")
        if not self.saiblo_sides or any(not self.min_side <= s <= self.max_side for s in self.saiblo_sides):
            raise ValueError(f"BoardRules: saiblo_sides {self.saiblo_sides} outside {self.min_side}..{self.max_side}")

    @property
    def saiblo_sizes(self) -> tuple[Size, ...]:
        """The Saiblo boards, height-major: (9, 9), (9, 10), ..., (12, 12)."""
        return tuple((h, w) for h in self.saiblo_sides for w in self.saiblo_sides)

    @property
    def sides(self) -> str:
        """The side range as text, for messages: ``4..12``."""
        return f"{self.min_side}..{self.max_side}"

    def check_size(self, height: int, width: int) -> Size:
        """(height, width) as ints; ValueError naming the range if either side is off it
        or not an integer."""
        for name, v in (("height", height), ("width", width)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise ValueError(f"{name} must be an integer, got {v!r}")
            if not self.min_side <= v <= self.max_side:
                raise ValueError(f"{name} must be in {self.sides}, got {v}")
        return int(height), int(width)

    def parse_sizes(self, text: str) -> tuple[Size, ...]:
        """Board sizes from text: ``saiblo`` (or ``all``, or empty: the Saiblo sizes) or a
        comma list like ``6x7,9x9``. ValueError otherwise."""
        text = text.strip().lower()
        if text in ("saiblo", "all", ""):
            return self.saiblo_sizes
        out = []
        for part in text.split(","):
            try:
                h, w = (int(x) for x in part.strip().split("x"))
            except ValueError:
                raise ValueError(f"bad board size {part!r}: expected HxW like 9x10") from None
            if not (self.min_side <= h <= self.max_side and self.min_side <= w <= self.max_side):
                raise ValueError(f"board size {h}x{w} outside {self.sides}")
            out.append((h, w))
        return tuple(out)

    def draw_cell(self, rng: np.random.Generator, height: int, width: int) -> Cell:
        """A uniform cell of the board (row draw first, then column)."""
        return int(rng.integers(height)), int(rng.integers(width))

    def draw(self, rng: np.random.Generator, sizes: tuple[Size, ...] | None = None,
             forbidden: bool = True) -> tuple[int, int, Cell | None]:
        """(height, width, forbidden cell or None): a uniform size of `sizes` (default
        the Saiblo sizes) and a uniform forbidden cell (drawn even when `forbidden` is
        False, so both kinds of run see the same sizes for a seed)."""
        sizes = self.saiblo_sizes if sizes is None else sizes
        h, w = sizes[int(rng.integers(len(sizes)))]
        cell = self.draw_cell(rng, h, w)
        return h, w, (cell if forbidden else None)


#: The rules every module uses.
RULES = BoardRules()
