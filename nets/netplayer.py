"""Players that use a trained network: graph search (MCGS) with a playout or time
budget, or the raw policy alone (katac4's "fastc4").

Weights come from a torch checkpoint (``.pt``) or a torch-free numpy export (``.npz``,
see nets.numpy_net) — the latter starts in a fraction of a second, which matters for
the Saiblo ladder. The player fulfils :class:`c4fast.protocols.Player`. Its search
settings are an explicit :class:`c4fast.config.SearchConfig` (recorded by whoever builds
it; ``nets.players.make_player`` is the factory).

Play-time strength: the graph search propagates proven results (``SearchConfig.proofs``)
and, once few cells are empty (:class:`c4fast.config.EndgameConfig`), the player first
solves the position exactly (:class:`c4fast.players.endgame.EndgameSolver`) within a share
of its time budget (or a node budget under a playout budget) and plays an optimal move;
a solve that does not finish hands the rest of the budget to the search.
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np

import c4fast
from c4fast.config import EndgameConfig, SearchConfig
from c4fast.evaluators import column_probabilities
from c4fast.mcgs import GraphSearch
from c4fast.players.endgame import EndgameSolver, empty_cells
from nets.config import PLAY_FORWARDS

log = logging.getLogger(__name__)


def load_evaluator(path: str, threads: int = 1, forward: str = "auto"):
    """An evaluator for the weights at `path` (a ``.pt`` checkpoint, a directory of them:
    the newest, or a ``.npz`` numpy export) computed by `forward`, one of
    :data:`nets.config.PLAY_FORWARDS`.

    "auto": a ``.npz`` runs the numpy forward (no torch import), a ``.pt``
    :func:`auto_play_forward`, or where that engine does not start (its runtime fails to
    load or compile) ONNX Runtime, else eager torch, with a warning. `threads`: torch threads and the ONNX Runtime or OpenVINO
    engine's threads (0: the libraries' defaults; torch gets one thread when such an engine
    computes the net). ValueError for an unknown
    forward, a ``.npz`` asked for a torch or ONNX forward, or a directory without checkpoints.
    """
    if forward not in PLAY_FORWARDS:
        raise ValueError(f"forward must be one of {PLAY_FORWARDS}, got {forward!r}")
    if path.endswith(".npz"):
        if forward not in ("auto", "numpy"):
            raise ValueError(f"{path!r} is a numpy export: it runs only the 'numpy' forward, "
                             f"not {forward!r} (give the .pt checkpoint for that)")
        from nets.evaluator import NumpyEvaluator
        from nets.numpy_net import NumpyNet

        return NumpyEvaluator(NumpyNet.load(path))
    import torch

    from nets.checkpoint import latest_checkpoint, load_checkpoint

    if os.path.isdir(path):
        found = latest_checkpoint(path)
        if found is None:
            raise ValueError(f"no model_XXXXXXXX.pt checkpoint in {path!r}")
        path = found
    if threads > 0:
        torch.set_num_threads(threads)
    model, _, _ = load_checkpoint(path)
    from nets.backends import BackendUnavailable
    from nets.evaluator import TorchEvaluator

    if forward != "auto":
        return _engine_evaluator(model, forward, threads)
    # auto: the preferred engine, else ONNX Runtime, else eager torch (a runtime that is
    # installed but fails to load or compile must not stop a player)
    for kind in dict.fromkeys((auto_play_forward(), "ort")):
        if kind == "eager":
            break
        try:
            return _engine_evaluator(model, kind, threads)
        except (BackendUnavailable, RuntimeError) as e:
            log.warning("forward auto: %s did not start (%s); trying the next engine", kind, e)
    return TorchEvaluator(model)


def _engine_evaluator(model, kind: str, threads: int):
    """An evaluator of `model` computed by the engine `kind` (``eager``: plain torch)."""
    from nets.backends import CpuBackend
    from nets.evaluator import BackendEvaluator, TorchEvaluator

    if kind == "eager":
        return TorchEvaluator(model)
    backend = CpuBackend(model, kind, threads=max(threads, 0))
    backend.settle_torch_threads()
    return BackendEvaluator(backend)


def auto_play_forward() -> str:
    """The forward ``auto`` gives a ``.pt`` net player: OpenVINO bf16 (``ov_bf16``) on CPUs
    with bf16 units where ``openvino`` is installed (on the AMX machine 1.68x the playouts of
    ONNX Runtime at 0.2 s per move, docs/PERFORMANCE.md), else ONNX Runtime fp32 (``ort``),
    else eager torch. No timing: a player starts at once."""
    from nets.precision import cpu_info

    if cpu_info().has("bf16") and _have("openvino", "onnx"):
        return "ov_bf16"
    return "ort" if _have("onnxruntime", "onnx") else "eager"


def _have(*modules: str) -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in modules)


class NetPlayer:
    """Network + MCGS (playouts > 0 or seconds > 0), or policy only (playouts == 0).

    ``analysis()`` after a search move: ``wdl`` (side to move), ``visits``, ``q`` ({column:
    mean value in [-1, 1] for the side to move} of the visited or proven columns: the move is
    the highest Q among well-visited columns, ``SearchConfig.select_q``), ``playouts``
    (root visits), ``reused`` (of those, the ones kept from the last move's search: under a
    time budget with ``SearchConfig.tree_reuse``), ``seconds``, ``proven`` ({column: 'win' |
    'draw' | 'loss'} for the side to move, where known: from the exact solve, else from the
    search's proofs), ``solved`` (True if the move came from the exact endgame solve; then
    ``score``, Pons's score, and ``nodes``), and ``moves_left`` where the net has the
    moves-left head (``NetConfig.moves_left``): the estimated plies until the game ends from
    the position it moved in (the search's mean at the root, the exact distance once the
    root is proven; the raw net's estimate for a policy-only player). The search uses the
    moves-left utility only when ``SearchConfig.moves_left_slope`` > 0.

    `forward`: what computes the net when no `evaluator` is given (:func:`load_evaluator`).
    """

    def __init__(self, path: str, playouts: int = 200, seconds: float = 0.0, name: str | None = None,
                 evaluator=None, search: SearchConfig | None = None, threads: int = 1,
                 endgame: EndgameConfig | None = None, forward: str = "auto"):
        if playouts < 0 or seconds < 0:
            raise ValueError(f"playouts and seconds must be >= 0, got {playouts}, {seconds}")
        self.path = path
        self.playouts = int(playouts)
        self.seconds = float(seconds)
        self.ev = evaluator if evaluator is not None else load_evaluator(path, threads, forward)
        self.config = search if search is not None else SearchConfig()
        self.endgame = endgame if endgame is not None else EndgameConfig()
        self.solver: EndgameSolver | None = None
        self.name = name or (f"net:{os.path.basename(path)}:" + (f"{self.playouts}" if self.playouts else "policy"))
        self.search: GraphSearch | None = None
        self._analysis: dict = {}
        self._keep = False  # the graph holds this game's last search

    def reset(self, game: c4fast.Game) -> None:
        budget = max(self.playouts, 1) if not self.seconds else 200_000
        if self.search is None or (self.search.height, self.search.width) != (game.height, game.width) \
                or self.search.max_playouts < budget:
            self.search = GraphSearch(self.config, game.height, game.width, max_playouts=budget)
        self._analysis = {}
        self._keep = False

    def _policy(self, game: c4fast.Game, cols: list[int]):
        """(net WDL, probabilities of `cols`) of the raw network."""
        logits, wdl = self.ev.evaluate(game.planes()[None], game.state)
        return wdl, column_probabilities(logits[0], game.state[0], cols)

    def _solve(self, game: c4fast.Game, t0: float) -> int | None:
        """An optimal move by the exact endgame solve, or None (too many empty cells, or
        the budget ran out)."""
        cfg = self.endgame
        if empty_cells(game) > cfg.max_empty:
            return None
        if self.solver is None:
            self.solver = EndgameSolver(cfg.tt_log2)
        if self.seconds:
            res = self.solver.solve(game, seconds=cfg.share * self.seconds)
        else:
            res = self.solver.solve(game, nodes=cfg.nodes)
        if res is None:
            return None
        col = res.best[0]
        if len(res.best) > 1:
            _, p = self._policy(game, res.best)
            col = res.best[int(np.argmax(p))]
        wdl = (1.0, 0.0, 0.0) if res.score > 0 else ((0.0, 1.0, 0.0) if res.score == 0 else (0.0, 0.0, 1.0))
        self._analysis = {"wdl": wdl, "proven": dict(res.proven), "solved": True, "score": res.score,
                          "nodes": res.nodes, "seconds": time.perf_counter() - t0}
        return int(col)

    def _policy_only(self, game: c4fast.Game) -> int:
        cols = game.sensible_moves()
        wdl, p = self._policy(game, cols)
        self._analysis = {"wdl": tuple(float(x) for x in wdl[0, :3]),
                          "policy": {int(c): float(x) for c, x in zip(cols, p)}}
        if wdl.shape[1] == 4:
            self._analysis["moves_left"] = float(wdl[0, 3])
        return int(cols[int(np.argmax(p))])

    def choose(self, game: c4fast.Game) -> int:
        if game.result is not None:
            raise ValueError("the game is over")
        if self.search is None or (self.search.height, self.search.width) != (game.height, game.width):
            self.reset(game)
        if self.playouts == 0 and not self.seconds:
            return self._policy_only(game)
        t0 = time.perf_counter()
        col = self._solve(game, t0)
        if col is not None:
            return col
        # under a time budget, the search goes on from the graph of this game's last move
        # (SearchConfig.tree_reuse); a playout budget counts this move's playouts only
        keep = bool(self.seconds) and self.config.tree_reuse and self._keep
        reused = int(self.search.graph.visits[self.search.root]) \
            if self.search.set_position(game.state, keep=keep) else 0
        self._keep = True
        if self.seconds:
            self.search.run(self.ev, seconds=max(self.seconds - (time.perf_counter() - t0), 0.0))
        else:
            self.search.run(self.ev, playouts=self.playouts)
        visits = self.search.root_visits()
        self._analysis = {"wdl": tuple(float(x) for x in self.search.root_wdl()),
                          "visits": {int(c): int(v) for c, v in enumerate(visits) if v > 0},
                          "q": self.search.root_q(),
                          "playouts": self.search.playouts(), "reused": reused,
                          "seconds": time.perf_counter() - t0,
                          "proven": self.search.root_proven(), "solved": False}
        moves_left = self.search.root_moves_left()
        if moves_left is not None:
            self._analysis["moves_left"] = moves_left
        return self.search.best_move()

    def analysis(self) -> dict:
        return dict(self._analysis)
