"""Players that use a trained network: graph search (MCGS) with a playout or time
budget, or the raw policy alone (katac4's "fastc4").

Weights come from a torch checkpoint (``.pt``) or a torch-free numpy export (``.npz``,
see nets.numpy_net) — the latter starts in a fraction of a second, which matters for
the Saiblo ladder. The player fulfils :class:`c4fast.protocols.Player`. Its search
settings are an explicit :class:`c4fast.config.SearchConfig` (recorded by whoever builds
it; ``nets.players.make_player`` is the factory).
"""

from __future__ import annotations

import os
import time

import numpy as np

import c4fast
from c4fast.config import SearchConfig
from c4fast.evaluators import column_probabilities
from c4fast.mcgs import GraphSearch


def load_evaluator(path: str, threads: int = 1):
    """An evaluator for a checkpoint: NumpyEvaluator for .npz (no torch import), else TorchEvaluator."""
    if path.endswith(".npz"):
        from nets.evaluator import NumpyEvaluator
        from nets.numpy_net import NumpyNet

        return NumpyEvaluator(NumpyNet.load(path))
    import torch

    from nets.checkpoint import latest_checkpoint, load_checkpoint
    from nets.evaluator import TorchEvaluator

    if os.path.isdir(path):
        found = latest_checkpoint(path)
        if found is None:
            raise ValueError(f"no model_XXXXXXXX.pt checkpoint in {path!r}")
        path = found
    if threads > 0:
        torch.set_num_threads(threads)
    model, _, _ = load_checkpoint(path)
    return TorchEvaluator(model)


class NetPlayer:
    """Network + MCGS (playouts > 0 or seconds > 0), or policy only (playouts == 0)."""

    def __init__(self, path: str, playouts: int = 200, seconds: float = 0.0, name: str | None = None,
                 evaluator=None, search: SearchConfig | None = None, threads: int = 1):
        if playouts < 0 or seconds < 0:
            raise ValueError(f"playouts and seconds must be >= 0, got {playouts}, {seconds}")
        self.path = path
        self.playouts = int(playouts)
        self.seconds = float(seconds)
        self.ev = evaluator if evaluator is not None else load_evaluator(path, threads)
        self.config = search if search is not None else SearchConfig()
        self.name = name or (f"net:{os.path.basename(path)}:" + (f"{self.playouts}" if self.playouts else "policy"))
        self.search: GraphSearch | None = None
        self._analysis: dict = {}

    def reset(self, game: c4fast.Game) -> None:
        budget = max(self.playouts, 1) if not self.seconds else 200_000
        if self.search is None or (self.search.height, self.search.width) != (game.height, game.width) \
                or self.search.max_playouts < budget:
            self.search = GraphSearch(self.config, game.height, game.width, max_playouts=budget)
        self._analysis = {}

    def _policy_only(self, game: c4fast.Game) -> int:
        planes = game.planes()[None]
        logits, wdl = self.ev.evaluate(planes, game.state)
        cols = game.sensible_moves()
        p = column_probabilities(logits[0], game.state[0], cols)
        self._analysis = {"wdl": tuple(float(x) for x in wdl[0]),
                          "policy": {int(c): float(x) for c, x in zip(cols, p)}}
        return int(cols[int(np.argmax(p))])

    def choose(self, game: c4fast.Game) -> int:
        if game.result is not None:
            raise ValueError("the game is over")
        if self.search is None or (self.search.height, self.search.width) != (game.height, game.width):
            self.reset(game)
        if self.playouts == 0 and not self.seconds:
            return self._policy_only(game)
        self.search.set_position(game.state)
        t0 = time.perf_counter()
        if self.seconds:
            self.search.run(self.ev, seconds=self.seconds)
        else:
            self.search.run(self.ev, playouts=self.playouts)
        visits = self.search.root_visits()
        self._analysis = {"wdl": tuple(float(x) for x in self.search.root_wdl()),
                          "visits": {int(c): int(v) for c, v in enumerate(visits) if v > 0},
                          "playouts": self.search.playouts(), "seconds": time.perf_counter() - t0}
        return self.search.best_move()

    def analysis(self) -> dict:
        return dict(self._analysis)
