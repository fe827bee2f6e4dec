"""The typed contracts between search, evaluators and players (types only, no logic).

Conventions used by every contract:

- Boards are ``(H, W)`` with row 0 at the bottom; a column's *landing cell* is the
  cell its next stone occupies (``record["top"][col]``, the forbidden cell hopped over).
- Values are from the point of view of the side **to move** in the evaluated position:
  ``wdl = (win, draw, loss)`` probabilities, summing to 1.

:class:`Evaluator` is what :func:`c4fast.mcts.run_search`, :class:`c4fast.mcgs.GraphSearch`
and the self-play worker call; :class:`ZeroCopyEvaluator` adds a planes buffer the search
writes straight into (the inference server's shared memory). :class:`Player` is what the
arena, the Saiblo player, the web board and human play drive; ``nets.players.make_player``
builds one from a spec string.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Evaluator", "ZeroCopyEvaluator", "Player"]


@runtime_checkable
class Evaluator(Protocol):
    """Policy logits and win/draw/loss for a batch of leaf positions.

    ``evaluate(planes, positions) -> (logits, wdl)``:

    - ``planes``: ``(B, NUM_PLANES, H, W)`` float32 or 0/1 uint8 from :mod:`c4fast.encode`;
    - ``positions``: the ``B`` ``POSITION_DTYPE`` records of the same leaves (network
      evaluators may ignore them);
    - ``logits``: float32 ``(B, H, W)`` policy logits over cells (only the landing cells
      of legal columns are read);
    - ``wdl``: float32 ``(B, 3)`` probabilities for the side to move, or ``(B, 4)`` from a
      net with the moves-left head: the 4th column is its estimate of the plies left until
      the game ends (>= 0), which the searches' moves-left utility reads
      (``SearchConfig.moves_left_slope``; with 3 columns the utility stays off).

    The returned arrays may be views that the next call overwrites.
    """

    def evaluate(self, planes: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


@runtime_checkable
class ZeroCopyEvaluator(Evaluator, Protocol):
    """An evaluator whose input buffer the search fills in place.

    ``planes_buffer(height, width)`` returns a writable ``(max_batch, C, H, W)`` array;
    ``evaluate`` is then called with a leading slice of that very array.
    """

    max_batch: int

    def planes_buffer(self, height: int, width: int) -> np.ndarray: ...


@runtime_checkable
class Player(Protocol):
    """A move chooser for one game at a time.

    ``reset(game)`` before a new game; ``choose(game) -> column`` for the side to move
    (never mutates `game`; raises ``ValueError`` on a finished game); ``analysis()``
    describes the last ``choose``: ``wdl`` (win, draw, loss for the side that moved) and,
    where the player has them, ``policy`` / ``visits`` ({column: value}), ``q`` ({column: the
    search's mean value in [-1, 1] for the side to move}), ``values``, ``pv`` (a list of
    columns), ``score`` / ``exact`` / ``depth``, ``moves_left`` (estimated plies until the
    game ends, from the position it moved in). ``name`` is its spec.
    """

    name: str

    def reset(self, game) -> None: ...

    def choose(self, game) -> int: ...

    def analysis(self) -> dict: ...
