"""Search configuration: one frozen dataclass, katac4's values as defaults."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import field
from typing import NamedTuple

from c4fast.cli import opt


class KernelParams(NamedTuple):
    """The scalar settings the Numba kernels read (built by SearchConfig.kernel_params)."""

    c_puct: float
    fpu_reduction: float
    noise_alpha: float
    noise_fraction: float
    forced_k: float
    leaves_per_step: int
    sensible: bool
    proofs: bool
    moves_left_slope: float
    moves_left_cap: float
    moves_left_threshold: float


#: values of SearchConfig.root_search
ROOT_SEARCHES = ("puct", "gumbel")


class GumbelParams(NamedTuple):
    """The Gumbel root-search settings the Numba kernels read (SearchConfig.gumbel_params)."""

    enabled: bool
    actions: int
    c_visit: float
    c_scale: float


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Settings of the batched MCTS (:mod:`c4fast.mcts`) and the graph search (:mod:`c4fast.mcgs`).

    ==================== ======= ==========================================================
    field                default meaning
    ==================== ======= ==========================================================
    c_puct               1.1     PUCT exploration constant
    fpu_reduction        0.2     unvisited child value = parent value - fpu * sqrt(visited prior mass)
    noise_alpha          0.8     root Dirichlet concentration (full searches only)
    noise_fraction       0.25    share of the Dirichlet sample mixed into the root priors
    forced_k             2.0     forced playouts n = sqrt(k * P * total visits) at the root
                                 (full searches only; 0 disables, and disables pruning)
    full_playouts        800     root visits of a full search
    fast_playouts        160     root visits of a fast search (playout cap randomization)
    full_probability     0.25    chance that a self-play search is full
    leaves_per_step      8       leaves selected per game per `select` (virtual loss)
    sensible             True    expand only sensible moves (win now / must block)
    tree_reuse           True    keep the subtree of the played move (self-play; the graph
                                 search of a net player under a time budget keeps its graph)
    proofs               True    graph search only: propagate proven results (terminals,
                                 then win/draw/loss from children), steer selection and the
                                 move by them, stop once the root is proven (c4fast.mcgs)
    moves_left_slope     0.0     moves-left utility per ply (Lc0's; 0: off, searches exactly
                                 as without it); needs an evaluator with the moves-left
                                 estimate (a wdl column 4), else it stays off
    moves_left_cap       0.03    bound of the utility's absolute value
    moves_left_threshold 0.5     the utility applies at nodes whose |Q| exceeds this
    select_q             0.5     graph search's move (play) only: s > 0 plays the column of
                                 highest Q among those with at least s times the most
                                 visits, 0 the most visited (a proven win and the avoidance
                                 of proven losses come first either way; docs/ABLATIONS.md)
    root_search          puct    batched MCTS (self-play) only: ``puct`` (PUCT at the root,
                                 Dirichlet noise, forced playouts, visit-count targets) or
                                 ``gumbel`` (Gumbel top-m + sequential halving at the root,
                                 completed-Q policy targets, the move is the survivor;
                                 c4fast.gumbel). The graph search ignores it
    gumbel_actions       16      m: actions sampled without replacement at a Gumbel root
                                 (capped by the root's children)
    gumbel_c_visit       50.0    sigma(q) = (c_visit + max_b N(b)) * c_scale * q, q in [0, 1]
    gumbel_c_scale       1.0
    ==================== ======= ==========================================================

    The moves-left utility (issue 35; :func:`c4fast.puct.moves_left_utility`): at a node n
    with ``|Q(n)| > moves_left_threshold`` each visited child c adds to its PUCT score
    ``-Q(c) * clip(slope * (1 + M(c) - M(n)), -cap, cap)``, where Q(c) is the child's value
    for the side choosing at n (in [-1, 1]) and M the mean estimated plies to the game's end
    from a node's position (the exact distance for a proven node of the graph search), so
    ``1 + M(c) - M(n)`` is how much longer the game lasts through c than n's average. The
    side that is winning (Q(c) > 0) prefers shorter games, the side that is losing longer
    ones; the term never exceeds ``cap`` in absolute value, and is 0 with slope 0.
    """

    c_puct: float = field(default=1.1, metadata=opt("PUCT exploration constant"))
    fpu_reduction: float = field(default=0.2, metadata=opt("first-play-urgency reduction"))
    noise_alpha: float = field(default=0.8, metadata=opt("root Dirichlet concentration"))
    noise_fraction: float = field(default=0.25, metadata=opt("share of Dirichlet noise at the root"))
    forced_k: float = field(default=2.0, metadata=opt("forced-playout constant k (0: off)"))
    full_playouts: int = field(default=800, metadata=opt("playouts of a full search"))
    fast_playouts: int = field(default=160, metadata=opt("playouts of a fast search"))
    full_probability: float = field(default=0.25, metadata=opt("probability of a full search"))
    leaves_per_step: int = field(default=8, metadata=opt("leaves per game per step (virtual loss)"))
    sensible: bool = field(default=True, metadata=opt("expand only sensible moves"))
    tree_reuse: bool = field(default=True, metadata=opt("keep the subtree of the played move"))
    proofs: bool = field(default=True, metadata=opt("graph search: propagate proven results"))
    root_search: str = field(default="puct", metadata=opt(
        "self-play root search: puct (noise, playout-cap targets) or gumbel (sequential halving, "
        "completed-Q targets, the survivor is played)"))
    gumbel_actions: int = field(default=16, metadata=opt("gumbel: actions m sampled at the root"))
    gumbel_c_visit: float = field(default=50.0, metadata=opt("gumbel: c_visit of sigma(q)"))
    gumbel_c_scale: float = field(default=1.0, metadata=opt("gumbel: c_scale of sigma(q)"))
    moves_left_slope: float = field(default=0.0, metadata=opt(
        "moves-left utility per ply at decisive nodes (0: off; needs a net with the moves-left head)"))
    moves_left_cap: float = field(default=0.03, metadata=opt("bound of the moves-left utility"))
    moves_left_threshold: float = field(default=0.5, metadata=opt(
        "moves-left utility only at nodes whose |Q| exceeds this"))
    select_q: float = field(default=0.5, metadata=opt(
        "graph search's move (play): the highest-Q column among those with at least this share of the most "
        "visits (0: the most visited)"))

    def __post_init__(self):
        def bad(name, cond):
            if not cond:
                raise ValueError(f"SearchConfig.{name} has an invalid value {getattr(self, name)!r}")

        for f in ("c_puct", "fpu_reduction", "noise_alpha", "forced_k", "gumbel_c_visit", "gumbel_c_scale",
                  "moves_left_slope", "moves_left_cap"):
            v = getattr(self, f)
            bad(f, isinstance(v, (int, float)) and math.isfinite(v) and v >= 0)
        bad("noise_alpha", self.noise_alpha > 0)
        bad("noise_fraction", 0.0 <= self.noise_fraction <= 1.0)
        bad("moves_left_threshold", isinstance(self.moves_left_threshold, (int, float))
            and 0.0 <= self.moves_left_threshold < 1.0)
        bad("full_probability", 0.0 <= self.full_probability <= 1.0)
        bad("select_q", isinstance(self.select_q, (int, float)) and not isinstance(self.select_q, bool)
            and 0.0 <= self.select_q <= 1.0)
        for f in ("full_playouts", "fast_playouts", "leaves_per_step", "gumbel_actions"):
            v = getattr(self, f)
            bad(f, isinstance(v, int) and not isinstance(v, bool) and v >= 1)
        bad("fast_playouts", self.fast_playouts <= self.full_playouts)
        if self.root_search not in ROOT_SEARCHES:
            raise ValueError(f"SearchConfig.root_search must be one of {', '.join(ROOT_SEARCHES)}, "
                             f"got {self.root_search!r}")

    def kernel_params(self) -> KernelParams:
        return KernelParams(
            float(self.c_puct),
            float(self.fpu_reduction),
            float(self.noise_alpha),
            float(self.noise_fraction),
            float(self.forced_k),
            int(self.leaves_per_step),
            bool(self.sensible),
            bool(self.proofs),
            float(self.moves_left_slope),
            float(self.moves_left_cap),
            float(self.moves_left_threshold),
        )

    def gumbel_params(self) -> GumbelParams:
        return GumbelParams(
            self.root_search == "gumbel",
            int(self.gumbel_actions),
            float(self.gumbel_c_visit),
            float(self.gumbel_c_scale),
        )

    def replace(self, **changes) -> "SearchConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class EndgameConfig:
    """Exact endgame solving by a network player (:class:`c4fast.players.endgame.EndgameSolver`,
    used by ``nets.netplayer.NetPlayer``).

    When at most ``max_empty`` cells are empty, the player first solves the position
    exactly (alpha-beta to the end of the game, any board size) and plays an optimal move
    (fastest win, slowest loss; the net's policy breaks ties). A solve that does not finish
    within its budget is abandoned and the graph search plays with what is left.

    ================== ========= ========================================================
    field              default   meaning
    ================== ========= ========================================================
    max_empty          20        solve when empty cells <= this (0: never). Measured on
                                 Pons's balanced 6x7 positions (``python -m selfplay.bench.rules
                                 endgame``, loaded 2-core machine):
                                 90 % of solves take <= 0.017 s at 16..19 empty cells,
                                 <= 0.09 s at 20..23, <= 0.67 s at 24..27, so at 20 the
                                 solve fits the 0.1 s share of a 0.2 s move (wider Saiblo
                                 boards branch more: margin kept)
    share              0.5       share of a per-move time budget the solve may use
    nodes              200000    node budget of the solve under a playout budget (no
                                 clock involved, so such players stay deterministic)
    tt_log2            20        log2 of the solver's transposition table entries (16 B each)
    ================== ========= ========================================================
    """

    max_empty: int = 20
    share: float = 0.5
    nodes: int = 200_000
    tt_log2: int = 20

    def __post_init__(self):
        def bad(name, cond):
            if not cond:
                raise ValueError(f"EndgameConfig.{name} has an invalid value {getattr(self, name)!r}")

        for f in ("max_empty", "nodes", "tt_log2"):
            v = getattr(self, f)
            bad(f, isinstance(v, int) and not isinstance(v, bool) and v >= 0)
        bad("nodes", self.nodes >= 1)
        bad("tt_log2", 10 <= self.tt_log2 <= 28)
        bad("share", isinstance(self.share, (int, float)) and 0.0 < self.share <= 1.0)

    def replace(self, **changes) -> "EndgameConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
