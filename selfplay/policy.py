"""Self-play policy: what a self-play game does around each search (katac4's defaults).

Temperatures are functions of the game phase ``x = ply / cells`` (cells = playable
cells of the board, so x runs from 0 to 1 over a full game).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

SAIBLO_SIZES = tuple((h, w) for h in range(9, 13) for w in range(9, 13))  # the 16 sizes


def parse_sizes(text: str) -> tuple[tuple[int, int], ...]:
    """'saiblo' or a comma list like '6x7,9x9' -> ((6, 7), (9, 9)); ValueError otherwise."""
    text = text.strip().lower()
    if text in ("saiblo", "all", ""):
        return SAIBLO_SIZES
    out = []
    for part in text.split(","):
        try:
            h, w = (int(x) for x in part.strip().split("x"))
        except ValueError:
            raise ValueError(f"bad board size {part!r}: expected HxW like 9x10") from None
        if not (4 <= h <= 12 and 4 <= w <= 12):
            raise ValueError(f"board size {h}x{w} outside 4..12")
        out.append((h, w))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class SelfPlayConfig:
    """Settings of self-play games (the search itself is c4fast.config.SearchConfig).

    ====================== ======= ====================================================
    field                  default meaning
    ====================== ======= ====================================================
    root_temp_start        1.35    root policy temperature max(floor, start * base^x)
    root_temp_base         0.66
    root_temp_floor        1.03
    move_temp_base         0.8     move sampling temperature base^(1 + decay * x)
    move_temp_decay        1.0
    opening_max            4       the first k ~ U{0..opening_max} moves are sampled from
                                   the raw policy (one evaluation, no sample recorded)
    forbidden_cell         True    random forbidden cell (False: none, e.g. standard 6x7)
    games_per_size         0       games a worker plays on one size before rotating
                                   (0: as many as it plays at once)
    ====================== ======= ====================================================
    """

    root_temp_start: float = 1.35
    root_temp_base: float = 0.66
    root_temp_floor: float = 1.03
    move_temp_base: float = 0.8
    move_temp_decay: float = 1.0
    opening_max: int = 4
    forbidden_cell: bool = True
    games_per_size: int = 0

    def __post_init__(self):
        for f in ("root_temp_start", "root_temp_base", "root_temp_floor", "move_temp_base"):
            v = getattr(self, f)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"SelfPlayConfig.{f} must be > 0, got {v!r}")
        if self.move_temp_decay < 0:
            raise ValueError(f"SelfPlayConfig.move_temp_decay must be >= 0, got {self.move_temp_decay}")
        if self.opening_max < 0 or self.games_per_size < 0:
            raise ValueError("SelfPlayConfig.opening_max and games_per_size must be >= 0")

    def root_temperature(self, ply: int, cells: int) -> float:
        x = ply / max(cells, 1)
        return max(self.root_temp_floor, self.root_temp_start * self.root_temp_base**x)

    def move_temperature(self, ply: int, cells: int) -> float:
        x = ply / max(cells, 1)
        return self.move_temp_base ** (1.0 + self.move_temp_decay * x)

    def draw_setup(self, rng: np.random.Generator, height: int, width: int):
        """A forbidden cell (row, col) uniform on the board, or None."""
        if not self.forbidden_cell:
            return None
        return int(rng.integers(height)), int(rng.integers(width))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
