"""c4fast: Numba bitboard rules and batched array MCTS for Saiblo Connect Four.

Never imports torch: the search talks to evaluators through plain numpy arrays.
"""

from c4fast._cache import ensure_numba_cache_dir

ensure_numba_cache_dir()

from c4fast.bitboard import DRAW, POSITION_DTYPE, RUNNING  # noqa: E402
from c4fast.encode import ENCODING_VERSION, NUM_PLANES, PLANE_NAMES  # noqa: E402
from c4fast.game import (  # noqa: E402
    SAIBLO_SIDES,
    SAIBLO_SIZES,
    Game,
    IllegalMove,
    check_setup,
    from_saiblo,
    outcome_for,
    parse_sizes,
    to_saiblo,
)
from c4fast.perft import perft  # noqa: E402

__all__ = [
    "DRAW",
    "ENCODING_VERSION",
    "Game",
    "IllegalMove",
    "NUM_PLANES",
    "PLANE_NAMES",
    "POSITION_DTYPE",
    "RUNNING",
    "SAIBLO_SIDES",
    "SAIBLO_SIZES",
    "check_setup",
    "from_saiblo",
    "outcome_for",
    "parse_sizes",
    "perft",
    "to_saiblo",
]
