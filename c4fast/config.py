"""Search configuration: one frozen dataclass, katac4's values as defaults."""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple


class KernelParams(NamedTuple):
    """The scalar settings the Numba kernels read (built by SearchConfig.kernel_params)."""

    c_puct: float
    fpu_reduction: float
    noise_alpha: float
    noise_fraction: float
    forced_k: float
    leaves_per_step: int
    sensible: bool


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Settings of the batched MCTS (:mod:`c4fast.mcts`) and the graph search (:mod:`c4fast.mcgs`).

    ================== ======= ==========================================================
    field              default meaning
    ================== ======= ==========================================================
    c_puct             1.1     PUCT exploration constant
    fpu_reduction      0.2     unvisited child value = parent value - fpu * sqrt(visited prior mass)
    noise_alpha        0.8     root Dirichlet concentration (full searches only)
    noise_fraction     0.25    share of the Dirichlet sample mixed into the root priors
    forced_k           2.0     forced playouts n = sqrt(k * P * total visits) at the root
                               (full searches only; 0 disables, and disables pruning)
    full_playouts      800     root visits of a full search
    fast_playouts      160     root visits of a fast search (playout cap randomization)
    full_probability   0.25    chance that a self-play search is full
    leaves_per_step    8       leaves selected per game per `select` (virtual loss)
    sensible           True    expand only sensible moves (win now / must block)
    tree_reuse         True    keep the subtree of the played move
    ================== ======= ==========================================================
    """

    c_puct: float = 1.1
    fpu_reduction: float = 0.2
    noise_alpha: float = 0.8
    noise_fraction: float = 0.25
    forced_k: float = 2.0
    full_playouts: int = 800
    fast_playouts: int = 160
    full_probability: float = 0.25
    leaves_per_step: int = 8
    sensible: bool = True
    tree_reuse: bool = True

    def __post_init__(self):
        def bad(name, cond):
            if not cond:
                raise ValueError(f"SearchConfig.{name} has an invalid value {getattr(self, name)!r}")

        for f in ("c_puct", "fpu_reduction", "noise_alpha", "forced_k"):
            v = getattr(self, f)
            bad(f, isinstance(v, (int, float)) and math.isfinite(v) and v >= 0)
        bad("noise_alpha", self.noise_alpha > 0)
        bad("noise_fraction", 0.0 <= self.noise_fraction <= 1.0)
        bad("full_probability", 0.0 <= self.full_probability <= 1.0)
        for f in ("full_playouts", "fast_playouts", "leaves_per_step"):
            v = getattr(self, f)
            bad(f, isinstance(v, int) and not isinstance(v, bool) and v >= 1)
        bad("fast_playouts", self.fast_playouts <= self.full_playouts)

    def kernel_params(self) -> KernelParams:
        return KernelParams(
            float(self.c_puct),
            float(self.fpu_reduction),
            float(self.noise_alpha),
            float(self.noise_fraction),
            float(self.forced_k),
            int(self.leaves_per_step),
            bool(self.sensible),
        )

    def replace(self, **changes) -> "SearchConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
